"""The worker's half of the debugger: the simulator's stop unit as Python reaches it.

The stop unit lives in the C++ main loop (rtl/sim/npu_debug.h): it compares the
breakpoints once a cycle and, on a hit, toggles ``host_wake_i`` and evaluates the time step
again, so this process wakes inside that evaluation, whatever it was waiting for (the idle
wait of the request loop, or a running request's watch: `npuemu.worker.sim_main`). While
the loop serves the stop (`DebugUnit.serve`, blocking on the pipe), the model is not
advanced: simulated time stands still.

Requests of the debugger (`xrt.hw.debug.DebugRequest`) are answered at any time: between
requests, beside a running request, and while stopped. They are not requests of the device
port: no tap sees them.
"""

from __future__ import annotations

import ctypes
import logging
from collections.abc import Callable
from typing import Any

from xrt.hw.debug import (
    INSN_BYTES,
    BreakKind,
    Breakpoint,
    DebugOp,
    DebugReply,
    DebugRequest,
    EngineState,
    StepKind,
    StopReason,
)

__all__ = ["DebugRefusalError", "DebugUnit"]

log = logging.getLogger("npuemu.worker")

_STATE_WORDS = 16
_INSN_WORDS = INSN_BYTES // 4
_NO_UNIT = "this simulator has no stop unit (a model without the main loop)"
_WHY = {-1: "a bad argument", -2: "the model has no debug signals (rebuild it)", -3: "no main loop"}


class DebugRefusalError(Exception):
    """The stop unit refused a request (the message says why)."""


class DebugUnit:
    """The stop unit's entry points (ctypes into the simulator executable)."""

    def __init__(self) -> None:
        lib = ctypes.CDLL(None)
        self.available = hasattr(lib, "npu_worker_debug_arm")
        self._armed = False
        self.stops = 0  # how often the device stopped (the request loop counts)
        if not self.available:
            return
        self._arm = self._fn(lib, "npu_worker_debug_arm", ctypes.c_int,
                             ctypes.c_uint32, ctypes.c_uint64, ctypes.c_uint64)  # fmt: skip
        self._remove = self._fn(lib, "npu_worker_debug_remove", ctypes.c_int, ctypes.c_uint32)
        self._break = self._fn(lib, "npu_worker_debug_break", ctypes.c_int,
                               ctypes.c_uint32, ctypes.c_void_p)  # fmt: skip
        self._resume = self._fn(lib, "npu_worker_debug_resume", ctypes.c_int,
                                ctypes.c_uint32, ctypes.c_uint64)  # fmt: skip
        self._clear = self._fn(lib, "npu_worker_debug_clear", None)
        self._state = self._fn(lib, "npu_worker_debug_state", ctypes.c_int,
                               ctypes.c_void_p, ctypes.c_void_p)  # fmt: skip
        self._words = (ctypes.c_uint64 * _STATE_WORDS)()
        self._insn = (ctypes.c_uint32 * _INSN_WORDS)()
        self._point = (ctypes.c_uint64 * 5)()

    @staticmethod
    def _fn(lib: ctypes.CDLL, name: str, restype: object, *argtypes: object) -> Callable[..., Any]:
        fn = getattr(lib, name)
        fn.argtypes = argtypes
        fn.restype = restype
        return fn

    # ------------------------------------------------------------------ what it holds
    def state(self) -> EngineState:
        """The device's state now (no time passes)."""
        if not self.available:
            raise DebugRefusalError(_NO_UNIT)
        self._state(ctypes.addressof(self._words), ctypes.addressof(self._insn))
        w = [int(v) for v in self._words]
        insn = b"".join(int(v).to_bytes(4, "little") for v in self._insn)
        return EngineState(
            stopped=bool(w[0]), reason=StopReason(w[1]), hit=w[2], cycle=w[3], decoding=bool(w[4]),
            pc=w[5], insn=insn, units_busy=w[6], queues=w[7], dma_state=w[8], dma_src=w[9],
            dma_dst=w[10], irq=bool(w[11]), busy=bool(w[12]), paused_ms=w[13], step_left=w[15],
        )  # fmt: skip

    def breakpoints(self) -> tuple[Breakpoint, ...]:
        if not self.available:
            return ()
        out = []
        index = 0
        while self._break(index, ctypes.addressof(self._point)) == 0:
            i, k, v, a, h = (int(x) for x in self._point)
            out.append(Breakpoint(i, BreakKind(k), v, a, h))
            index += 1
        return tuple(out)

    @property
    def stopped(self) -> bool:
        """The device is stopped (a hit woke this process; nothing advances it)."""
        return self.available and bool(self.state().stopped)

    @property
    def armed(self) -> bool:
        """A breakpoint or a step is armed: a stop may come during any request. Kept here,
        not asked of the unit: every request of the device looks at it."""
        return self._armed

    def clear(self) -> None:
        """Every breakpoint gone, the device running (a lease's end)."""
        if self.available:
            self._clear()
        self._armed = False

    # ------------------------------------------------------------------ requests
    def serve(self, request: DebugRequest) -> DebugReply:
        """Answer one request (no time passes; a RESUME lets the device run on once this
        process waits again).

        Raises:
            DebugRefusalError: the request cannot be served (the message names the bad value).
        """
        if not self.available:
            raise DebugRefusalError(_NO_UNIT)
        op = DebugOp(request.op)
        created = 0
        if op is DebugOp.BREAK:
            try:
                kind = BreakKind(request.kind)
            except ValueError:
                raise DebugRefusalError(
                    f"breakpoint kind {request.kind} is not one of {list(BreakKind)}"
                ) from None
            got = int(self._arm(kind, request.value, request.arg))
            if got < 0:
                raise DebugRefusalError(f"breakpoint {kind.name.lower()} {request.value:#x} arg "
                                   f"{request.arg}: {_WHY.get(got, got)}")  # fmt: skip
            created = got
        elif op is DebugOp.DELETE:
            if int(self._remove(request.value)) < 0:
                raise DebugRefusalError(f"no breakpoint {request.value}")
        elif op is DebugOp.RESUME:
            try:
                step = StepKind(request.kind)
            except ValueError:
                raise DebugRefusalError(
                    f"step kind {request.kind} is not one of {list(StepKind)}"
                ) from None
            if step is not StepKind.CONTINUE and request.value == 0:
                raise DebugRefusalError(f"a step of {request.value} {step.name.lower()}")
            got = int(self._resume(step, request.value))
            if got < 0:
                raise DebugRefusalError(
                    f"resume {step.name.lower()} {request.value}: {_WHY.get(got, got)}"
                )
        elif op is DebugOp.CLEAR:
            self._clear()
        state, points = self.state(), self.breakpoints()
        self._armed = bool(points) or state.step_left > 0
        return DebugReply(state, points, created, self.stops)
