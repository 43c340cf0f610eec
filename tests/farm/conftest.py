"""Fixtures of the farm tests: a real labgrid farm on loopback (coordinator, two hosts of
one `npu-emu serve` and one exporter each, a reaper) and real job subprocesses."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator

import pytest

pytest.importorskip("labgrid", reason="the farm tests need the 'farm' extra (make install)")

from npuemu.farm.launch import FarmProcess, LoopbackFarm
from xrt.farm import FarmClient

GRACE_S = 3.0  # the reaper's grace in these tests


class Job:
    """One `npuemu.farm.job` subprocess; its JSON events are collected as they come."""

    def __init__(self, farm: LoopbackFarm, tags: str = "target=zg330", wait_s: float = 300):
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "npuemu.farm.job", tags, str(wait_s)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **farm.env},
        )
        self.events: list[dict] = []
        self.stderr = ""
        self._cond = threading.Condition()
        self._done = False
        threading.Thread(target=self._pump, daemon=True).start()
        threading.Thread(target=self._pump_err, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with contextlib.suppress(ValueError), self._cond:
                self.events.append(json.loads(line))
                self._cond.notify_all()
        with self._cond:
            self._done = True
            self._cond.notify_all()

    def _pump_err(self) -> None:
        assert self.proc.stderr is not None
        self.stderr = self.proc.stderr.read()

    def wait_event(self, name: str, timeout_s: float) -> dict:
        """The first event `name`; fails with the job's output when it does not come."""

        def got() -> dict | None:
            return next((e for e in self.events if e["event"] == name), None)

        with self._cond:
            self._cond.wait_for(lambda: got() is not None or self._done, timeout_s)
            event = got()
        if event is None:
            self.proc.wait(30) if self._done else None
            raise AssertionError(
                f"job {self.proc.pid} sent no {name!r} in {timeout_s} s "
                f"(exit {self.proc.poll()}): {self.events}\n{self.stderr[-3000:]}"
            )
        return event

    def has(self, name: str) -> bool:
        with self._cond:
            return any(e["event"] == name for e in self.events)

    def give_back(self, timeout_s: float = 120) -> dict:
        assert self.proc.stdin is not None
        self.proc.stdin.write("done\n")
        self.proc.stdin.flush()
        event = self.wait_event("released", timeout_s)
        assert self.proc.wait(timeout_s) == 0, self.stderr
        return event

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)


@pytest.fixture(scope="module")
def farm() -> Iterator[LoopbackFarm]:
    with LoopbackFarm.start(hosts=2, target="zg330", grace_s=None) as f:
        yield f


@pytest.fixture
def jobs(farm: LoopbackFarm) -> Iterator[list[Job]]:
    """Start jobs with ``jobs.append(Job(farm))``; all are killed (by PID) at the end."""
    started: list[Job] = []
    yield started
    for job in started:
        job.stop()
    with FarmClient(farm.coordinator) as client:  # give back what killed jobs left
        for res in client.reservations():
            client.cancel(res.token)
        for name, place in list(client.places.items()):
            if place.acquired:
                client.release(name)


@pytest.fixture
def reaper(farm: LoopbackFarm) -> Iterator[FarmProcess]:
    """The reaper with a short grace, for the tests that kill jobs. Not running in the
    other tests: a grace that short would also reap a slow job between acquire and open."""
    farm.start_reaper(GRACE_S)
    assert farm.reaper is not None
    yield farm.reaper
    farm.reaper.stop()
    farm.reaper = None
