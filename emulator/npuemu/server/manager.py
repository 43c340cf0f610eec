"""The devices of a server and their leases.

`DeviceManager` owns N `SimDevice`s (`npuemu.server.devices`) of one target: it hands out
leases, ends them (close, disconnect, time-to-live, a silent holder) and has each device
cleared for its next holder (`SimDevice.clear_after_lease`), in tasks no RPC can cancel.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc

from npuemu.server.checkpoint_seal import SealKey
from npuemu.server.device_log import DeviceLogHub
from npuemu.server.devices import DEFAULT_CALL_TIMEOUT_S, RETRY_AFTER_S, SimDevice
from npuemu.server.errors import ServiceError
from npuemu.server.leases import Lease, LeaseTable
from npuemu.server.recording import RecordingFolder
from npuemu.sim.build import BuiltModel
from npuemu.worker.config import WorkerConfig
from xrt.hw.config import TargetConfig
from xrt.hw.wire import REASON_BUSY, REASON_RESETTING, REASON_STARTING, DeviceState

if TYPE_CHECKING:
    from npuemu.server.metrics import ServerMetrics

__all__ = ["DeviceManager"]

log = logging.getLogger("npuemu.server")


def _starting_error(text: str) -> ServiceError:
    """UNAVAILABLE while the server starts its workers: clients wait for it by default
    (`xrt.transport.grpc.retry`), saying so once."""
    return ServiceError(
        grpc.StatusCode.UNAVAILABLE,
        text,
        retry_reason=REASON_STARTING,
        retry_after_s=RETRY_AFTER_S / 5,
    )


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
        worker_config: WorkerConfig | None = None,
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
                worker_config=worker_config,
            )
            for i in range(count)
        }
        self.leases = LeaseTable()
        self.closing = asyncio.Event()  # set when the server starts shutting down
        self._expiry_task: asyncio.Task[None] | None = None
        self._transitions: set[asyncio.Task[None]] = set()
        self.recordings: RecordingFolder | None = None  # --record (npuemu.server.recording)
        self.metrics: ServerMetrics | None = None  # --metrics-port (npuemu.server.metrics)
        # Checkpoints (npuemu.server.checkpoint_seal): the key that seals this server's, and
        # whether it restores model states it did not seal (one user's own server).
        self.seal_key = SealKey.generate()
        self.allow_foreign_checkpoints = False
        # Device log capture: the holders' FollowDeviceLog streams (npuemu.server.device_log)
        self.device_log = DeviceLogHub(list(self.devices))
        for d in self.devices.values():
            d.device_log = self.device_log

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
        try:
            lease, device = self._open(name, holder, ttl_s)
        except ServiceError as exc:
            if self.metrics is not None and exc.retry_reason:
                self.metrics.open_refused(exc.retry_reason)
            raise
        if self.metrics is not None:
            self.metrics.lease_opened()
        return lease, device

    def _open(self, name: str, holder: str, ttl_s: float | None) -> tuple[Lease, SimDevice]:
        if name:
            device = self.device(name)
            if device.lease is not None:
                raise ServiceError(
                    grpc.StatusCode.FAILED_PRECONDITION,
                    f"device {name} is leased by {device.lease.holder}",
                    retry_reason=REASON_BUSY,
                    retry_after_s=RETRY_AFTER_S,
                )
            if device.state == DeviceState.RESTARTING:
                raise device.restarting_error()
            if device.state == DeviceState.STARTING:
                raise _starting_error(f"device {name} is starting")
            if device.state != DeviceState.FREE:
                raise ServiceError(
                    grpc.StatusCode.UNAVAILABLE,
                    f"device {name} is {device.state.name.lower()}; retry shortly",
                    retry_reason=REASON_RESETTING,
                    retry_after_s=RETRY_AFTER_S / 5,
                )
        else:
            free = next(
                (d for d in self.devices.values() if d.state == DeviceState.FREE and not d.lease),
                None,
            )
            starting = [d.name for d in self.devices.values() if d.state == DeviceState.STARTING]
            if free is None and starting:
                raise _starting_error(f"no device is ready yet ({', '.join(starting)} starting)")
            if free is None:
                busy = ", ".join(
                    f"{d.name} leased by {d.lease.holder}"
                    if d.lease
                    else f"{d.name} {d.state.name.lower()}"
                    for d in self.devices.values()
                )
                raise ServiceError(
                    grpc.StatusCode.FAILED_PRECONDITION,
                    f"no free device: {busy}",
                    retry_reason=REASON_BUSY,
                    retry_after_s=RETRY_AFTER_S,
                )
            device = free
        lease = Lease(device.name, holder, ttl_s or self.default_ttl_s)
        self.leases.add(lease)
        device.lease = lease
        device.state = DeviceState.LEASED
        self.device_log.forget(device.name)  # the device's own lines of earlier leases
        if self.recordings is not None:
            device.recording = self.recordings.begin(device, lease)
        # Lease ids are bearer credentials: never logged.
        log.info("%s opened %s (ttl %.0f s)", holder, device.name, lease.ttl_s)
        return lease, device

    def is_live(self, lease: Lease) -> bool:
        """`lease` has not ended (and its device is still its own)."""
        return self.leases.live.get(lease.id) is lease and self.devices[lease.device].lease is lease

    def check_live(self, lease: Lease) -> None:
        """ABORTED unless `lease` is live (a stream checks this on every message)."""
        if not self.is_live(lease):
            reason = self.leases.ended_reason(lease.id) or "ended"
            raise ServiceError(grpc.StatusCode.ABORTED, f"this lease has ended ({reason})")

    def use(self, lease_id: str) -> tuple[Lease, SimDevice]:
        """The lease and its device, for a call on the device."""
        lease = self.leases.get(lease_id)
        device = self.devices[lease.device]
        device.counters.requests += 1
        return lease, device

    def spawn(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        """Run a state transition as a task of its own: no RPC's cancellation reaches it."""
        task = asyncio.get_running_loop().create_task(coro)
        self._transitions.add(task)
        task.add_done_callback(self._transitions.discard)
        return task

    async def end(self, lease: Lease, reason: str) -> None:
        """End a lease, then stop, clear and reset its device for the next holder.

        The lease is gone at once (every later call and every open memory stream of it is
        refused); the clearing runs in a task the caller cannot cancel (a CloseDevice whose
        client goes away half way still ends in FREE or a reported fault).
        """
        if not self.leases.remove(lease, reason):
            return
        device = self.devices[lease.device]
        if device.lease is lease:
            device.lease = None
            if device.recording is not None and self.recordings is not None:
                self.recordings.finish(device.recording, reason)
                device.recording = None
        self.device_log.forget(device.name)
        if self.metrics is not None:
            self.metrics.lease_ended(reason, time.monotonic() - lease.opened)
        log.info("%s released %s (%s)", lease.holder, device.name, reason)
        await asyncio.shield(self.spawn(device.clear_after_lease()))

    async def _expire_loop(self) -> None:
        while True:
            await asyncio.sleep(0.5)
            try:
                await self._expire_once()
            except Exception:  # one bad pass must not stop expiry for every device
                log.exception("lease expiry pass failed")

    async def _expire_once(self) -> None:
        for lease in self.leases.expired():
            device = self.devices[lease.device]
            if device.in_call or device.state in (DeviceState.RESTARTING, DeviceState.STARTING):
                # A long call (a wait, a batch) is use, not absence; a worker restart is the
                # server's doing: the holder cannot call while it lasts.
                lease.touch()
                continue
            self.spawn(self.end(lease, lease.expiry_reason()))

    def stop_calls(self) -> int:
        """Server shutdown, grace period over: stop every request still running in the
        workers (their calls end with UNAVAILABLE saying why); return how many ran."""
        return sum(d.stop_calls() for d in self.devices.values())

    async def stop(self) -> None:
        if self._expiry_task is not None:
            self._expiry_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._expiry_task
        for task in list(self._transitions):
            task.cancel()
        for d in self.devices.values():
            if d.worker is not None:
                d.worker.cancel_current()  # a long wait must not hold up the quit
        await asyncio.gather(*(d.stop() for d in self.devices.values()), return_exceptions=True)
