"""The debugger's RPC (Debug) on top of the waveform service (docs/debugging.md, "Debugger").

A request of the debugger goes to the device's worker at once, beside the holder's request
in flight (which a stopped device holds: `WorkerProcess.debug_call`). While the device is
stopped no request's watchdog runs out (`npuemu.server.watchdog`), and the lease is kept as
long as its holder answers keepalives: a lease counts its holder's silence, never the
device's. A lease's end clears the breakpoints and resumes the device before anything else
(`SimDevice.clear_after_lease`).
"""

from __future__ import annotations

from pathlib import Path

import grpc

from npuemu.server.errors import ServiceError
from npuemu.server.service import _unary
from npuemu.server.waves_service import WavesDeviceService
from npuemu.server.worker_process import WorkerError, WorkerUnavailableError
from xrt.hw.debug import DebugReply, DebugRequest
from xrt.hw.wire import DeviceState, pb

__all__ = ["MAX_STOP_WAIT_MS", "DebugDeviceService", "debug_response"]

MAX_STOP_WAIT_MS = 60_000  # a Debug call waits for a stop at most this long


def debug_response(reply: DebugReply) -> pb.DebugResponse:
    """The wire's form of a worker's `DebugReply`."""
    s = reply.state
    state = pb.DebugState(
        stopped=s.stopped, reason=int(s.reason), hit=s.hit, cycle=s.cycle, decoding=s.decoding,
        pc=s.pc, insn=s.insn, units_busy=s.units_busy, queues=s.queues, dma_state=s.dma_state,
        dma_src=s.dma_src, dma_dst=s.dma_dst, irq=s.irq, busy=s.busy, paused_ms=s.paused_ms,
        step_left=s.step_left,
    )  # fmt: skip
    points = [
        pb.DebugBreakpoint(id=b.id, kind=int(b.kind), value=b.value, arg=b.arg, hits=b.hits)
        for b in reply.breakpoints
    ]
    wave = None
    if reply.wave is not None:
        path, first, last = reply.wave
        size = Path(path).stat().st_size
        wave = pb.WaveFile(path=path, first_cycle=first, last_cycle=last, size_bytes=size)
    return pb.DebugResponse(
        state=state, breakpoints=points, created=reply.created, stops=reply.stops, wave=wave
    )


class DebugDeviceService(WavesDeviceService):
    """DeviceService with waveform windows and the debugger."""

    @_unary
    async def Debug(self, request, context):
        if request.wait_stop_ms > MAX_STOP_WAIT_MS:
            raise ServiceError(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"wait_stop_ms {request.wait_stop_ms} is more than {MAX_STOP_WAIT_MS}",
            )
        try:
            asked = DebugRequest(request.op, request.kind, request.value, request.arg)
        except ValueError as exc:
            raise ServiceError(grpc.StatusCode.INVALID_ARGUMENT, f"debug request: {exc}") from None
        lease, d = self.m.use(request.lease_id)
        worker = d.worker
        if worker is None or d.state in (DeviceState.STARTING, DeviceState.RESTARTING):
            raise d.restarting_error()
        if request.wait_stop_ms:
            await worker.wait_debug_stop(request.after_stops, request.wait_stop_ms / 1000)
        try:
            reply = await worker.debug_call(asked, d.watchdog_s)
        except WorkerError as exc:
            raise ServiceError(grpc.StatusCode.INVALID_ARGUMENT, exc.detail) from None
        except TimeoutError:
            raise ServiceError(
                grpc.StatusCode.DEADLINE_EXCEEDED,
                f"debug {asked.op} on {d.name}: no answer within {d.watchdog_s:g} s (a register "
                "request of the device runs; the debugger is answered when it ends or stops)",
            ) from None
        except WorkerUnavailableError as exc:
            raise ServiceError(grpc.StatusCode.UNAVAILABLE, str(exc)) from None
        lease.touch()
        return debug_response(reply)
