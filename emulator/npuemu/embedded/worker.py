"""The simulation worker of one embedded device (``sim://``): started with the device,
stopped with it, never outliving this process.

`EmbeddedWorker.start` takes the target's verilated model from the build cache (building it
once, with progress on stderr: `npuemu.sim.build`), makes the device's memory files
(`npuemu.server.shm.DeviceMemory`: files without a name, nothing left behind), starts one
simulation worker process with the server's own machinery
(`npuemu.server.worker_process.WorkerProcess`, on an asyncio loop in a thread of this
device) and attaches a register ring to it (`npuemu.server.register_ring.LeaseRing`), whose
holder's end (`xrt.transport.grpc.register_ring.RegisterRing`) the transport uses from the
caller's thread: register accesses and interrupt waits go straight to the simulator's C++
main loop, with no thread hop, no server and no port. Host-visible memory (``udma``) is the
mapping of its memory file here, as the server's local hand-out gives a holder.

The worker goes away:

- on `stop` (the device's close): it is asked to quit, then killed if it has not;
- at interpreter exit or when the device is collected (`weakref.finalize` of the transport
  calls `stop`);
- when this process dies, however: the simulator's main sets ``PR_SET_PDEATHSIG`` (SIGKILL)
  and checks its parent's pid (``NPU_SERVER_PID``) before anything else
  (rtl/sim/npu_sim_main.cpp), so a SIGKILLed parent leaves no orphan. The death signal
  follows the thread that started it: that is the loop's thread, which lives as long as
  the device.

A worker that dies is not restarted (the device's state died with it): every later request
raises XrtError 11014 naming the device.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import os
import shutil
import signal
import tempfile
import threading
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

from npuemu.server.register_ring import LeaseRing
from npuemu.server.shm import DeviceMemory, new_server_dir, remove_stale_dirs, shm_root
from npuemu.server.worker_process import (
    WorkerCancelledError,
    WorkerError,
    WorkerProcess,
    WorkerUnavailableError,
)
from npuemu.sim.build import BuiltModel, ModelBuildError, build_npu_sim
from npuemu.worker.config import WorkerConfig
from xrt.errors import ErrorCode, XrtError
from xrt.hw.config import TargetConfig
from xrt.hw.debug import DebugReply, DebugRequest
from xrt.hw.port import PortErrorCode, Reply, Request
from xrt.progress import progress
from xrt.transport.grpc.register_ring import RegisterRing

__all__ = ["START_TIMEOUT_S", "WATCHDOG_S", "EmbeddedWorker"]

log = logging.getLogger("npuemu.embedded")

START_TIMEOUT_S = 120.0  # the worker's start (the model is built before: not counted)
WATCHDOG_S = 30.0  # a request over the pipe that takes longer: the worker is hung
QUIT_S = 2.0  # at close: a worker that has not quit by then is killed
EXITED = "its simulation worker exited"
_T = TypeVar("_T")


def _work_root() -> Path:
    """This user's folder of embedded workers' folders (their logs), private to the user."""
    root = Path(tempfile.gettempdir()) / f"xrt-sim-{os.getuid()}"
    root.mkdir(mode=0o700, exist_ok=True)
    if root.is_symlink() or root.stat().st_uid != os.getuid():
        raise XrtError(ErrorCode.DEVICE_INTERNAL, f"{root} is not this user's own folder")
    return root


class _LoopThread:
    """An asyncio loop running in a daemon thread of its own (the worker's machinery is
    asyncio; the device's callers are not)."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run, name=f"xrt-{name}", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    @property
    def usable(self) -> bool:
        """Running, and not the calling thread (which would wait on itself)."""
        return self.thread.is_alive() and threading.current_thread() is not self.thread

    def run(self, coro: Coroutine[Any, Any, _T], timeout_s: float) -> _T:
        """Run `coro` on the loop and wait for its result (TimeoutError after `timeout_s`)."""
        fut = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return fut.result(timeout_s)
        except concurrent.futures.TimeoutError:
            fut.cancel()
            raise TimeoutError from None

    def stop(self) -> None:
        if self.thread.is_alive():
            self.loop.call_soon_threadsafe(self.loop.stop)
            if threading.current_thread() is not self.thread:
                self.thread.join(10.0)
        if not self.thread.is_alive():
            self.loop.close()


class EmbeddedWorker:
    """One embedded device's simulation worker, its memory files and its register ring
    (see the module docstring).

    Args:
        name: The device's name in messages (``sim://buyi``).
        target: The target simulated.
        lockstep: Check every launch of the compute engine against the golden model.
    """

    def __init__(self, name: str, target: TargetConfig, *, lockstep: bool = False) -> None:
        self.name = name
        self.target = target
        self.config = WorkerConfig(
            target=target.name, device=f"sim-{target.name}", server_ring=False, lockstep=lockstep
        )
        self.model: BuiltModel | None = None
        self.memory: DeviceMemory | None = None
        self.process: WorkerProcess | None = None
        self.ring: RegisterRing | None = None  # the holder's end, for the transport
        self._lease_ring: LeaseRing | None = None  # the simulator's end
        self._loop: _LoopThread | None = None
        self.workdir: Path | None = None
        self.gone = ""  # why the worker is gone ("" while it serves)
        self._lock = threading.Lock()
        self._stopped = False
        # The debugger's stops, as the worker announces them (counted: a waiter knows
        # whether one came after it looked).
        self._stops = threading.Condition()
        self.stop_count = 0

    @property
    def pid(self) -> int | None:
        """The simulation worker's process id."""
        return self.process.pid if self.process is not None else None

    # -- starting ------------------------------------------------------------------------

    def start(self) -> None:
        """Build (or reuse) the model, start the worker and attach the register ring.

        Raises:
            XrtError: 11014 when the model cannot be built or the worker does not start
                (the worker's log in the message).
        """
        try:
            self.model = build_npu_sim(self.target.name)
        except ModelBuildError as exc:
            raise XrtError(
                ErrorCode.DEVICE_INTERNAL, f"{self.name}: the verilated model: {exc}"
            ) from None
        root = _work_root()
        remove_stale_dirs(root)  # folders of processes that died
        self.workdir = new_server_dir(root)
        self.memory = DeviceMemory(shm_root(), self.config.device, self.target)
        self._loop = _LoopThread(self.config.device)
        self.process = WorkerProcess(
            self.config.device, self.model, self.memory.fds, self.workdir, self.config
        )
        self.process.on_exit = self._on_exit
        self.process.on_debug = self._on_debug
        with progress(f"starting the simulated {self.target.name} NPU ({self.name})"):
            try:
                self._loop.run(self.process.start(START_TIMEOUT_S), START_TIMEOUT_S + 10.0)
            except (WorkerUnavailableError, TimeoutError) as exc:
                raise XrtError(
                    ErrorCode.DEVICE_INTERNAL, f"{self.name}: {exc or 'the worker did not start'}"
                ) from None
            self._attach_ring()

    def _attach_ring(self) -> None:
        assert self._loop is not None and self.process is not None and self.process.pid
        ring = self._lease_ring = LeaseRing()
        try:
            self._loop.run(self.process.attach_ring(ring.fds, WATCHDOG_S), WATCHDOG_S + 10.0)
        except (WorkerError, WorkerUnavailableError, TimeoutError) as exc:
            raise XrtError(
                ErrorCode.DEVICE_INTERNAL, f"{self.name}: no register ring into the model: {exc}"
            ) from None
        fds = [os.dup(fd) for fd in ring.holder_fds]
        fds.append(os.pidfd_open(self.process.pid))  # a dead simulator fails a request at once
        self.ring = RegisterRing(fds, ring.generation)

    def _on_debug(self, reply: DebugReply) -> None:
        """The device stopped (on the loop's thread)."""
        with self._stops:
            self.stop_count = max(self.stop_count, reply.stops)
            self._stops.notify_all()

    def wait_stop(self, after: int, timeout_s: float) -> bool:
        """Wait until the device stopped more than `after` times (or the worker is gone)."""
        with self._stops:
            return (
                self._stops.wait_for(
                    lambda: self.stop_count > after or bool(self.gone) or self._stopped, timeout_s
                )
                and self.stop_count > after
            )

    def debug(self, request: DebugRequest, timeout_s: float = WATCHDOG_S) -> DebugReply:
        """One request of the debugger (`xrt.hw.debug`), not queued behind a running one.

        Raises:
            XrtError: 11003 for a request the simulator refused (its message), 11015 with
                no answer in `timeout_s`, 11014 when the worker is gone.
        """
        loop, process = self._loop, self.process
        what = f"debugger {request.op}"
        if self._stopped or self.gone or loop is None or process is None:
            raise self.gone_error(what)
        try:
            return loop.run(process.debug_call(request, timeout_s), timeout_s + 10.0)
        except WorkerError as exc:
            raise XrtError(ErrorCode.OUT_OF_RANGE, f"{what} on {self.name}: {exc.detail}") from None
        except TimeoutError:
            raise XrtError(
                ErrorCode.TIMEOUT,
                f"{what} on {self.name}: no answer within {timeout_s:.0f} s (a register "
                "request of the device runs; the debugger is answered when it ends or stops)",
            ) from None
        except WorkerUnavailableError:
            raise self.gone_error(what) from None

    def _on_exit(self, why: str) -> None:
        """The worker's pipe closed while nobody asked it to (on the loop's thread)."""
        if not self._stopped:
            self.gone = self.gone or EXITED

    # -- requests --------------------------------------------------------------------------

    def gone_error(self, what: str) -> XrtError:
        """The error of a request that met a dead worker (11014, naming the device)."""
        reason = "the device is closed" if self._stopped else (self.gone or EXITED)
        proc = self.process.proc if self.process is not None else None
        status = f", exit status {proc.returncode}" if proc and proc.returncode is not None else ""
        return XrtError(
            ErrorCode.DEVICE_INTERNAL,
            f"{what} on {self.name}: {reason} (pid {self.pid}{status}); the device's state is "
            "lost: close it and open a new one",
        )

    def call(self, request: Request, what: str, extra_s: float = 0.0) -> Reply:
        """One request over the worker's pipe (resets, states: what the ring does not carry).

        Raises:
            XrtError: 11014 when the worker is gone or failed the request, 11003 for a
                request it refused as malformed.
        """
        loop = self._loop
        if self._stopped or self.gone or loop is None or self.process is None:
            raise self.gone_error(what)
        timeout = WATCHDOG_S + extra_s
        try:
            return loop.run(self.process.call(request, timeout), timeout + 10.0)
        except (WorkerUnavailableError, WorkerCancelledError, TimeoutError):
            proc = self.process.proc
            hung = proc is not None and proc.returncode is None
            hung_text = f"its simulation worker did not answer within {timeout:.0f} s (stopped)"
            self.gone = self.gone or (hung_text if hung else EXITED)
            self._kill()
            raise self.gone_error(what) from None
        except WorkerError as exc:
            code = ErrorCode.OUT_OF_RANGE
            if exc.code not in (PortErrorCode.BAD_REQUEST,):
                code = ErrorCode.DEVICE_INTERNAL
            raise XrtError(code, f"{what} on {self.name}: {exc.detail}") from None

    # -- stopping --------------------------------------------------------------------------

    def _kill(self) -> None:
        """SIGKILL the worker's process group (it is a session of its own)."""
        pid = self.pid
        proc = self.process.proc if self.process is not None else None
        if pid and proc is not None and proc.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)

    def stop(self) -> None:
        """Stop the worker (asked to quit, killed after `QUIT_S`) and free everything it
        held; idempotent, safe from any thread and at interpreter exit."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
        lease_ring, self._lease_ring = self._lease_ring, None
        if lease_ring is not None:
            lease_ring.revoke()  # wakes a waiting ring request, stops it in the simulator
        ring, self.ring = self.ring, None
        if ring is not None:
            ring.close()
        loop, process = self._loop, self.process
        if loop is not None and process is not None and loop.usable:
            try:
                loop.run(process.stop(QUIT_S), QUIT_S + 12.0)
            except Exception as exc:  # the loop is gone or wedged: kill it by pid below
                log.warning("%s: stopping the worker: %s", self.name, exc)
        self._kill()
        if loop is not None:
            loop.stop()
        if lease_ring is not None:
            lease_ring.close()
        if self.memory is not None:
            self.memory.close()
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)
