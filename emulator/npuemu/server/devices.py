"""One device a server hosts: its memory files, its worker process, its state and counters,
the restart of a dead worker, and the clearing at a lease's end.

`SimDevice.call` sends a request of the device port (`xrt.hw.port`) to the worker on a
holder's behalf and turns a failure into the service's status (`ServiceError`). What the
worker's taps saw comes back as `Served` records (`_served`): to the lease's recording and
the register trace. At a lease's end the next holder gets a pristine device: the worker's
model goes back to the state it had when new (every flop and SRAM, whatever the reset tree
clears: the boot state, or ``serve --warm``'s), and the memory files are new ones. The
leases themselves: `npuemu.server.manager`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import grpc

from npuemu.server import checkpoint_device
from npuemu.server.checkpoint import Checkpoint
from npuemu.server.device_log import DeviceLogHub, device_logger
from npuemu.server.errors import ServiceError
from npuemu.server.leases import Lease, check_transition
from npuemu.server.register_ring import LeaseRing
from npuemu.server.shm import DeviceMemory
from npuemu.server.worker_process import (
    WorkerCancelledError,
    WorkerError,
    WorkerProcess,
    WorkerUnavailableError,
)
from npuemu.sim.build import BuiltModel
from npuemu.worker.config import WorkerConfig
from xrt.errors import ErrorCode
from xrt.hw.config import TargetConfig
from xrt.hw.debug import DebugOp, DebugRequest
from xrt.hw.port import (
    DeviceEvent,
    PortErrorCode,
    PristineRestore,
    PristineSave,
    Reply,
    Request,
    RingDetach,
    Served,
    TapFlush,
    WatchRings,
    WavesForget,
)
from xrt.hw.ring import RingSlot
from xrt.hw.wire import REASON_RESTARTING, DeviceState
from xrt.recording import RecordingWriter
from xrt.regtrace import RegisterTraceLog

__all__ = ["Counters", "SimDevice"]

log = logging.getLogger("npuemu.server")

DEFAULT_CALL_TIMEOUT_S = 30.0  # watchdog on any worker request
RESTART_BACKOFF_S = (0.5, 1.0, 2.0, 5.0, 15.0, 30.0)  # then every 30 s, for ever
RETRY_AFTER_S = 0.5  # the retry hint of a refusal that will likely work soon
WORKER_QUIT_S = 1.0  # at server shutdown: a worker that has not quit by then is killed
WAVES_QUIT_S = 10.0  # ... one that may close a waveform window on quit gets longer
SHUTTING_DOWN = "the npu-emu server is shutting down"


@dataclass
class Counters:
    cycles: int = 0
    requests: int = 0
    register_ops: int = 0
    memory_bytes_read: int = 0
    memory_bytes_written: int = 0
    worker_restarts: int = 0
    observer_requests: int = 0  # Observe* calls (not in `requests`: those are the holders')


class SimDevice:
    """One simulated NPU: memory files, a worker process, a state and counters.

    The state changes only under `lock`, in tasks no RPC can cancel (see `DeviceManager.end`
    and `_restart`), along the life cycle of `npuemu.server.leases.LIFE_CYCLE` (checked on
    every change). A restart that keeps failing stays RESTARTING, retries with back-off and
    says why in `fault` (health and error messages carry it).
    """

    def __init__(
        self,
        name: str,
        target: TargetConfig,
        model: BuiltModel,
        folder: Path,
        watchdog_s: float = DEFAULT_CALL_TIMEOUT_S,
        *,
        log_dir: Path | None = None,
        worker_config: WorkerConfig | None = None,
    ) -> None:
        self.name = name
        # The worker's folder (its log): beside the memory files unless a log folder is given.
        self.workdir = (log_dir or folder) / name
        self.worker_config = WorkerConfig(
            **{**vars(worker_config or WorkerConfig()), "target": target.name, "device": name}
        )
        self.watchdog_s = watchdog_s
        self.target = target
        self.model = model
        self.folder = folder
        self.memory = DeviceMemory(folder, name, target)
        self.worker: WorkerProcess | None = None
        self.lease: Lease | None = None
        self._state = DeviceState.STARTING
        self.counters = Counters()
        self.lock = asyncio.Lock()  # held by every state transition
        self.fault = ""  # why restarts keep failing ("" while the worker is fine)
        self.failed_restarts = 0
        self.on_fault: Callable[[SimDevice], None] | None = None
        self.register_trace: RegisterTraceLog | None = None  # --trace-registers
        self.recording: RecordingWriter | None = None  # --record: the current lease's
        self._restart_task: asyncio.Task[None] | None = None
        self._stopping = False
        self._calls_stopped = False  # server shutdown: no more requests to the worker
        self.ring: LeaseRing | None = None  # the holder's register ring, once asked for
        self._holder_calls = 0  # the holder's requests under way (queued or running)
        self._observer_calls = 0  # observers' requests under way (npuemu.server.observer)
        self.warm: Checkpoint | None = None  # serve --warm: every lease starts from it
        # FollowDeviceLog streams of the current lease: while any is open, the worker hands
        # ring requests to its port so the device's own events show (`watch_rings`).
        self._log_followers: dict[str, int] = {}
        self.device_log: DeviceLogHub | None = None  # the manager's: its streams and backlog

    @property
    def state(self) -> DeviceState:
        """Where the device is in its life cycle (`npuemu.server.leases.LIFE_CYCLE`)."""
        return self._state

    @state.setter
    def state(self, new: DeviceState) -> None:
        check_transition(self.name, self._state, new)
        self._state = new

    def _new_worker(self) -> WorkerProcess:
        worker = WorkerProcess(
            self.name, self.model, self.memory.fds, self.workdir, self.worker_config
        )
        worker.on_exit = self.schedule_restart
        worker.on_served = self._served
        worker.on_event = self._device_event
        return worker

    def _device_event(self, event: DeviceEvent) -> None:
        """The device's own event (npuemu.worker.device_watch): to its holder's device log
        streams (`DeviceLogHub`), and errors and resets into the server's log too (an
        interrupt per transfer would flood it)."""
        if self.device_log is not None:
            self.device_log.device_event(self.name, event)
        if event.kind != "interrupt":
            device_logger.log(
                event.level, "device %s: %s (cycle %d)", self.name, event.message, event.cycle
            )

    async def watch_rings(self, lease: Lease, on: bool) -> None:
        """A device log stream of `lease` opens (`on`) or closes: while any is open, the
        worker hands every ring request to its port, where the device's events are seen."""
        if self.lease is not lease:
            return
        before = self._log_followers.get(lease.id, 0)
        after = max(0, before + (1 if on else -1))
        self._log_followers = {lease.id: after}
        if (before == 0) != (after == 0):
            await self.call(WatchRings(after > 0), lease)

    def _served(self, served: Served) -> None:
        """A request the worker's taps saw (whatever its route: the pipe, the server's ring,
        the holder's ring): to the lease's recording and the register trace."""
        if self.recording is not None:
            self.recording.served(served)
        if self.register_trace is not None:
            self.register_trace.served(self.name, served)

    async def start(self) -> None:
        self.worker = self._new_worker()
        await self.worker.start()
        await self._set_pristine(self.worker)
        await self._warm_memories()
        self.state = DeviceState.FREE

    async def _set_pristine(self, worker: WorkerProcess) -> None:
        """Make the state every lease starts from the server's warm one (serve --warm: the
        checkpoint's registers and engines) instead of the boot state the worker took."""
        if self.warm is None:
            return

        async def call(request: Request) -> Reply:
            return await worker.call(request, self.watchdog_s)

        await checkpoint_device.restore_model_state(self, self.warm.model_state, call)
        await worker.call(PristineSave(), self.watchdog_s)

    async def _warm_memories(self) -> None:
        """The warm checkpoint's memories into the (new, zero) memory files."""
        if self.warm is not None:
            await checkpoint_device.write_memories(self, self.warm)

    @property
    def in_call(self) -> bool:
        """A request of the holder is under way (its lease is in use). An observer's
        request is not the holder's use: it keeps no lease alive."""
        if self._holder_calls:
            return True
        # The worker busy with no call under way: a cancelled call's stale answer.
        return self.worker is not None and self.worker.busy and not self._observer_calls

    def unavailable_message(self) -> str:
        text = f"device {self.name} is restarting its simulation worker; retry shortly"
        if self.fault:
            text += f" (the last {self.failed_restarts} restart(s) failed: {self.fault})"
        return text

    def restarting_error(self) -> ServiceError:
        """UNAVAILABLE for a call refused because the worker restarts: nothing was done,
        so the client may retry (the trailing metadata says so)."""
        return ServiceError(
            grpc.StatusCode.UNAVAILABLE,
            self.unavailable_message(),
            retry_reason=REASON_RESTARTING,
            retry_after_s=RETRY_AFTER_S,
        )

    def stop_calls(self) -> bool:
        """Server shutdown: stop the request in flight (its call ends with UNAVAILABLE
        saying so) and refuse the next ones. True when a request was in flight."""
        self._calls_stopped = True
        busy = self.worker is not None and self.worker.busy
        if self.worker is not None:
            self.worker.cancel_current()
        return busy

    async def call(self, request: Request, lease: Lease, extra_s: float = 0.0) -> Reply:
        """One request of the device port on behalf of `lease`; UNAVAILABLE while the
        worker restarts or when it fails, ABORTED when the lease ends before or while it
        runs, the status of a refusal otherwise (`_refused`).

        The watchdog allows `watchdog_s` plus `extra_s` (time the request itself may take,
        such as a wait for the interrupt) before it declares the worker hung.
        """
        what = request.TAG
        if self._calls_stopped:
            raise ServiceError(grpc.StatusCode.UNAVAILABLE, f"{SHUTTING_DOWN}: {what} not started")
        if self.worker is None or self.state in (DeviceState.STARTING, DeviceState.RESTARTING):
            raise self.restarting_error()
        self._holder_calls += 1
        try:
            reply = await self.worker.call(
                request,
                self.watchdog_s + extra_s,
                guard=lambda: self.lease is lease and not self._calls_stopped,
            )
        except WorkerCancelledError:
            if self._calls_stopped:
                raise ServiceError(
                    grpc.StatusCode.UNAVAILABLE,
                    f"{SHUTTING_DOWN}: {what} on {self.name} was stopped before it ended",
                ) from None
            raise ServiceError(
                grpc.StatusCode.ABORTED, f"the lease on {self.name} ended before {what} did"
            ) from None
        except WorkerUnavailableError as exc:
            self.schedule_restart(str(exc))
            raise ServiceError(grpc.StatusCode.UNAVAILABLE, str(exc)) from exc
        except WorkerError as exc:
            raise _refused(exc) from None
        finally:
            self._holder_calls -= 1
        self.counters.cycles = reply.cycles
        return reply

    def bind(self, lease: Lease, extra_s: float = 0.0) -> Callable[[Request], Awaitable[Reply]]:
        """`call` on behalf of `lease`, as one function of the request."""

        async def call(request: Request) -> Reply:
            return await self.call(request, lease, extra_s)

        return call

    async def flush_taps(self, lease: Lease) -> None:
        """While the lease is recorded: every request served so far, ring requests
        included, reaches the recording before what the server records next itself (a
        memory access, a checkpoint)."""
        if self.recording is not None and self.worker_config.taps:
            await self.call(TapFlush(), lease)

    async def observe(self, request: Request, lease: Lease | None) -> Reply:
        """One read-only request of an observer (`npuemu.server.observer`): the same worker
        path as the holder's requests, marked read-only (the worker refuses anything but
        reads and the observer's waveform window). No lease is used or touched; the taps
        see it as an observer's.

        With `lease`, the request runs only while that lease still holds the device (a
        lease end before its turn refuses it: ABORTED); without, whatever the holder.
        """
        what = request.TAG
        if self._calls_stopped:
            raise ServiceError(grpc.StatusCode.UNAVAILABLE, f"{SHUTTING_DOWN}: {what} not started")
        if self.worker is None or self.state in (DeviceState.STARTING, DeviceState.RESTARTING):
            raise self.restarting_error()

        def wanted() -> bool:
            held = lease is None or (self.lease is lease and self.state == DeviceState.LEASED)
            return held and not self._calls_stopped

        self.counters.observer_requests += 1
        self._observer_calls += 1
        try:
            reply = await self.worker.call(request, self.watchdog_s, wanted, read_only=True)
        except WorkerCancelledError:
            if self._calls_stopped:
                raise ServiceError(
                    grpc.StatusCode.UNAVAILABLE,
                    f"{SHUTTING_DOWN}: {what} on {self.name} was stopped before it ended",
                ) from None
            raise ServiceError(
                grpc.StatusCode.ABORTED,
                f"the lease on {self.name} ended before the observer's {what} ran",
            ) from None
        except WorkerUnavailableError as exc:
            self.schedule_restart(str(exc))
            raise ServiceError(grpc.StatusCode.UNAVAILABLE, str(exc)) from exc
        except WorkerError as exc:
            raise _refused(exc) from None
        finally:
            self._observer_calls -= 1
        self.counters.cycles = reply.cycles
        return reply

    def schedule_restart(self, reason: str) -> None:
        if self._stopping or (self._restart_task and not self._restart_task.done()):
            return
        log.error("device %s: %s", self.name, reason)
        if self.recording is not None:
            self.recording.worker_restarted(reason)
        self.state = DeviceState.RESTARTING
        self._restart_task = asyncio.get_running_loop().create_task(self._restart())

    async def _restart(self) -> None:
        """Replace the worker; keep trying with back-off for as long as it takes."""
        delay = 0.0
        while not self._stopping:
            await asyncio.sleep(delay)
            async with self.lock:
                if self._stopping:
                    return
                old, self.worker = self.worker, None
                await self._drop_ring(None)  # the new worker serves no ring: the holder asks again
                if old is not None:
                    await old.kill()  # its engines stop with it
                self.counters.worker_restarts += 1
                try:
                    if self.lease is None:  # what the dead worker's engines wrote goes
                        self._forget_all(self.memory.renew())
                    worker = self._new_worker()
                    await worker.start()
                    await self._set_pristine(worker)
                    if self.lease is None:
                        await self._warm_memories()
                    elif self._log_followers.get(self.lease.id):
                        await worker.call(WatchRings(True), self.watchdog_s)
                except Exception as exc:  # any failure: report it and try again later
                    self.failed_restarts += 1
                    self.fault = str(exc).splitlines()[0][:300] if str(exc) else repr(exc)
                    delay = RESTART_BACKOFF_S[min(self.failed_restarts, len(RESTART_BACKOFF_S)) - 1]
                    log.error(
                        "device %s: restart %d failed (next try in %.1f s): %s",
                        self.name,
                        self.failed_restarts,
                        delay,
                        self.fault,
                    )
                    if self.on_fault is not None:
                        self.on_fault(self)
                    continue
                self.worker = worker
                had_fault, self.fault, self.failed_restarts = bool(self.fault), "", 0
                self.state = DeviceState.LEASED if self.lease else DeviceState.FREE
                if self.lease is not None:
                    self.lease.touch()  # the restart was no absence of its holder
                log.info("device %s: simulation worker restarted (pid %s)", self.name, worker.pid)
                if had_fault and self.on_fault is not None:
                    self.on_fault(self)
                return

    async def open_ring(self, lease: Lease) -> LeaseRing:
        """The register ring of `lease` (made, and attached to the worker, on first use).

        Raises:
            ServiceError: the lease is not this device's, or the device is not serving.
        """
        async with self.lock:
            if self.lease is not lease or self.state != DeviceState.LEASED or self.worker is None:
                raise ServiceError(
                    grpc.StatusCode.FAILED_PRECONDITION,
                    f"device {self.name} cannot serve a register ring now ({self.state.name})",
                )
            if self.ring is None:
                ring = LeaseRing()
                try:
                    await self.worker.attach_ring(ring.fds, self.watchdog_s)
                except BaseException:
                    ring.close()
                    raise
                self.ring = ring
            lease.claimed = True
            lease.touch()
            return self.ring

    async def _drop_ring(self, worker: WorkerProcess | None) -> None:
        """Revoke the holder's register ring (it wakes a waiting client) and have the
        worker forget it (a dead worker has forgotten it already)."""
        ring, self.ring = self.ring, None
        if ring is None:
            return
        ring.revoke()
        try:
            if worker is not None and self.state not in (
                DeviceState.RESTARTING,
                DeviceState.STARTING,
            ):
                await worker.call(RingDetach(RingSlot.LEASE), self.watchdog_s)
        finally:
            ring.close()

    def _forget_all(self, fds: dict[str, int]) -> None:
        for fd in fds.values():
            self.memory.forget(fd)

    async def clear_after_lease(self) -> None:
        """A lease has ended: stop what runs (cancel the request in flight), put the model
        back to its pristine state (every flop and SRAM, the engines idle), THEN give the
        device new memory files, so no beat in flight lands after the clearing. A model
        that cannot save its state (coverage builds) is replaced by a new worker instead.
        On any failure the worker is killed (its engines stop with it) and the restart
        clears the memory again (it retries until that works, and reports what keeps
        failing)."""
        async with self.lock:
            if self.lease is not None:  # pragma: no cover - open() takes FREE devices only
                return
            worker = self.worker
            try:
                if worker is None or self.state in (DeviceState.RESTARTING, DeviceState.STARTING):
                    await self._drop_ring(None)
                    if worker is not None:
                        await worker.kill()
                    self._forget_all(self.memory.renew())  # the next worker maps the new files
                    return  # the restart ends in FREE
                self.state = DeviceState.RESETTING
                if worker.debug_used:  # a stopped device runs on, so the cancel gets through
                    worker.debug_used = False
                    await worker.debug_call(DebugRequest(DebugOp.CLEAR.value), self.watchdog_s)
                worker.cancel_current()
                await self._drop_ring(worker)  # before anything else: the next holder's device
                if not worker.savable:
                    await worker.kill()
                    self.state = DeviceState.RESTARTING
                    self._replace_worker("its model cannot save its state (a coverage build)")
                    return
                if self.worker_config.waves_dir:  # this lease's window is not the next's
                    await worker.call(WavesForget(), self.watchdog_s)
                await worker.call(PristineRestore(), self.watchdog_s)
                if any(self._log_followers.values()):  # the ring goes back to the taps' say
                    await worker.call(WatchRings(False), self.watchdog_s)
                self._log_followers = {}
                # Fresh memory files per lease: a descriptor or mapping anyone kept of the old
                # ones (a former holder's local fast path) never sees the next holder.
                old = self.memory.renew()
                try:
                    for name, old_fd in old.items():
                        await worker.remap_memory(old_fd, self.memory.fds[name], self.watchdog_s)
                finally:
                    self._forget_all(old)
                await self._warm_memories()
                self.state = DeviceState.FREE
            except Exception as exc:
                log.error(
                    "device %s: clearing after a lease failed (%s): restarting it", self.name, exc
                )
                if worker is not None:
                    await worker.kill()
                self.state = DeviceState.RESTARTING
                if not self._stopping:
                    self.schedule_restart_locked(f"clearing after a lease failed: {exc}")

    def _replace_worker(self, why: str) -> None:
        """A new worker for the next holder (the old one is dead): the restart path, with
        no error logged (this is how such a device ends every lease)."""
        log.info("device %s: a new simulation worker for the next holder: %s", self.name, why)
        if not self._stopping and not (self._restart_task and not self._restart_task.done()):
            self._restart_task = asyncio.get_running_loop().create_task(self._restart())

    def schedule_restart_locked(self, reason: str) -> None:
        """`schedule_restart` from inside a transition (the state is RESTARTING already)."""
        if self._restart_task and not self._restart_task.done():
            return
        log.error("device %s: %s", self.name, reason)
        self._restart_task = asyncio.get_running_loop().create_task(self._restart())

    async def stop(self) -> None:
        """Stop the device for good: its worker gets `WORKER_QUIT_S` to quit (time to write
        a waveform window it closes: `WAVES_QUIT_S`), then it is killed."""
        quit_s = WAVES_QUIT_S if self.worker_config.waves_dir else WORKER_QUIT_S
        self._stopping = True
        if self._restart_task is not None:
            self._restart_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._restart_task
        await self._drop_ring(None)
        if self.worker is not None:
            await self.worker.stop(quit_s)
        self.memory.close()


# What a refusal of the worker becomes for the client: (status, the manual's code or 0).
_REFUSALS: dict[PortErrorCode, tuple[grpc.StatusCode, int]] = {
    PortErrorCode.BUSY: (grpc.StatusCode.FAILED_PRECONDITION, 0),
    PortErrorCode.BAD_STATE: (grpc.StatusCode.INVALID_ARGUMENT, ErrorCode.LOAD_FAILED),
    PortErrorCode.BAD_REQUEST: (grpc.StatusCode.INVALID_ARGUMENT, 0),
    PortErrorCode.READ_ONLY: (grpc.StatusCode.PERMISSION_DENIED, 0),
    PortErrorCode.WAVES_UNAVAILABLE: (grpc.StatusCode.FAILED_PRECONDITION, 0),
    PortErrorCode.UNSUPPORTED: (grpc.StatusCode.FAILED_PRECONDITION, 0),
}


def _refused(exc: WorkerError) -> ServiceError:
    """The service's status for a request the worker failed (`PortErrorCode`): the
    caller's to fix, or INTERNAL (the worker's own failure, or a lockstep divergence)."""
    status, xrt_code = _REFUSALS.get(exc.code, (grpc.StatusCode.INTERNAL, 0))
    message = exc.detail if status != grpc.StatusCode.INTERNAL else str(exc)
    if exc.code == PortErrorCode.BAD_STATE:
        message = f"checkpoint refused, nothing changed: {exc.detail}"
    return ServiceError(status, message, xrt_code=xrt_code)
