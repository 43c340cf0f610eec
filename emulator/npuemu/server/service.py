"""`npuemu.v1.DeviceService`: the gRPC face of the device manager.

Each RPC checks its arguments (npuemu.server.errors), finds the lease and device, and asks
the device's worker (registers, interrupts, reset) or reads and writes the shared-memory
file itself (host-visible memory: the simulator is not involved). Refusals are one status
code with a message, logged on one line; nothing a client sends can crash the server.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import TypeVar, cast

import grpc

from npuemu import __version__
from npuemu.server import checkpoint_service
from npuemu.server.devices import SimDevice
from npuemu.server.errors import (
    ServiceError,
    check_memory_range,
    check_register,
    clip,
)
from npuemu.server.handlers import refuse_undecodable
from npuemu.server.limits import StreamBudget
from npuemu.server.local_handout import handout_socket
from npuemu.server.manager import DeviceManager
from xrt.hw.config import TargetConfig
from xrt.hw.port import RegBatch, RegResults, Reset, WaitIrq, WaitResult
from xrt.hw.port_wire import WireOpError, batch_of_pb, refuse_wide, results_to_pb
from xrt.hw.regops import MASK32
from xrt.hw.targets import CLOCK_PERIOD_PS, DMA, HW_VERSION, MIN_SIM_CYCLES_PER_S
from xrt.hw.wire import (
    MAX_BATCH_OPS,
    MAX_CHUNK,
    MAX_WAIT_MS,
    MIN_CHUNK,
    NO_PUSHBACK,
    PROTOCOL_VERSION,
    pb,
    pb_grpc,
)

__all__ = ["DeviceService", "boot_id"]

log = logging.getLogger("npuemu.server")

HOLD_BEAT_S = 2.0
DEFAULT_WAIT_MS = 10_000

Req = TypeVar("Req")
Svc = TypeVar("Svc", bound="DeviceService")
Resp = TypeVar("Resp")


def boot_id() -> str:
    """This machine's boot id: a client with the same one shares our /dev/shm."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def _register_windows(target: TargetConfig) -> tuple[int, int, int, int]:
    """[start, end) of the npu and dma register blocks (the fast test before
    `check_register`, which words the refusal)."""
    size = target.reg_block_size
    return target.npu_base, target.npu_base + size, target.dma_base, target.dma_base + size


def _status(status: int) -> pb.RegisterStatus:
    """A register status for the wire (the proto's own numbers, from the RTL on)."""
    return cast(pb.RegisterStatus, status)


def _unary(
    method: Callable[[Svc, Req, grpc.aio.ServicerContext], Awaitable[Resp]],
) -> Callable[[Svc, Req, grpc.aio.ServicerContext], Awaitable[Resp]]:
    """Turn ServiceError into a status and log it; anything else is INTERNAL (and logged
    with its traceback) so the server keeps serving."""

    @functools.wraps(method)
    async def wrapper(self: Svc, request: Req, context: grpc.aio.ServicerContext) -> Resp:
        try:
            refuse_undecodable(request)
            return await method(self, request, context)
        except ServiceError as exc:
            log.warning(
                "%s from %s: %s %s", method.__name__, context.peer(), exc.code.name, exc.message
            )
            await context.abort(exc.code, exc.message, exc.trailing_metadata())
        except asyncio.CancelledError:
            raise
        except grpc.aio.AbortError:
            raise
        except Exception as exc:
            log.exception("%s from %s failed", method.__name__, context.peer())
            await context.abort(
                grpc.StatusCode.INTERNAL, f"{type(exc).__name__}: {exc}", (NO_PUSHBACK,)
            )
        raise AssertionError("unreachable")  # abort raises

    return wrapper


class DeviceService(pb_grpc.DeviceServiceServicer):
    """The servicer; one per server, over one DeviceManager."""

    def __init__(self, manager: DeviceManager) -> None:
        self.m = manager
        self.hostname = socket.gethostname()
        self.boot_id = boot_id()
        self._windows = _register_windows(manager.target)  # every device: one target
        self.streams = StreamBudget()  # WriteMemory streams in flight (npuemu.server.limits)

    def _check_register(self, d: SimDevice, address: int) -> None:
        """`check_register`, with the common case (an aligned address inside a block)
        decided inline: single reads and writes are the path that must be cheap."""
        lo0, hi0, lo1, hi1 = self._windows
        if address & 3 or not (lo0 <= address < hi0 or lo1 <= address < hi1):
            check_register(d.target, address)

    # ------------------------------------------------------------------ devices
    def _info(self, d: SimDevice) -> pb.DeviceInfo:
        t = d.target
        return pb.DeviceInfo(
            name=d.name,
            target=t.name,
            target_id=t.id,
            hw_version=".".join(map(str, HW_VERSION)),
            protocol_version=PROTOCOL_VERSION,
            register_blocks=[
                pb.RegisterBlock(name=name, base=base, size=t.reg_block_size)
                for name, base in t.sim_register_blocks
            ],
            regions=[
                pb.MemoryRegion(
                    name=m.name, base=m.base, size=m.size, host_visible=m.name == "udma"
                )
                for m in t.memories
            ],
            state=cast(pb.DeviceState, int(d.state)),
            holder=self.m.holder_of(d),
            clock_period_ps=CLOCK_PERIOD_PS,
            dma_bus_bytes=DMA.bus_bytes,
            warm_start=d.warm is not None,
        )

    @_unary
    async def ListDevices(self, request, context):
        return pb.ListDevicesResponse(
            devices=[self._info(d) for d in self.m.devices.values()],
            protocol_version=PROTOCOL_VERSION,
            server_version=__version__,
        )

    @_unary
    async def GetCounters(self, request, context):
        d = self.m.device(request.device or next(iter(self.m.devices)))
        c = d.counters
        return pb.GetCountersResponse(
            cycles=c.cycles,
            requests=c.requests,
            register_ops=c.register_ops,
            memory_bytes_read=c.memory_bytes_read,
            memory_bytes_written=c.memory_bytes_written,
            worker_restarts=c.worker_restarts,
            observer_requests=c.observer_requests,
        )

    # ------------------------------------------------------------------ leases
    @_unary
    async def OpenDevice(self, request, context):
        if request.protocol_version != PROTOCOL_VERSION:
            raise ServiceError(
                grpc.StatusCode.FAILED_PRECONDITION,
                f"client speaks protocol version {request.protocol_version}, this server "
                f"{PROTOCOL_VERSION}: upgrade the older side",
            )
        ttl_ms = request.lease_ttl_ms
        if ttl_ms and not 1_000 <= ttl_ms <= 3_600_000:
            raise ServiceError(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"lease_ttl_ms {ttl_ms} is outside [1000, 3600000]",
            )
        holder = f"{clip(request.client) or 'anonymous'}@{clip(context.peer())}"
        lease, device = self.m.open(request.device, holder, ttl_ms / 1000 if ttl_ms else None)
        mappings = []
        lh = request.local_host
        if lh.boot_id and lh.boot_id == self.boot_id and lh.hostname == self.hostname:
            mappings.append(
                pb.LocalMapping(
                    region="udma",
                    socket=str(handout_socket(self.m.folder)),
                    size=device.target.memory("udma").size,
                )
            )
        return pb.OpenDeviceResponse(
            lease_id=lease.id,
            lease_ttl_ms=int(lease.ttl_s * 1000),
            info=self._info(device),
            local_mappings=mappings,
        )

    async def HoldLease(self, request, context) -> AsyncIterator[pb.HoldLeaseResponse]:
        try:
            refuse_undecodable(request)
            lease = self.m.leases.get(request.lease_id)
        except ServiceError as exc:
            await context.abort(exc.code, exc.message, exc.trailing_metadata())
        if request.heartbeats:  # its KeepAlives, not this stream, say that it still lives
            lease.heartbeats = True
        lease.holds += 1
        beat = 0
        try:
            while lease.id in self.m.leases.live and not self.m.closing.is_set():
                yield pb.HoldLeaseResponse(beat=beat)
                beat += 1
                # A server shutting down ends the streams at once rather than making its
                # grace period wait for them.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.m.closing.wait(), HOLD_BEAT_S)
        except asyncio.CancelledError:
            # The client went away (process killed, network gone): its lease ends now.
            lease.holds -= 1
            await asyncio.shield(self.m.end(lease, "client disconnected"))
            raise
        lease.holds -= 1

    async def FollowDeviceLog(self, request, context) -> AsyncIterator[pb.DeviceLogRecord]:
        """The log lines naming the lease's device, until the lease ends
        (npuemu.server.device_log)."""
        try:
            refuse_undecodable(request)
            lease = self.m.leases.get(request.lease_id)
        except ServiceError as exc:
            await context.abort(exc.code, exc.message, exc.trailing_metadata())
        sub = self.m.device_log.subscribe(lease.device)
        device = self.m.devices[lease.device]
        try:
            # The device's own lines need its ring requests through the worker's port.
            with contextlib.suppress(ServiceError):
                await device.watch_rings(lease, True)
            # The first record says the stream is set up: from here on, every request of
            # the device is seen (a client waits for it before it goes on).
            yield pb.DeviceLogRecord(
                unix_time_ns=time.time_ns(),
                level=logging.INFO,
                device=lease.device,
                message=f"following the log of {lease.device}",
                source=pb.DEVICE_LOG_SOURCE_SERVER,
            )
            while lease.id in self.m.leases.live and not self.m.closing.is_set():
                try:
                    line = await asyncio.wait_for(sub.queue.get(), HOLD_BEAT_S)
                except TimeoutError:
                    continue  # look at the lease again
                if lease.id not in self.m.leases.live:
                    break  # a line after the lease ended is the next holder's business
                yield pb.DeviceLogRecord(
                    unix_time_ns=line.unix_time_ns,
                    level=line.level,
                    device=line.device,
                    message=line.message,
                    dropped=line.dropped,
                    source=cast(pb.DeviceLogSource, int(line.source)),
                    cycle=line.cycle,
                )
        finally:
            self.m.device_log.unsubscribe(sub)
            with contextlib.suppress(ServiceError):
                await device.watch_rings(lease, False)

    @_unary
    async def KeepAlive(self, request, context):
        lease = self.m.leases.get(request.lease_id)
        return pb.KeepAliveResponse(lease_ttl_ms=int(lease.ttl_s * 1000))

    @_unary
    async def CloseDevice(self, request, context):
        lease = self.m.leases.get(request.lease_id)
        await self.m.end(lease, "closed by its holder")
        return pb.CloseDeviceResponse()

    # ------------------------------------------------------------------ registers
    @_unary
    async def ReadRegister(self, request, context):
        lease, d = self.m.use(request.lease_id)
        self._check_register(d, request.address)
        r = await d.call(RegBatch.read(request.address), lease)
        d.counters.register_ops += 1
        ((status, value, _),) = r.body_as(RegResults)
        return pb.ReadRegisterResponse(value=value, cycles=r.cycles, status=_status(status))

    @_unary
    async def WriteRegister(self, request, context):
        lease, d = self.m.use(request.lease_id)
        self._check_register(d, request.address)
        if request.value > MASK32:
            raise ServiceError(
                grpc.StatusCode.INVALID_ARGUMENT,
                refuse_wide("value", request.value, request.address),
            )
        r = await d.call(RegBatch.write(request.address, request.value), lease)
        d.counters.register_ops += 1
        ((status, _, _),) = r.body_as(RegResults)
        return pb.WriteRegisterResponse(cycles=r.cycles, status=_status(status))

    @_unary
    async def RegisterBatch(self, request, context):
        lease, d = self.m.use(request.lease_id)
        if len(request.ops) > MAX_BATCH_OPS:
            raise ServiceError(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"{len(request.ops)} ops in one batch; at most {MAX_BATCH_OPS}",
            )
        # Per op only what must be per op (a batch of 1024 made Python's per-op costs show):
        # the window test inline, check_register only to word a refusal.
        lo0, hi0, lo1, hi1 = self._windows

        def check(i: int, address: int) -> None:
            if address & 3 or not (lo0 <= address < hi0 or lo1 <= address < hi1):
                try:
                    check_register(d.target, address)
                except ServiceError as exc:
                    raise ServiceError(exc.code, f"op {i}: {exc.message}") from None

        try:
            batch = batch_of_pb(request.ops, check)
        except WireOpError as exc:
            raise ServiceError(grpc.StatusCode.INVALID_ARGUMENT, str(exc)) from None
        budget = batch.n * 0.01 + batch.poll_cycles() / MIN_SIM_CYCLES_PER_S  # beyond the watchdog
        remaining = context.time_remaining()
        if remaining is not None:
            # Nobody waits past the client's deadline: then the call is cancelled (and so is
            # the batch in the worker), so the watchdog need not allow more.
            budget = min(budget, max(0.0, remaining))
        r = await d.call(batch, lease, budget)
        results = r.body_as(RegResults)
        d.counters.register_ops += len(results)
        return results_to_pb(results, r.cycles)

    # ------------------------------------------------------------------ memory
    @_unary
    async def WriteMemory(self, request_iterator, context):
        """The whole stream is received and checked before any byte is written: a refused
        stream changes nothing. The lease is checked on every message and once more when
        the bytes go in, so a stream outliving its lease writes nothing. A stream is
        admitted by the server's `StreamBudget` before it is received."""
        admitted: list[tuple[str, int]] = []  # the stream's reservation, freed at its end
        try:
            return await self._write_memory(request_iterator, admitted)
        finally:
            for lease_id, nbytes in admitted:
                self.streams.release(lease_id, nbytes)

    async def _write_memory(
        self,
        request_iterator: AsyncIterator[pb.WriteMemoryRequest],
        admitted: list[tuple[str, int]],
    ) -> pb.WriteMemoryResponse:
        first = None
        lease = d = None
        offset = received = total = 0
        staged = bytearray()
        async for msg in request_iterator:
            refuse_undecodable(msg)
            if first is None:
                first = msg
                lease, d = self.m.use(msg.lease_id)
                total = msg.length
                offset = check_memory_range(d.target, msg.address, total)
                self.streams.admit(lease.id, total)
                admitted.append((lease.id, total))
            elif lease is not None:
                self.m.check_live(lease)
            if len(msg.data) > MAX_CHUNK:
                raise ServiceError(
                    grpc.StatusCode.INVALID_ARGUMENT,
                    f"a message carries {len(msg.data)} bytes; at most {MAX_CHUNK} "
                    "(nothing was written)",
                )
            if received + len(msg.data) > total:
                raise ServiceError(
                    grpc.StatusCode.INVALID_ARGUMENT,
                    f"the stream carries more than the {total} bytes it declared "
                    f"({received} received, {len(msg.data)} more offered; nothing was written)",
                )
            staged += msg.data
            received += len(msg.data)
            if lease is not None:
                lease.touch()
        if first is None:
            raise ServiceError(grpc.StatusCode.INVALID_ARGUMENT, "empty WriteMemory stream")
        if received != total:
            raise ServiceError(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"the stream declared {total} bytes but carried {received} (nothing was written)",
            )
        assert d is not None and lease is not None
        await d.flush_taps(lease)  # a recording keeps the requests before it first
        self.m.check_live(lease)  # no await from here to the copy: the lease cannot end
        d.memory.udma_view[offset : offset + total] = staged
        d.counters.memory_bytes_written += total
        if d.recording is not None:
            d.recording.memory_write(first.address, staged)
        return pb.WriteMemoryResponse(bytes_written=total)

    async def ReadMemory(self, request, context) -> AsyncIterator[pb.ReadMemoryResponse]:
        try:
            refuse_undecodable(request)
            lease, d = self.m.use(request.lease_id)
            offset = check_memory_range(d.target, request.address, request.length)
            chunk = max(request.chunk_size or MAX_CHUNK, MIN_CHUNK)
            if chunk > MAX_CHUNK:
                raise ServiceError(
                    grpc.StatusCode.INVALID_ARGUMENT, f"chunk_size {chunk} is more than {MAX_CHUNK}"
                )
            await d.flush_taps(lease)  # a recording keeps the requests before it first
        except ServiceError as exc:
            log.warning("ReadMemory from %s: %s %s", context.peer(), exc.code.name, exc.message)
            await context.abort(exc.code, exc.message, exc.trailing_metadata())
        end = offset + request.length
        for pos in range(offset, end, chunk):
            # Checked per message: a stream outliving its lease reads nothing of the next
            # holder's (the copy below runs with no await after the check).
            if not self.m.is_live(lease):
                await context.abort(
                    grpc.StatusCode.ABORTED,
                    f"the lease on {d.name} ended during this read "
                    f"({pos - offset} of {request.length} bytes were sent)",
                    (NO_PUSHBACK,),
                )
            piece = bytes(d.memory.udma_view[pos : min(pos + chunk, end)])
            d.counters.memory_bytes_read += len(piece)
            if d.recording is not None:
                d.recording.memory_read(request.address + pos - offset, piece)
            lease.touch()
            yield pb.ReadMemoryResponse(data=piece)

    # ------------------------------------------------------------------ time
    @_unary
    async def WaitInterrupt(self, request, context):
        lease, d = self.m.use(request.lease_id)
        timeout_ms = request.timeout_ms or DEFAULT_WAIT_MS
        if timeout_ms > MAX_WAIT_MS:
            raise ServiceError(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"timeout_ms {timeout_ms} is more than {MAX_WAIT_MS}",
            )
        timeout_s = timeout_ms / 1000
        remaining = context.time_remaining()
        if remaining is not None:
            timeout_s = max(0.0, min(timeout_s, remaining - 0.05))
        max_cycles = request.max_cycles or (1 << 62)
        # The watchdog allows the wait itself plus slack for a busy machine.
        r = await d.call(WaitIrq(max_cycles, timeout_s), lease, timeout_s)
        waited = r.body_as(WaitResult)
        return pb.WaitInterruptResponse(
            outcome=cast(pb.WaitOutcome, waited.outcome),
            waited_cycles=waited.waited,
            cycles=r.cycles,
        )

    # ------------------------------------------------------------------ checkpoints
    async def SaveCheckpoint(self, request, context) -> AsyncIterator[pb.SaveCheckpointResponse]:
        """The device's checkpoint, sealed (`npuemu.server.checkpoint_service`), streamed."""
        try:
            lease, d, data, cycle = await checkpoint_service.save_checkpoint(
                self.m, request, context.peer()
            )
        except ServiceError as exc:
            log.warning("SaveCheckpoint from %s: %s %s", context.peer(), exc.code.name, exc.message)
            await context.abort(exc.code, exc.message, exc.trailing_metadata())
        except Exception as exc:  # the server keeps serving; the caller learns what failed
            log.exception("SaveCheckpoint from %s failed", context.peer())
            await context.abort(grpc.StatusCode.INTERNAL, f"{type(exc).__name__}: {exc}")
        view = memoryview(data)
        for pos in range(0, len(data), MAX_CHUNK):
            if not self.m.is_live(lease):  # nothing of it reaches the next holder
                await context.abort(
                    grpc.StatusCode.ABORTED, f"the lease on {d.name} ended during the save"
                )
            piece = view[pos : pos + MAX_CHUNK]
            if pos == 0:
                yield pb.SaveCheckpointResponse(
                    data=bytes(piece), total_bytes=len(data), cycles=cycle
                )
            else:
                yield pb.SaveCheckpointResponse(data=bytes(piece))

    @_unary
    async def RestoreCheckpoint(self, request_iterator, context):
        return await checkpoint_service.restore_checkpoint(self.m, self.streams, request_iterator)

    @_unary
    async def ResetDevice(self, request, context):
        lease, d = self.m.use(request.lease_id)
        r = await d.call(Reset(), lease)
        return pb.ResetDeviceResponse(cycles=r.cycles)
