"""The debugger over gRPC: the Debug RPC, its answer as `xrt.hw.debug` records."""

from __future__ import annotations

from typing import Any

from xrt.hw.debug import BreakKind, Breakpoint, DebugReply, DebugRequest, EngineState, StopReason
from xrt.hw.wire import pb
from xrt.transport.grpc.calls import RPC_SLACK_S, DeviceClient

__all__ = ["MAX_STOP_WAIT_S", "debug_rpc"]

MAX_STOP_WAIT_S = 30.0  # one Debug call waits for a stop this long at most (the server: 60)


def _reply(resp: Any) -> DebugReply:
    s = resp.state
    state = EngineState(
        stopped=s.stopped, reason=StopReason(s.reason), hit=s.hit, cycle=s.cycle,
        decoding=s.decoding, pc=s.pc, insn=bytes(s.insn), units_busy=s.units_busy,
        queues=s.queues, dma_state=s.dma_state, dma_src=s.dma_src, dma_dst=s.dma_dst,
        irq=s.irq, busy=s.busy, paused_ms=s.paused_ms, step_left=s.step_left,
    )  # fmt: skip
    points = tuple(
        Breakpoint(b.id, BreakKind(b.kind), b.value, b.arg, b.hits) for b in resp.breakpoints
    )
    wave = None
    if resp.HasField("wave"):
        wave = (resp.wave.path, int(resp.wave.first_cycle), int(resp.wave.last_cycle))
    return DebugReply(state, points, resp.created, int(resp.stops), wave)


def debug_rpc(
    client: DeviceClient, lease_id: str, request: DebugRequest, what: str, *,
    wait_stop_s: float = 0.0, after_stops: int = 0,
) -> DebugReply:  # fmt: skip
    """One Debug call. With `wait_stop_s` the server answers once the device stopped more
    than `after_stops` times (`DebugReply.stops`), or after that long.

    Raises:
        XrtError: the call's status as the runtime's error (a refusal is 11003).
    """
    wait_ms = round(min(max(wait_stop_s, 0.0), MAX_STOP_WAIT_S) * 1000)
    resp = client.unary(
        "Debug",
        pb.DebugRequest(
            lease_id=lease_id,
            op=request.op,
            kind=request.kind,
            value=request.value,
            arg=request.arg,
            wait_stop_ms=wait_ms,
            after_stops=after_stops,
        ),
        what,
        timeout=RPC_SLACK_S + wait_ms / 1000,
    )
    return _reply(resp)
