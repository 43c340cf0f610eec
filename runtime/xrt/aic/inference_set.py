"""`InferenceSet`: many inferences of one program across many devices (AIC100 names).

An InferenceSet makes ``num_activations`` activations: each is one device of the
`Context` running the program (a `Session` made from the `Qpc`, its NPU programs uploaded
once) and a thread that takes submissions from the set's queue. It makes
``set_size * num_activations`` handles. A handle's life cycle is the seed's:

    get_available() -> set_buffers([...]) -> submit(handle)
        -> get_completed() / get_completed_id(id) -> read get_buffers() -> put_completed()

Submissions pipeline across activations: while one device runs an inference, the others
take the next submissions (their inputs go up while the first device computes), so
throughput grows with the number of devices. Within one activation, each of its queue's
threads (`InferenceSetProperties.num_threads_per_queue`, AIC100's ``numThreadsPerQueue``)
runs one inference at a time in a session of its own; their host work overlaps and their
NPU programs take turns on the device (one program at a time: `NpuDevice.run_lock`).
`InferenceSetProperties.dev_mapping` (``devMapping``) names the devices the activations
run on.

When an activation fails (its device was lost, its worker crashed, a launch timed out),
the context's error handler gets the error, the activation retires (its device is not used
again by this set), and the inference is submitted again on another live activation, up
to `InferenceSetProperties.submit_num_retries` times; when no attempt is left or no
activation lives, the handle completes with ``status`` FAILED and the error, and its id is
in `InferenceSet.failed_ids`. Nothing waits forever on a dead device: every wait has the
set's retry timeout or the caller's timeout, and a set with no live activation refuses new
submissions at once.
"""

from __future__ import annotations

import collections
import itertools
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np

from xrt.aic.context import Context, LogLevel, ProgramSource
from xrt.aic.handles import (
    BufferTypes,
    HandleState,
    InferenceHandle,
    InferenceSample,
    InferenceSetProperties,
)
from xrt.backend.npu import LaunchStats, NpuBackend
from xrt.device import Device
from xrt.errors import ErrorCode, XrtError
from xrt.session import Session

__all__ = ["InferenceSet"]

_set_ids = itertools.count(1)
_open_sets: weakref.WeakSet[InferenceSet] = weakref.WeakSet()
_created_hooks: list[Callable[[InferenceSet], None]] = []
_registry_lock = threading.Lock()


class Program(ProgramSource, Protocol):
    """What an InferenceSet needs of its program (an `xrt.aic.Qpc`)."""

    def create_session(self, device: Device) -> Session: ...


class _Activation:
    """One device running the program, with its queue's threads (a session each)."""

    def __init__(self, index: int, device: Device, sessions: list[Session]) -> None:
        self.index = index
        self.device = device
        self.sessions = sessions
        self.session = sessions[0]
        self.name = device.name or repr(device)
        self.alive = True
        self.busy = 0  # threads running an inference
        self.threads: list[threading.Thread] = []


class InferenceSet:
    """Inferences of `qpc` on `num_activations` devices of `context` (see the module
    docstring).

    Args:
        context: Where the devices come from (`Context.find_device`).
        qpc: The program (`xrt.aic.Qpc`): its target picks the devices, its
            ``create_session(device)`` makes each activation's session.
        set_size: Handles per activation that can be queued at once (2 to 10 is the
            seed's advice).
        num_activations: Devices running the program.
        properties: Timeouts, retries and the name.

    Raises:
        XrtError: 11003 for sizes below 1 or too few free devices; the session's errors
            when the program does not load on a device (the devices claimed so far are
            given back).
    """

    obj_name = "InferenceSet"

    def __init__(
        self,
        context: Context,
        qpc: Program,
        set_size: int = 2,
        num_activations: int = 1,
        properties: InferenceSetProperties | None = None,
    ) -> None:
        for what, value in (("set_size", set_size), ("num_activations", num_activations)):
            if not isinstance(value, int) or value < 1:
                raise XrtError(ErrorCode.OUT_OF_RANGE, f"InferenceSet: {what} {value!r} < 1")
        self.id = next(_set_ids)
        self.properties = properties or InferenceSetProperties()
        self.name = self.properties.name or f"InferenceSet{self.id}"
        self.context = context
        self.qpc = qpc
        self._cond = threading.Condition()
        self._queue: collections.deque[InferenceHandle] = collections.deque()
        self._completed: collections.deque[InferenceHandle] = collections.deque()
        self._observers: list[Callable[[InferenceSample], None]] = []
        self._next_id = itertools.count()
        self._outstanding = 0
        self._closing = False
        self.failed_ids: list[int] = []
        self.completed_count = 0
        self._activations = self._make_activations(num_activations)
        first = self._activations[0].session
        values = first.network_view.values
        self.input_names: tuple[str, ...] = first.inputs
        self.output_names: tuple[str, ...] = first.outputs
        types = BufferTypes(
            self.name,
            self.input_names,
            self.output_names,
            tuple((values[n].dtype.numpy, tuple(values[n].shape)) for n in first.inputs),
            tuple((values[n].dtype.numpy, tuple(values[n].shape)) for n in first.outputs),
        )
        count = set_size * num_activations
        self._handles = [InferenceHandle(self, i, types) for i in range(count)]
        self._available: collections.deque[InferenceHandle] = collections.deque(self._handles)
        for act in self._activations:
            for t, session in enumerate(act.sessions):
                name = f"{self.name}-act{act.index}-q{t}"
                thread = threading.Thread(
                    target=self._serve, args=(act, session), name=name, daemon=True
                )
                act.threads.append(thread)
                thread.start()
        with _registry_lock:
            _open_sets.add(self)
            hooks = list(_created_hooks)
        for hook in hooks:
            hook(self)
        context.log(
            LogLevel.INFO,
            f"{self.name}: {num_activations} activation(s) on "
            f"{[a.name for a in self._activations]}, {len(self._handles)} handle(s)",
        )

    def _make_activations(self, count: int) -> list[_Activation]:
        props = self.properties
        threads = props.num_threads_per_queue
        if not isinstance(threads, int) or isinstance(threads, bool) or threads < 1:
            raise XrtError(ErrorCode.OUT_OF_RANGE, f"num_threads_per_queue {threads!r} < 1")
        if props.dev_mapping and len(props.dev_mapping) != count:
            raise XrtError(
                ErrorCode.OUT_OF_RANGE,
                f"dev_mapping names {len(props.dev_mapping)} device(s) for {count} activation(s)",
            )
        devices = (
            self.context.claim_named(self.qpc, props.dev_mapping)
            if props.dev_mapping
            else self.context.claim_devices(self.qpc, count)
        )
        made: list[_Activation] = []
        opened: list[Session] = []
        try:
            for i, dev in enumerate(devices):
                sessions = []
                for _ in range(threads):  # each thread's programs in buffers of their own
                    sessions.append(self.qpc.create_session(dev))
                    opened.append(sessions[-1])
                    for b in sessions[-1].backends:  # the retry timeout bounds each launch
                        if isinstance(b, NpuBackend):
                            b.timeout_s = props.submit_retry_timeout_ms / 1000
                made.append(_Activation(i, dev, sessions))
        except BaseException:
            for session in opened:
                session.close()
            for dev in devices:
                self.context.release(dev)
            raise
        return made

    @staticmethod
    def open_sets() -> list[InferenceSet]:
        """Every InferenceSet of this process not closed yet, oldest first."""
        with _registry_lock:
            return sorted(_open_sets, key=lambda s: s.id)

    @staticmethod
    def on_created(hook: Callable[[InferenceSet], None], *, remove: bool = False) -> None:
        """Call `hook(set)` for every InferenceSet made from now on (profilers matching
        names); ``remove=True`` unregisters it."""
        with _registry_lock:
            if remove:
                if hook in _created_hooks:
                    _created_hooks.remove(hook)
            else:
                _created_hooks.append(hook)

    # -- handles ------------------------------------------------------------------------------

    @property
    def num_activations(self) -> int:
        return len(self._activations)

    @property
    def num_handles(self) -> int:
        """``set_size * num_activations``."""
        return len(self._handles)

    @property
    def devices(self) -> list[str]:
        """The device name of each activation, by index."""
        return [a.name for a in self._activations]

    def session(self, activation: int, thread: int = 0) -> Session:
        """The session of activation `activation`'s queue thread `thread` (callbacks,
        launch counters)."""
        return self._activations[activation].sessions[thread]

    @property
    def live_activations(self) -> int:
        """Activations whose device still works."""
        return sum(a.alive for a in self._activations)

    def get_available(self, timeout: float | None = None) -> InferenceHandle:
        """A handle from the available list; blocks until one is put back.

        Raises:
            XrtError: 11015 when `timeout` seconds pass first; 11012 after `close`.
        """
        with self._cond:
            if not self._cond.wait_for(lambda: self._available or self._closing, timeout):
                raise XrtError(
                    ErrorCode.TIMEOUT,
                    f"{self.name}: no handle became available in {timeout} s (all "
                    f"{len(self._handles)} are submitted or not put back: put_completed)",
                )
            self._check_open("get_available")
            handle = self._available.popleft()
            handle.state = HandleState.HELD
            handle.error, handle._results, handle._outputs = None, [], None
            return handle

    def submit(
        self,
        handle_or_buffers: InferenceHandle | Sequence[np.ndarray],
        id: int | None = None,
        timeout: float | None = None,
    ) -> InferenceHandle:
        """Queue an inference: a handle from `get_available` with its buffers set, or the
        buffers themselves (then a handle is taken from the available list, waiting up to
        `timeout` like `get_available`). `id` defaults to the next number.

        Returns:
            The submitted handle (its ``id`` set).

        Raises:
            XrtError: 11012 for a handle not HELD or without buffers, or after `close`;
                11014 when no activation is alive; 11015 when no handle came back in
                `timeout` seconds.
        """
        if isinstance(handle_or_buffers, InferenceHandle):
            handle = handle_or_buffers
            self._own(handle, "submit")
        else:
            handle = self.get_available(timeout)
            try:
                handle.set_buffers(list(handle_or_buffers))
            except XrtError:
                self._put_back(handle)
                raise
        with self._cond:
            self._check_open("submit")
            if handle.state is not HandleState.HELD or not handle._inputs:
                raise XrtError(
                    ErrorCode.WRONG_ORDER,
                    f"submit {handle!r}: take it with get_available and set_buffers first",
                )
            if not self.live_activations:
                raise XrtError(
                    ErrorCode.DEVICE_INTERNAL,
                    f"{self.name}: no activation is alive (every device failed; ids "
                    f"{self.failed_ids} failed)",
                )
            handle.id = next(self._next_id) if id is None else int(id)
            handle.state = HandleState.QUEUED
            handle._attempts, handle._cycles, handle.activation = 0, 0, -1
            handle._times = [time.perf_counter(), 0.0, 0.0]
            self._outstanding += 1
            self._queue.append(handle)
            self._cond.notify_all()
        return handle

    def get_completed(self, timeout: float | None = None) -> InferenceHandle:
        """The next completed handle, in completion order (check ``handle.ok``).

        Raises:
            XrtError: 11012 when nothing is submitted or completed (the wait could never
                end); 11015 when `timeout` seconds pass first.
        """
        return self._take(None, timeout)

    def get_completed_id(self, id: int, timeout: float | None = None) -> InferenceHandle:
        """The handle of submission `id`, waiting for it to complete.

        Raises:
            XrtError: 11012 when no submission has that id; 11015 on `timeout`.
        """
        return self._take(int(id), timeout)

    def _take(self, want: int | None, timeout: float | None) -> InferenceHandle:
        def found() -> InferenceHandle | None:
            for h in self._completed:
                if want is None or h.id == want:
                    return h
            return None

        def waitable() -> bool:
            if want is None:
                return bool(self._outstanding)
            return any(h.id == want for h in self._queue) or any(
                h.id == want and h.state is HandleState.RUNNING for h in self._handles
            )

        with self._cond:
            ready = self._cond.wait_for(lambda: found() is not None or not waitable(), timeout)
            handle = found()
            if handle is None:
                if not ready:
                    raise XrtError(
                        ErrorCode.TIMEOUT,
                        f"{self.name}: no completion{'' if want is None else f' of id {want}'} "
                        f"in {timeout} s",
                    )
                what = "nothing is submitted" if want is None else f"no submission has id {want}"
                raise XrtError(ErrorCode.WRONG_ORDER, f"{self.name}: {what}")
            self._completed.remove(handle)
            handle.state = HandleState.DELIVERED
            return handle

    def put_completed(self, handle: InferenceHandle) -> None:
        """Put a fetched handle back into the available list.

        Raises:
            XrtError: 11012 unless it came from `get_completed` / `get_completed_id`.
        """
        self._own(handle, "put_completed")
        if handle.state is not HandleState.DELIVERED:
            raise XrtError(
                ErrorCode.WRONG_ORDER,
                f"put_completed {handle!r}: only a handle from get_completed goes back",
            )
        self._put_back(handle)

    def _put_back(self, handle: InferenceHandle) -> None:
        with self._cond:
            handle.state = HandleState.AVAILABLE
            handle._inputs, handle._outputs = [], None
            self._available.append(handle)
            self._cond.notify_all()

    def wait_for_completion(self, timeout: float | None = None) -> None:
        """Wait until every submitted inference has completed or failed.

        Raises:
            XrtError: 11015 when `timeout` seconds pass first.
        """
        with self._cond:
            if not self._cond.wait_for(lambda: self._outstanding == 0, timeout):
                raise XrtError(
                    ErrorCode.TIMEOUT,
                    f"{self.name}: {self._outstanding} inference(s) still running after "
                    f"{timeout} s",
                )

    def _own(self, handle: InferenceHandle, what: str) -> None:
        if not isinstance(handle, InferenceHandle) or handle._owner is not self:
            raise XrtError(ErrorCode.WRONG_TYPE, f"{what}: {handle!r} is not a handle of {self}")

    def _check_open(self, what: str) -> None:
        if self._closing:
            raise XrtError(ErrorCode.WRONG_ORDER, f"{what}: {self.name} is closed")

    # -- profiling ----------------------------------------------------------------------------

    def add_observer(self, observer: Callable[[InferenceSample], None]) -> None:
        """Call `observer(sample)` after every finished inference (profilers)."""
        with self._cond:
            self._observers.append(observer)

    def remove_observer(self, observer: Callable[[InferenceSample], None]) -> None:
        with self._cond:
            if observer in self._observers:
                self._observers.remove(observer)

    # -- the activations ----------------------------------------------------------------------

    def _my_turn(self, act: _Activation) -> bool:
        """The head of the queue goes to the lowest-numbered idle live activation: devices
        fill in order, so which device runs what does not depend on thread timing."""
        if not self._queue:
            return False
        idle = [a.index for a in self._activations if a.alive and a.busy < len(a.sessions)]
        return bool(idle) and idle[0] == act.index

    def _next_for(self, act: _Activation, done: bool) -> InferenceHandle | None:
        with self._cond:
            act.busy -= done
            self._cond.notify_all()
            self._cond.wait_for(lambda: self._closing or not act.alive or self._my_turn(act))
            if self._closing or not act.alive:
                return None
            act.busy += 1
            handle = self._queue.popleft()
            handle.state = HandleState.RUNNING
            handle.activation = act.index
            handle._attempts += 1
            handle._times[1] = time.perf_counter()
            return handle

    def _serve(self, act: _Activation, session: Session) -> None:
        done = False
        while (handle := self._next_for(act, done)) is not None:
            done = True
            try:
                results, cycles = self._run(session, handle)
            except Exception as exc:
                self._failed(act, handle, exc)
                continue
            self._finish(handle, results, cycles, None)

    def _run(self, session: Session, handle: InferenceHandle) -> tuple[list[np.ndarray], int]:
        stats = _npu_stats(session)
        before = len(stats)
        outs = session.forward(dict(zip(self.input_names, handle._inputs, strict=True)))
        cycles = sum(s.busy_cycles for s in _npu_stats(session)[before:])
        arrays = [t.numpy() for t in outs]
        if handle._outputs is not None:
            for dst, src in zip(handle._outputs, arrays, strict=True):
                dst[...] = src
            arrays = list(handle._outputs)
        return arrays, cycles

    def _failed(self, act: _Activation, handle: InferenceHandle, exc: Exception) -> None:
        error = exc if isinstance(exc, XrtError) else XrtError(ErrorCode.DEVICE_INTERNAL, str(exc))
        with self._cond:
            act.alive = False
            self._cond.notify_all()
        self.context.report_error(
            XrtError(
                error.code,
                f"{self.name}: activation {act.index} on {act.name} failed on id {handle.id} "
                f"and retires: {error.message}",
            )
        )
        with self._cond:
            retry = handle._attempts <= self.properties.submit_num_retries
            if retry and self.live_activations and not self._closing:
                handle.state = HandleState.QUEUED
                self._queue.appendleft(handle)  # first in line: it was submitted earliest
                self._cond.notify_all()
                self.context.log(
                    LogLevel.WARN,
                    f"{self.name}: id {handle.id} submitted again (attempt {handle._attempts + 1})",
                )
                requeued = True
            else:
                requeued = False
            orphans = [] if self.live_activations else list(self._queue)
            if orphans:
                self._queue.clear()
        if not requeued:
            self._finish(handle, [], 0, error)
        for h in orphans:  # no device is left to run them
            self._finish(h, [], 0, XrtError(error.code, f"{self.name}: no activation is alive"))

    def _finish(
        self,
        handle: InferenceHandle,
        results: list[np.ndarray],
        cycles: int,
        error: XrtError | None,
    ) -> None:
        handle._times[2] = time.perf_counter()
        handle._cycles = cycles
        act = self._activations[handle.activation] if handle.activation >= 0 else None
        sample = InferenceSample(
            set_name=self.name,
            id=handle.id if handle.id is not None else -1,
            activation=handle.activation,
            device=act.name if act else "",
            submitted_s=handle._times[0],
            started_s=handle._times[1] or handle._times[0],
            completed_s=handle._times[2],
            device_cycles=cycles,
            attempts=handle._attempts,
            ok=error is None,
        )
        with self._cond:
            handle._results, handle.error = results, error
            handle.state = HandleState.COMPLETED
            if error is not None and handle.id is not None:
                self.failed_ids.append(handle.id)
            self.completed_count += 1
            self._outstanding -= 1
            self._completed.append(handle)
            observers = list(self._observers)
            self._cond.notify_all()
        for observe in observers:
            observe(sample)

    # -- life cycle ---------------------------------------------------------------------------

    def close(self) -> None:
        """Stop the activations (queued inferences complete as failed), close their sessions
        and give their devices back to the context. Idempotent."""
        with self._cond:
            if self._closing:
                return
            self._closing = True
            orphans = list(self._queue)
            self._queue.clear()
            self._cond.notify_all()
        for h in orphans:
            self._finish(h, [], 0, XrtError(ErrorCode.WRONG_ORDER, f"{self.name} closed"))
        for act in self._activations:
            for thread in act.threads:
                thread.join()
            for session in act.sessions:
                try:
                    session.close()
                except XrtError as exc:  # a lost device cannot free its buffers: go on
                    self.context.log(LogLevel.WARN, f"{self.name}: closing on {act.name}: {exc}")
            self.context.release(act.device)
        with _registry_lock:
            _open_sets.discard(self)
        with self._cond:
            self._observers.clear()  # profilers stop hearing from a closed set

    def __enter__(self) -> InferenceSet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"InferenceSet({self.name!r}, {self.live_activations}/{self.num_activations} "
            f"activations, {len(self._handles)} handles)"
        )


def _npu_stats(session: Session) -> list[LaunchStats]:
    """The launch counters of the session's NPU backend (empty for host-only sessions)."""
    for b in session.backends:
        if isinstance(b, NpuBackend):
            return list(b.launch_stats)
    return []
