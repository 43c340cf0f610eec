"""The debugger of a simulated NPU (`NpuDevice.debugger`; docs/debugging.md, "Debugger").

Breakpoints on a simulated cycle, a register read or write (by its name in the register
map), the interrupt line rising, an engine instruction (by its index in the program) and a
DMA transfer (by its index or an address) are compared inside the simulation, once a cycle
(rtl/sim/npu_debug.h). A hit stops the model where it is: simulated time stands still, so
the engine's watchdog and every wait counted in cycles are paused, and a request of the
device in flight (a register batch, a wait for the interrupt) stays pending. The holder
then reads the engine's state and memory without advancing time, steps by cycles or by
instructions, and continues::

    dbg = dev.debugger
    dbg.break_at(register="CTRL", access="write")
    ... start a network in another thread ...
    state = dbg.wait_stopped(30)
    dbg.step(instructions=3)
    print(dbg.engine_state().describe())
    dbg.continue_()
"""

from __future__ import annotations

import math
import os
import shutil
from dataclasses import dataclass

from xrt.errors import ErrorCode, XrtError
from xrt.hw.config import TargetConfig
from xrt.hw.debug import (
    BreakKind,
    Breakpoint,
    DebugOp,
    DebugReply,
    DebugRequest,
    EngineState,
    RegAccess,
    StepKind,
    StopReason,
)
from xrt.hw.regs import DMA, NPU
from xrt.transport import NpuTransport

__all__ = ["Breakpoint", "Debugger", "EngineState", "StopReason", "WaveWindow", "register_address"]


@dataclass(frozen=True)
class WaveWindow:
    """A waveform window's FST file and the simulated cycles it covers."""

    path: str
    first_cycle: int
    last_cycle: int


_ACCESS = {"read": RegAccess.READ, "write": RegAccess.WRITE, "either": RegAccess.EITHER,
           "any": RegAccess.EITHER}  # fmt: skip


def register_address(name: str, target: TargetConfig) -> int:
    """The bus address of register `name` (``CTRL``, ``npu.CTRL``, ``dma.SRC_LO``).

    Raises:
        XrtError: 11003 naming the register when neither block has it.
    """
    if not isinstance(name, str) or not name:
        raise XrtError(ErrorCode.OUT_OF_RANGE, f"register name {name!r} is not a name")
    block, _, reg = name.rpartition(".")
    blocks = {"npu": (NPU, target.npu_base), "dma": (DMA, target.dma_base)}
    if block and block.lower() not in blocks:
        raise XrtError(ErrorCode.OUT_OF_RANGE, f"register {name!r}: no block {block!r} (npu, dma)")
    for info, base in [blocks[block.lower()]] if block else list(blocks.values()):
        if reg.upper() in info:
            return base + info.offset(reg.upper())
    raise XrtError(ErrorCode.OUT_OF_RANGE, f"no register {name!r} in the npu or dma block")


def _count(value: object, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < 1 << 64:
        raise XrtError(ErrorCode.OUT_OF_RANGE, f"{what} must be an int in 0..2**64-1: {value!r}")
    return value


class Debugger:
    """Breakpoints, steps and looks into a simulated NPU (see the module docstring).

    Args:
        transport: The device's transport (``sim://``; others refuse with 11010).
        target: The device's target (register addresses).
    """

    def __init__(self, transport: NpuTransport, target: TargetConfig) -> None:
        self._transport = transport
        self._target = target

    def _ask(self, op: DebugOp, kind: int = 0, value: int = 0, arg: int = 0) -> DebugReply:
        return self._transport.debug(DebugRequest(op.value, kind, value, arg))

    # -- breakpoints ---------------------------------------------------------------------

    def break_at(
        self,
        *,
        cycle: int | None = None,
        register: str | None = None,
        access: str = "write",
        irq: bool = False,
        insn: int | None = None,
        dma: int | None = None,
        dma_addr: int | None = None,
    ) -> Breakpoint:
        """Arm one breakpoint (exactly one keyword): at simulated `cycle`; on an `access`
        (``read``, ``write``, ``either``) of `register` by name, stopping before the access
        takes effect; when the interrupt line rises (`irq`); when instruction `insn` (its
        index in the program) enters decode, before it is dispatched; when DMA transfer
        `dma` (counted from now, 0 first) or a transfer from or to `dma_addr` starts.

        Raises:
            XrtError: 11003 naming a bad value (an unknown register, not one keyword).
        """
        named = (("cycle", cycle), ("register", register), ("insn", insn), ("dma", dma),
                 ("dma_addr", dma_addr))  # fmt: skip
        given: dict[str, object] = {k: v for k, v in named if v is not None}
        if irq:
            given["irq"] = True
        if len(given) != 1:
            raise XrtError(
                ErrorCode.OUT_OF_RANGE,
                f"break_at takes exactly one of cycle, register, irq, insn, dma, dma_addr: "
                f"got {sorted(given) or 'none'}",
            )
        (what, value), = given.items()  # fmt: skip
        kind, arg = {"cycle": BreakKind.CYCLE, "irq": BreakKind.IRQ, "insn": BreakKind.INSN,
                     "dma": BreakKind.DMA, "dma_addr": BreakKind.DMA_ADDR,
                     "register": BreakKind.REGISTER}[what], 0  # fmt: skip
        if what == "register":
            if access not in _ACCESS:
                raise XrtError(
                    ErrorCode.OUT_OF_RANGE, f"access {access!r} is not read, write or either"
                )
            value, arg = register_address(str(value), self._target), int(_ACCESS[access])
        elif what == "irq":
            value = 0
        else:
            value = _count(value, what)
        reply = self._ask(DebugOp.BREAK, int(kind), int(value), arg)
        return next(b for b in reply.breakpoints if b.id == reply.created)

    def breakpoints(self) -> list[Breakpoint]:
        """The breakpoints armed, with their hit counts."""
        return list(self._ask(DebugOp.STATE).breakpoints)

    def delete(self, breakpoint_id: int | None = None) -> None:
        """Delete breakpoint `breakpoint_id`, or every one (None).

        Raises:
            XrtError: 11003 for an id that is not armed.
        """
        self._ask(DebugOp.DELETE, value=0 if breakpoint_id is None else _count(breakpoint_id, "id"))

    # -- the stop ------------------------------------------------------------------------

    def engine_state(self) -> EngineState:
        """The engine's state now: stopped or not, why, the cycle, the instruction in
        decode, the units and queues busy, the DMA's transfer (no time passes)."""
        return self._ask(DebugOp.STATE).state

    @property
    def stops(self) -> int:
        """How often the device has stopped (read it before letting the device run, then
        `wait_stop_after` the count)."""
        return self._ask(DebugOp.STATE).stops

    def wait_stop_after(self, stops: int, timeout_s: float) -> bool:
        """Wait until the device stopped more than `stops` times; False after `timeout_s`."""
        return self._transport.wait_debug_stop(stops, timeout_s)

    @property
    def stopped(self) -> bool:
        """The device is stopped at a breakpoint or after a step."""
        return self.engine_state().stopped

    @property
    def stop_reason(self) -> StopReason:
        """Why the device is stopped (`StopReason.RUNNING` when it is not)."""
        return self.engine_state().reason

    def wait_stopped(self, timeout_s: float) -> EngineState:
        """Wait until the device is stopped; its state then.

        Raises:
            XrtError: 11015 when it did not stop within `timeout_s` seconds.
        """
        t = float(timeout_s)
        if not math.isfinite(t) or t < 0:
            raise XrtError(ErrorCode.OUT_OF_RANGE, f"timeout_s must be >= 0: {timeout_s!r}")
        now = self._ask(DebugOp.STATE)
        if now.state.stopped:
            return now.state
        if not self._transport.wait_debug_stop(now.stops, t):
            raise XrtError(
                ErrorCode.TIMEOUT, f"{self._transport.info.name} did not stop within {t:g} s"
            )
        return self.engine_state()

    def step(self, *, cycles: int | None = None, instructions: int | None = None,
             timeout_s: float = 30.0) -> EngineState:  # fmt: skip
        """Run `cycles` clock cycles, or until `instructions` more instructions entered the
        engine's decode, then stop again; the state then. A breakpoint met first stops it
        there. An idle engine takes no instruction: a step of instructions then waits for
        the next launch (11015 after `timeout_s`).

        Raises:
            XrtError: 11003 without exactly one of the two, or with 0; 11015 as above.
        """
        if (cycles is None) == (instructions is None):
            raise XrtError(ErrorCode.OUT_OF_RANGE, "step takes exactly one of cycles, instructions")
        n = _count(cycles if cycles is not None else instructions, "step count")
        if n == 0:
            raise XrtError(ErrorCode.OUT_OF_RANGE, "a step of 0")
        kind = StepKind.CYCLES if cycles is not None else StepKind.INSNS
        resumed = self._ask(DebugOp.RESUME, int(kind), n)
        if not self._transport.wait_debug_stop(resumed.stops, timeout_s):
            raise XrtError(
                ErrorCode.TIMEOUT,
                f"{self._transport.info.name}: the step did not end within {timeout_s:g} s",
            )
        return self.engine_state()

    def continue_(self) -> None:
        """Let the device run on (until the next breakpoint)."""
        self._ask(DebugOp.RESUME, int(StepKind.CONTINUE))

    def clear(self) -> None:
        """Delete every breakpoint and let the device run on (a lease's end does too)."""
        self._ask(DebugOp.CLEAR)

    # -- waveforms around a stop ----------------------------------------------------------

    def waves_on(self) -> None:
        """Open a waveform window from now (unless one is open): the cycles *before* a
        later stop. Every signal is dumped at each clock edge until `waves` closes it:
        the device runs a traced model (``npu-emu serve --waves DIR``), slower by about the
        factor docs/debugging.md gives.

        Raises:
            XrtError: 11003 on a device without waveforms (``sim://``, a server without
                ``--waves``).
        """
        self._ask(DebugOp.WAVES_ON)

    def waves(self, path: str | os.PathLike[str] | None = None, *, after: int = 0) -> WaveWindow:
        """Close the waveform window and name its file: the cycles since `waves_on` (before
        the stop), and with `after` the next `after` cycles too (a window is opened now if
        none is, then the device steps them). The file is on the server's machine; with
        `path` it is copied there (the server must be on this machine).

        Raises:
            XrtError: 11003 with no window to close or no waveforms on the device; 11002
                when `path` cannot be written or the server's file cannot be read.
        """
        if after:
            self._ask(DebugOp.WAVES_ON)
            self.step(cycles=_count(after, "after"))
        wave = self._ask(DebugOp.WAVES_OFF).wave
        assert wave is not None  # the worker answers WAVES_OFF with its file or refuses
        window = WaveWindow(*wave)
        if path is not None:
            try:
                shutil.copyfile(window.path, path)
            except OSError as exc:
                raise XrtError(
                    ErrorCode.FILE_NOT_FOUND,
                    f"copying the waveform window {window.path} to {path}: {exc.strerror}",
                ) from None
            return WaveWindow(str(path), window.first_cycle, window.last_cycle)
        return window

    def read_memory(self, addr: int, nbytes: int) -> bytes:
        """`nbytes` of host-visible memory at bus address `addr` (the memory model's file:
        no bus cycle, no time passes).

        Raises:
            XrtError: 11003 for a range outside host-visible memory.
        """
        mem = self._transport.info.memory("udma")
        addr, nbytes = _count(addr, "addr"), _count(nbytes, "nbytes")
        if addr < mem.base or addr + nbytes > mem.end:
            raise XrtError(
                ErrorCode.OUT_OF_RANGE,
                f"[{addr:#x}, {addr + nbytes:#x}) is outside host-visible memory udma "
                f"[{mem.base:#x}, {mem.end:#x})",
            )
        out = bytearray(nbytes)
        if nbytes:
            self._transport.host_region("udma", base=addr, size=nbytes).read(out, addr, nbytes)
        return bytes(out)
