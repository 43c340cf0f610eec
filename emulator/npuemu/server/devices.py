"""The devices a server hosts, their leases, and the restart of dead workers.

`DeviceManager` owns N `SimDevice`s of one target. Each has its memory files, its worker
process and its counters; the manager hands out leases, ends them (close, disconnect,
time-to-live) and resets a device between holders: memory cleared, device reset.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from npuemu.server.errors import ServiceError
from npuemu.server.leases import Lease, LeaseTable
from npuemu.server.shm import DeviceMemory
from npuemu.server.worker_process import WorkerError, WorkerProcess, WorkerUnavailableError
from npuemu.sim.build import BuiltModel
from xrt.hwconfig import TargetConfig
from xrt.regtrace import RegisterTraceLog, record_worker_request

__all__ = ["PROTOCOL_VERSION", "DeviceManager", "DeviceState", "SimDevice"]

log = logging.getLogger("npuemu.server")

PROTOCOL_VERSION = 1
DEFAULT_CALL_TIMEOUT_S = 30.0  # watchdog on any worker request
RESTART_BACKOFF_S = (0.5, 2.0, 5.0, 15.0)


class DeviceState(enum.IntEnum):
    """Mirrors npuemu.v1.DeviceState."""

    STARTING = 1
    FREE = 2
    LEASED = 3
    RESTARTING = 4
    RESETTING = 5


@dataclass
class Counters:
    cycles: int = 0
    requests: int = 0
    register_ops: int = 0
    memory_bytes_read: int = 0
    memory_bytes_written: int = 0
    worker_restarts: int = 0


class SimDevice:
    """One simulated NPU: memory files, a worker process, a state and counters."""

    def __init__(
        self,
        name: str,
        target: TargetConfig,
        model: BuiltModel,
        folder: Path,
        watchdog_s: float = DEFAULT_CALL_TIMEOUT_S,
        *,
        log_dir: Path | None = None,
        worker_env: dict[str, str] | None = None,
    ) -> None:
        self.name = name
        # The worker's folder (its log): beside the memory files unless a log folder is given.
        self.workdir = (log_dir or folder) / name
        self.worker_env = dict(worker_env or {})
        self.watchdog_s = watchdog_s
        self.target = target
        self.model = model
        self.folder = folder
        self.memory = DeviceMemory(folder, name, target)
        self.worker: WorkerProcess | None = None
        self.lease: Lease | None = None
        self.state = DeviceState.STARTING
        self.counters = Counters()
        self.register_trace: RegisterTraceLog | None = None  # --trace-registers
        self._restart_task: asyncio.Task[None] | None = None
        self._stopping = False

    def _new_worker(self) -> WorkerProcess:
        return WorkerProcess(
            self.name, self.model, self.memory.plusargs, self.workdir, self.worker_env
        )

    async def start(self) -> None:
        self.worker = self._new_worker()
        await self.worker.start()
        self.state = DeviceState.FREE

    @property
    def in_call(self) -> bool:
        """A request is being served by the worker (its lease is in use)."""
        return self.worker is not None and self.worker.busy

    async def call(self, op: str, extra_s: float = 0.0, **args: Any) -> dict:
        """One worker request; UNAVAILABLE while the worker restarts or when it fails.

        The watchdog allows `watchdog_s` plus `extra_s` (time the request itself may take,
        such as a wait for the interrupt) before it declares the worker hung.
        """
        timeout_s = self.watchdog_s + extra_s
        if self.worker is None or self.state in (DeviceState.STARTING, DeviceState.RESTARTING):
            raise ServiceError(
                grpc.StatusCode.UNAVAILABLE,
                f"device {self.name} is restarting its simulation worker; retry shortly",
            )
        try:
            reply = await self.worker.call(op, timeout_s, **args)
        except WorkerUnavailableError as exc:
            self.schedule_restart(str(exc))
            raise ServiceError(grpc.StatusCode.UNAVAILABLE, str(exc)) from exc
        except WorkerError as exc:
            raise ServiceError(grpc.StatusCode.INTERNAL, str(exc)) from exc
        self.counters.cycles = int(reply["cycles"])
        if self.register_trace is not None:
            record_worker_request(self.register_trace, self.name, op, args, reply)
        return reply

    def schedule_restart(self, reason: str) -> None:
        if self._stopping or (self._restart_task and not self._restart_task.done()):
            return
        log.error("device %s: %s", self.name, reason)
        self.state = DeviceState.RESTARTING
        self._restart_task = asyncio.get_running_loop().create_task(self._restart())

    async def _restart(self) -> None:
        for attempt, delay in enumerate((0.0, *RESTART_BACKOFF_S)):
            await asyncio.sleep(delay)
            if self._stopping:
                return
            old, self.worker = self.worker, None
            if old is not None:
                await old.kill()
            self.counters.worker_restarts += 1
            try:
                worker = self._new_worker()
                await worker.start()
            except WorkerUnavailableError as exc:
                log.error("device %s: restart %d failed: %s", self.name, attempt + 1, exc)
                continue
            self.worker = worker
            self.state = DeviceState.LEASED if self.lease else DeviceState.FREE
            log.info("device %s: simulation worker restarted (pid %s)", self.name, worker.pid)
            return
        log.error("device %s: giving up restarting its worker", self.name)

    async def clear_for_next_holder(self) -> None:
        """Between leases: memories read as zero, the device is reset."""
        self.memory.zero()
        if self.worker is not None and self.state == DeviceState.RESETTING:
            try:
                if "NPU_EMU_WAVES_DIR" in self.worker_env:
                    await self.call("waves_forget")  # this lease's window is not the next's
                await self.call("reset")
            except ServiceError as exc:
                log.warning("device %s: reset after lease failed: %s", self.name, exc.message)

    async def stop(self) -> None:
        self._stopping = True
        if self._restart_task is not None:
            self._restart_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._restart_task
        if self.worker is not None:
            await self.worker.stop()
        self.memory.close()


class DeviceManager:
    """The server's devices and leases."""

    def __init__(
        self,
        target: TargetConfig,
        model: BuiltModel,
        count: int,
        folder: Path,
        default_ttl_s: float = 30.0,
        watchdog_s: float = DEFAULT_CALL_TIMEOUT_S,
        *,
        log_dir: Path | None = None,
        worker_env: dict[str, str] | None = None,
    ) -> None:
        self.target = target
        self.folder = folder
        self.default_ttl_s = default_ttl_s
        self.devices = {
            f"npu{i}": SimDevice(
                f"npu{i}",
                target,
                model,
                folder,
                watchdog_s,
                log_dir=log_dir,
                worker_env=worker_env,
            )
            for i in range(count)
        }
        self.leases = LeaseTable()
        self.closing = asyncio.Event()  # set when the server starts shutting down
        self._expiry_task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Start every worker (in parallel) and the lease expiry loop."""
        await asyncio.gather(*(d.start() for d in self.devices.values()))
        self._expiry_task = asyncio.get_running_loop().create_task(self._expire_loop())

    def device(self, name: str) -> SimDevice:
        try:
            return self.devices[name]
        except KeyError:
            raise ServiceError(
                grpc.StatusCode.NOT_FOUND,
                f"no device {name!r} (devices: {', '.join(self.devices)})",
            ) from None

    @staticmethod
    def holder_of(device: SimDevice) -> str:
        return device.lease.holder if device.lease else ""

    def open(self, name: str, holder: str, ttl_s: float | None) -> tuple[Lease, SimDevice]:
        """Lease device `name` (or the first free one when empty) to `holder`."""
        if name:
            device = self.device(name)
            if device.lease is not None:
                raise ServiceError(
                    grpc.StatusCode.FAILED_PRECONDITION,
                    f"device {name} is leased by {device.lease.holder}",
                )
            if device.state != DeviceState.FREE:
                raise ServiceError(
                    grpc.StatusCode.UNAVAILABLE,
                    f"device {name} is {device.state.name.lower()}; retry shortly",
                )
        else:
            device = next(
                (d for d in self.devices.values() if d.state == DeviceState.FREE and not d.lease),
                None,
            )
            if device is None:
                busy = ", ".join(
                    f"{d.name} leased by {d.lease.holder}"
                    if d.lease
                    else f"{d.name} {d.state.name.lower()}"
                    for d in self.devices.values()
                )
                raise ServiceError(grpc.StatusCode.FAILED_PRECONDITION, f"no free device: {busy}")
        lease = Lease(device.name, holder, ttl_s or self.default_ttl_s)
        self.leases.add(lease)
        device.lease = lease
        device.state = DeviceState.LEASED
        log.info("lease %s: %s opened %s (ttl %.0f s)", lease.id, holder, device.name, lease.ttl_s)
        return lease, device

    def use(self, lease_id: str) -> tuple[Lease, SimDevice]:
        """The lease and its device, for a call on the device."""
        lease = self.leases.get(lease_id)
        device = self.devices[lease.device]
        device.counters.requests += 1
        return lease, device

    async def end(self, lease: Lease, reason: str) -> None:
        """End a lease, then clear and reset its device for the next holder."""
        if not self.leases.remove(lease, reason):
            return
        device = self.devices[lease.device]
        device.lease = None
        log.info("lease %s: %s released %s (%s)", lease.id, lease.holder, device.name, reason)
        if device.state == DeviceState.LEASED:
            device.state = DeviceState.RESETTING
            await device.clear_for_next_holder()
            if device.state == DeviceState.RESETTING:
                device.state = DeviceState.FREE

    async def _expire_loop(self) -> None:
        while True:
            await asyncio.sleep(0.5)
            for lease in self.leases.expired():
                if self.devices[lease.device].in_call:
                    lease.touch()  # a long call (a wait, a batch) is use, not absence
                    continue
                await self.end(lease, f"no keep-alive for {lease.ttl_s:.0f} s")

    async def stop(self) -> None:
        if self._expiry_task is not None:
            self._expiry_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._expiry_task
        await asyncio.gather(*(d.stop() for d in self.devices.values()), return_exceptions=True)
