"""Profiling handles of the AIC100 runtime: per-sample (`ProfilingHandle`) and periodic
(`StreamProfilingHandle`) reports on the inferences of `InferenceSet` programs.

A *program* here is an `InferenceSet` (a program loaded on its activations). Each finished
inference is an `InferenceSample`: submission, start and completion instants, the
activation and device that ran it, the engine's busy cycles and whether it succeeded. A
report is a `ProfilingReport` of samples; with `ProfilingType.LATENCY` (the default) it
carries every sample, with `ProfilingType.STATS` only the summary (count, failures,
p50/p99/mean latency, inferences per second, device cycles).
"""

from __future__ import annotations

import re
import statistics
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import Enum

from xrt.aic.handles import InferenceSample
from xrt.aic.inference_set import InferenceSet
from xrt.errors import ErrorCode, XrtError

__all__ = [
    "ProfilingHandle",
    "ProfilingReport",
    "ProfilingType",
    "StreamProfilingHandle",
]


class ProfilingType(Enum):
    """What a report holds."""

    LATENCY = "latency"  # every sample and the summary
    STATS = "stats"  # the summary only


def _percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return 0.0
    k = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return sorted_values[k]


@dataclass(frozen=True)
class ProfilingReport:
    """Samples collected over ``[start_s, end_s]`` (``time.perf_counter()`` instants).

    Attributes:
        name: The handle's name.
        samples: Every sample (empty for `ProfilingType.STATS`).
        count: Inferences that finished in the window.
        failed: Of those, how many failed.
        latency_p50_s / latency_p99_s / latency_mean_s: Submission to completion.
        inferences_per_s: ``count`` over the window.
        device_cycles: Engine busy cycles summed over the samples.
    """

    name: str
    start_s: float
    end_s: float
    samples: tuple[InferenceSample, ...]
    count: int
    failed: int
    latency_p50_s: float
    latency_p99_s: float
    latency_mean_s: float
    inferences_per_s: float
    device_cycles: int

    @classmethod
    def of(
        cls,
        name: str,
        samples: Iterable[InferenceSample],
        start_s: float,
        end_s: float,
        kind: ProfilingType,
    ) -> ProfilingReport:
        got = tuple(samples)
        lat = sorted(s.latency_s for s in got)
        window = max(end_s - start_s, 1e-9)
        return cls(
            name=name,
            start_s=start_s,
            end_s=end_s,
            samples=got if kind is ProfilingType.LATENCY else (),
            count=len(got),
            failed=sum(not s.ok for s in got),
            latency_p50_s=_percentile(lat, 0.5),
            latency_p99_s=_percentile(lat, 0.99),
            latency_mean_s=statistics.fmean(lat) if lat else 0.0,
            inferences_per_s=len(got) / window,
            device_cycles=sum(s.device_cycles for s in got),
        )

    def summary(self) -> str:
        """One line."""
        return (
            f"{self.name}: {self.count} inference(s) ({self.failed} failed) in "
            f"{self.end_s - self.start_s:.3f} s, {self.inferences_per_s:.1f}/s, latency p50 "
            f"{self.latency_p50_s * 1e3:.1f} ms p99 {self.latency_p99_s * 1e3:.1f} ms, "
            f"{self.device_cycles} device cycles"
        )


ReportCallback = Callable[[ProfilingReport], None]


class ProfilingHandle:
    """Collect `num_samples` inferences of `program`, then report once (AIC100
    ``ProfilingHandle``, num-iter based).

    `start` begins collecting; the callback gets the report when `num_samples` inferences
    have finished, or at `stop` with what was collected (no callback when nothing was, as
    the seed says). Samples after the report are not collected (start again for more).
    """

    def __init__(
        self,
        program: InferenceSet,
        num_samples: int,
        callback: ReportCallback,
        type: ProfilingType = ProfilingType.LATENCY,
        name: str = "",
    ) -> None:
        if not isinstance(program, InferenceSet):
            raise XrtError(ErrorCode.WRONG_TYPE, f"ProfilingHandle: {program!r} is no program")
        if not isinstance(num_samples, int) or num_samples < 1:
            raise XrtError(ErrorCode.OUT_OF_RANGE, f"ProfilingHandle: num_samples {num_samples!r}")
        self.program = program
        self.num_samples = num_samples
        self.callback = callback
        self.type = ProfilingType(type)
        self.name = name or f"profile:{program.name}"
        self._lock = threading.Lock()
        self._samples: list[InferenceSample] = []
        self._start = 0.0
        self._active = False
        self.reports: list[ProfilingReport] = []

    def start(self) -> None:
        """Collect from now on (clears what an earlier run collected)."""
        with self._lock:
            if self._active:
                raise XrtError(ErrorCode.WRONG_ORDER, f"{self.name}: already started")
            self._samples, self._start, self._active = [], time.perf_counter(), True
        self.program.add_observer(self._observe)

    def _observe(self, sample: InferenceSample) -> None:
        with self._lock:
            if not self._active:
                return
            self._samples.append(sample)
            full = len(self._samples) >= self.num_samples
        if full:
            self._deliver()

    def stop(self) -> None:
        """Stop collecting and report what was collected (nothing collected: no report)."""
        self._deliver()

    def _deliver(self) -> None:
        with self._lock:
            if not self._active:
                return
            self._active = False
            samples = self._samples
        self.program.remove_observer(self._observe)
        if not samples:
            return
        report = ProfilingReport.of(self.name, samples, self._start, time.perf_counter(), self.type)
        self.reports.append(report)
        self.callback(report)


class StreamProfilingHandle:
    """A report every `reporting_period_s` of the inferences of its programs (AIC100
    ``StreamProfilingHandle``, duration based).

    Programs are given, added with `add_program`, or matched by name: with
    `program_pattern` (a regular expression), every open `InferenceSet` whose name matches
    is added at `start`, and every one created while the handle runs is added when it is
    made (a closed set stops reporting). After `start`, the callback gets a report at every
    period boundary, even an empty one; `stop` delivers the last, partial period;
    `flush_reports` returns when every report was delivered. Reports are delivered on the
    handle's own thread, in order.
    """

    def __init__(
        self,
        reporting_period_s: float,
        callback: ReportCallback,
        type: ProfilingType = ProfilingType.LATENCY,
        name: str = "stream-profile",
        programs: Iterable[InferenceSet] = (),
        program_pattern: str | None = None,
    ) -> None:
        if not reporting_period_s > 0:
            raise XrtError(
                ErrorCode.OUT_OF_RANGE,
                f"StreamProfilingHandle: reporting_period_s {reporting_period_s!r} <= 0",
            )
        self.reporting_period_s = float(reporting_period_s)
        self.callback = callback
        self.type = ProfilingType(type)
        self.name = name
        self._pattern = re.compile(program_pattern) if program_pattern else None
        self._lock = threading.Condition()
        self._programs: list[InferenceSet] = []
        self._samples: list[InferenceSample] = []
        self._pending: list[ProfilingReport] = []  # made, not yet delivered
        self._window_start = 0.0
        self._active = False
        self._thread: threading.Thread | None = None
        self.reports: list[ProfilingReport] = []
        for p in programs:
            self.add_program(p)

    def matches(self, program: InferenceSet) -> bool:
        """Whether `program_pattern` matches the program's name."""
        return bool(self._pattern and self._pattern.search(program.name))

    def add_program(self, program: InferenceSet) -> None:
        """Profile `program` too (idempotent)."""
        with self._lock:
            if program in self._programs:
                return
            self._programs.append(program)
        program.add_observer(self._observe)

    def _created(self, program: InferenceSet) -> None:
        if self.matches(program):
            self.add_program(program)

    def remove_program(self, program: InferenceSet) -> None:
        """Stop profiling `program` (idempotent)."""
        with self._lock:
            if program not in self._programs:
                return
            self._programs.remove(program)
        program.remove_observer(self._observe)

    def _observe(self, sample: InferenceSample) -> None:
        with self._lock:
            if self._active:
                self._samples.append(sample)

    def start(self) -> None:
        """Begin the periods."""
        with self._lock:
            if self._active:
                raise XrtError(ErrorCode.WRONG_ORDER, f"{self.name}: already started")
            self._active = True
            self._samples = []
            self._window_start = time.perf_counter()
            self._thread = threading.Thread(target=self._periods, name=self.name, daemon=True)
            self._thread.start()
        if self._pattern is not None:
            InferenceSet.on_created(self._created)
            for program in InferenceSet.open_sets():
                self._created(program)

    def _cut(self, now: float) -> None:
        """Close the current window into a pending report (lock held)."""
        report = ProfilingReport.of(self.name, self._samples, self._window_start, now, self.type)
        self._samples, self._window_start = [], now
        self._pending.append(report)

    def _periods(self) -> None:
        with self._lock:
            while self._active:
                deadline = self._window_start + self.reporting_period_s
                self._lock.wait_for(
                    lambda: not self._active, max(0.0, deadline - time.perf_counter())
                )
                if self._active:
                    self._cut(time.perf_counter())
                self._deliver_pending()

    def _deliver_pending(self) -> None:
        """Hand pending reports to the callback, in order (lock held; released meanwhile)."""
        while self._pending:
            report = self._pending.pop(0)
            self._lock.release()
            try:
                self.callback(report)
            finally:
                self._lock.acquire()
            self.reports.append(report)
            self._lock.notify_all()

    def stop(self) -> None:
        """End the periods; the last, partial one is reported."""
        with self._lock:
            if not self._active:
                return
            self._active = False
            self._cut(time.perf_counter())
            self._lock.notify_all()
        if self._pattern is not None:
            InferenceSet.on_created(self._created, remove=True)
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        with self._lock:
            self._deliver_pending()

    def flush_reports(self, timeout: float | None = None) -> None:
        """Return when no report is left to deliver.

        Raises:
            XrtError: 11015 when `timeout` passes first.
        """
        with self._lock:
            if not self._lock.wait_for(lambda: not self._pending, timeout):
                raise XrtError(
                    ErrorCode.TIMEOUT, f"{self.name}: {len(self._pending)} report(s) undelivered"
                )
