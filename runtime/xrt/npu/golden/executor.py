"""Instruction-level execution of a program (the golden model's `run`).

Instructions execute one after the other in program order. That is a legal schedule of
the engine for every valid program (every pop is preceded in program order by its push,
docs/isa.md "Dependency tokens" rule 4), and for a race-free program every legal schedule
gives the same memories, so the result is the engine's. Timing comes from the cost model
(`cost.py`), evaluated alongside as a list schedule of the three units.

What the model reports for an invalid program (docs/isa.md "Errors" and the guide):

* ``PROG_ADDR`` not a multiple of 32: MISALIGNED at instruction 0, unit None, before any
  fetch;
* a failed check: its code, the instruction's index and unit (checks in the order of
  `validate.static_fault`, made when the instruction is decoded: before its pops);
* an undecodable word or running past the program without FINISH: ILLEGAL_INSTRUCTION
  with unit None (the fetch unit);
* a pop with no token pushed earlier in program order: the engine's decode runs on while
  the popping unit waits (`_decode_ahead`): the first check that fails in what it decodes
  is the error; else WATCHDOG at the instruction held by the lowest-numbered waiting unit
  (LOAD, COMPUTE, STORE), as the engine's watchdog reports it;
* a push into a queue holding ``token_depth`` tokens (counted in program order):
  TOKEN_OVERFLOW at the pushing instruction;
* bus faults injected into the `Memory`: FETCH_/LOAD_/STORE_ SLVERR or DECERR.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from xrt.hw.config import NpuConfig
from xrt.hw.isa import (
    INSN_BYTES,
    EngineError,
    Finish,
    Gemm,
    Instruction,
    IsaError,
    Load,
    Store,
    Sync,
    Unit,
    Vec,
    decode,
)
from xrt.hw.targets import NPU

from . import footprint as fp
from .cost import CostModel, CycleEstimate, DataBus
from .machine import Machine
from .memory import Memory
from .tokens import Queue, token_ops, unit_of
from .validate import static_fault

__all__ = ["RunResult", "normalize_bases", "run"]


@dataclass
class RunResult:
    """What one run of a program did.

    Attributes:
        error: ``EngineError.NONE`` on success, else the first error.
        error_pc: Index of the failing instruction (None on success).
        error_unit: Unit of the failing instruction (None for fetch/decode and FINISH).
        message: What failed, naming the bad value.
        insns: Instructions retired per unit (SYNC counts in its unit; FINISH in none).
        macs: Multiply-accumulates done (B*B per GEMM iteration).
        bytes_read: Bytes LOAD read from memory (padding excluded).
        bytes_written: Bytes STORE wrote to memory.
        tokens_left: Tokens in each queue when the run ended.
        cycles: The cost model's estimate.
        machine: The final buffer state.
    """

    error: EngineError = EngineError.NONE
    error_pc: int | None = None
    error_unit: Unit | None = None
    message: str = ""
    insns: dict[Unit, int] = field(default_factory=lambda: {u: 0 for u in Unit})
    macs: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    tokens_left: dict[Queue, int] = field(default_factory=lambda: {q: 0 for q in Queue})
    cycles: CycleEstimate = field(default_factory=CycleEstimate)
    machine: Machine | None = None

    @property
    def ok(self) -> bool:
        """True when the program reached FINISH without an error."""
        return self.error == EngineError.NONE

    def __str__(self) -> str:
        if self.ok:
            head = "DONE"
        else:
            unit = self.error_unit.name if self.error_unit is not None else "FETCH"
            head = f"{self.error.name} at pc {self.error_pc} ({unit}): {self.message}"
        counts = ", ".join(f"{u.name} {n}" for u, n in self.insns.items())
        return f"{head}; insns {counts}; {self.cycles.total} cycles"


def normalize_bases(bases: Sequence[int] | Mapping[int, int] | None, count: int) -> list[int]:
    """Base register values as a list of ``count`` (unset registers are 0)."""
    out = [0] * count
    items = bases.items() if isinstance(bases, Mapping) else enumerate(bases or ())
    for i, v in items:
        if not 0 <= i < count:
            raise ValueError(f"base register {i} does not exist (0..{count - 1})")
        out[i] = int(v)
    return out


class _EngineStopError(Exception):
    def __init__(self, code: EngineError, pc: int, unit: Unit | None, message: str) -> None:
        super().__init__(message)
        self.code, self.pc, self.unit, self.message = code, pc, unit, message


def _fetch(
    program: Sequence[Instruction] | bytes | None,
    memory: Memory,
    prog_addr: int | None,
    prog_insns: int | None,
) -> tuple[int, object]:
    """(instruction count, source) for the fetch loop."""
    if program is None:
        if prog_addr is None or prog_insns is None:
            raise ValueError(
                "run: give a program, or prog_addr and prog_insns to fetch it from memory"
            )
        return prog_insns, None
    if isinstance(program, bytes | bytearray | memoryview):
        blob = bytes(program)
        if len(blob) % INSN_BYTES:
            raise IsaError(f"program length {len(blob)} is not a multiple of {INSN_BYTES} bytes")
        return len(blob) // INSN_BYTES, blob
    return len(program), program


def run(
    program: Sequence[Instruction] | bytes | None,
    memory: Memory,
    bases: Sequence[int] | Mapping[int, int] | None = None,
    *,
    config: NpuConfig = NPU,
    cost: CostModel | None = None,
    machine: Machine | None = None,
    prog_addr: int | None = None,
    prog_insns: int | None = None,
    schedule: list[tuple[int, Unit, int, int]] | None = None,
    execute: bool = True,
) -> RunResult:
    """Execute a program against ``memory`` (modified in place) and report what it did.

    Args:
        program: Instructions, or the program's bytes (decoded as fetched), or None to
            fetch ``prog_insns`` instructions from ``memory`` at ``prog_addr``.
        memory: The target's memories (with any injected bus faults).
        bases: BASE register values (a sequence or {index: value}).
        config: Buffer sizes (default: the hardware's, `xrt.hw.targets.NPU`).
        cost: Cost model parameters.
        machine: Buffer state to start from (default: all buffers zero).
        prog_addr: Where the program lies in memory; when given, fetching checks that each
            instruction lies inside a window (FETCH_DECERR) and bus faults (FETCH_*).
        prog_insns: PROG_INSNS (default: the program's length).
        schedule: When given, each instruction's place in the cost model's schedule is
            appended to it: ``(pc, unit, start cycle, end cycle)``.
        execute: False: only schedule and check the program (no data moves, no MACs are
            counted): the timeline of a program the engine ran, at little cost.

    Returns:
        A `RunResult`; errors of the program are reported in it, never raised.
    """
    cost = cost or CostModel()
    regs = normalize_bases(bases, config.base_regs)
    m = machine or Machine(config)
    res = RunResult(machine=m)
    res.cycles.block = config.block
    n, src = _fetch(program, memory, prog_addr, prog_insns)
    if prog_insns is not None:
        if program is not None and prog_insns > n:
            raise ValueError(f"prog_insns={prog_insns} exceeds the program's {n} instructions")
        n = prog_insns
    if prog_addr is not None and prog_addr % INSN_BYTES:
        res.error, res.error_pc, res.error_unit = EngineError.MISALIGNED, 0, None
        res.message = f"PROG_ADDR {prog_addr:#x} is not a multiple of {INSN_BYTES}"
        return res
    pending: dict[Queue, deque[int]] = {q: deque() for q in Queue}  # push completion times
    unit_free = {u: 0 for u in Unit}
    recent: dict[Unit, deque[int]] = {u: deque(maxlen=config.insn_queue_depth) for u in Unit}
    dispatch = 0
    buses: dict[str, DataBus] = {}  # per DDR memory: the cycles its data bus is booked
    pc = 0
    try:
        while True:
            if pc >= n:
                raise _EngineStopError(
                    EngineError.ILLEGAL_INSTRUCTION,
                    pc,
                    None,
                    f"ran past PROG_INSNS={n} without FINISH",
                )
            insn, encoded = _fetch_one(src, pc, memory, prog_addr)
            unit = unit_of(insn)
            # Schedule: fetch order, room in the unit's queue, the unit itself, tokens.
            dispatch += cost.fetch_cycles
            if isinstance(insn, Finish):
                if any(insn.tokens()):
                    raise _EngineStopError(
                        EngineError.ILLEGAL_INSTRUCTION, pc, None, "FINISH: token flags must be 0"
                    )
                res.cycles.total = max(dispatch, *unit_free.values())
                break
            assert unit is not None
            q = recent[unit]
            if len(q) == q.maxlen:
                dispatch = max(dispatch, q[0])
            start = max(dispatch, unit_free[unit])
            fault = static_fault(insn, regs, memory.windows, config, encoded=encoded)
            if fault is not None:  # decode checks it before the unit pops its tokens
                raise _EngineStopError(fault.code, pc, unit, fault.message)
            pops, pushes, _ = token_ops(insn)
            for queue in pops:
                if not pending[queue]:
                    raise _decode_ahead(
                        pc, unit, _no_token(queue, pc, src, n), src, n, memory, prog_addr,
                        regs, {q: len(v) for q, v in pending.items()}, config, m, res,
                    )  # fmt: skip
                start = max(start, pending[queue].popleft())
            if execute:
                _execute(insn, pc, unit, m, memory, regs, res, config)
            dur = cost.duration(insn, config)
            end = start + dur
            if config.ddr_shared_bus and isinstance(insn, (Load, Store)):
                end = _book_ddr_bus(buses, memory, regs[insn.base] + insn.offset, start, end,
                                    cost.bus_beats(insn, config))  # fmt: skip
                dur = end - start
            q.append(start)
            unit_free[unit] = end
            if schedule is not None:
                schedule.append((pc, unit, start, end))
            res.cycles.busy[unit] += dur
            if isinstance(insn, Gemm):
                res.cycles.gemm_cycles += dur
            for queue in pushes:
                if len(pending[queue]) >= config.token_depth:
                    raise _EngineStopError(
                        EngineError.TOKEN_OVERFLOW,
                        pc,
                        unit,
                        f"push into {queue.name} holding token_depth={config.token_depth} tokens",
                    )
                pending[queue].append(end)
            res.insns[unit] += 1
            pc += 1
    except _EngineStopError as stop:
        res.error, res.error_pc, res.error_unit, res.message = (
            stop.code,
            stop.pc,
            stop.unit,
            stop.message,
        )
        res.cycles.total = max(dispatch, *unit_free.values())
    res.cycles.macs = res.macs
    res.tokens_left = {queue: len(v) for queue, v in pending.items()}
    return res


def _book_ddr_bus(
    buses: dict[str, DataBus], memory: Memory, addr: int, start: int, end: int, beats: int
) -> int:
    """End of a transfer of ``beats`` at ``addr`` that would end at ``end`` alone: on a DDR
    memory (any but the OCM) whose one data bus serves reads and writes, no earlier than its
    last beat finds a free cycle of that bus."""
    w = memory.window_of(addr)
    if w is None or w.name == "ocm":
        return end
    return max(end, buses.setdefault(w.name, DataBus()).book(start, beats))


def _fetch_one(
    src: object, pc: int, memory: Memory, prog_addr: int | None
) -> tuple[Instruction, bool]:
    """The instruction at ``pc`` and whether it came from bytes (so its fields fit)."""
    if prog_addr is not None:
        addr = prog_addr + pc * INSN_BYTES
        win = memory.window_of(addr, INSN_BYTES)
        if win is None:
            raise _EngineStopError(
                EngineError.FETCH_DECERR,
                pc,
                None,
                f"instruction fetch at {addr:#x} is outside every memory",
            )
        fault = memory.fault_for(np.array([addr]), INSN_BYTES)
        if fault is not None:
            raise _EngineStopError(
                EngineError[f"FETCH_{fault.kind}"],
                pc,
                None,
                f"instruction fetch at {addr:#x} answered {fault.kind}",
            )
        if src is None:
            src_bytes = memory.read(addr, INSN_BYTES).tobytes()
            return _decode(src_bytes, pc), True
    if isinstance(src, bytes):
        return _decode(src[pc * INSN_BYTES : (pc + 1) * INSN_BYTES], pc), True
    assert isinstance(src, Sequence)
    return src[pc], False


def _decode(word: bytes, pc: int) -> Instruction:
    try:
        return decode(word, pc)
    except IsaError as exc:
        raise _EngineStopError(EngineError.ILLEGAL_INSTRUCTION, pc, None, str(exc)) from None


def _decode_ahead(
    pc: int,
    unit: Unit,
    why: str,
    src: object,
    n: int,
    memory: Memory,
    prog_addr: int | None,
    regs: list[int],
    tokens: dict[Queue, int],
    config: NpuConfig,
    m: Machine,
    res: RunResult,
) -> _EngineStopError:
    """The error of a program whose instruction `pc` waits for a token nobody pushed
    before it: what the engine reports.

    The waiting unit holds `pc`; the decode goes on in program order, checking each
    instruction it decodes, handing it to its unit's queue (`insn_queue_depth` places) and
    letting units that do not wait run (their bus faults and token overflows are errors
    too). It stops at FINISH, at the end of the
    program, or at an instruction whose waiting unit's queue is full (that one it has
    checked). The first failing check (or fetch fault, or running past PROG_INSNS) is the
    error; otherwise every unit waits in the end and the watchdog reports the one of
    lowest number (LOAD, COMPUTE, STORE) with the instruction it holds. A later push into
    a waiting unit's queue does not release it here: such a program breaks tokens rule 4
    (the engine might complete it) and is illegal.
    """
    waiting: dict[Unit, tuple[int, str]] = {unit: (pc, why)}
    queued = dict.fromkeys(Unit, 0)
    for j in range(pc + 1, n + 1):
        if j == n:
            return _EngineStopError(
                EngineError.ILLEGAL_INSTRUCTION, j, None, f"ran past PROG_INSNS={n} without FINISH"
            )
        insn, encoded = _fetch_one(src, j, memory, prog_addr)
        if isinstance(insn, Finish):
            if any(insn.tokens()):
                return _EngineStopError(
                    EngineError.ILLEGAL_INSTRUCTION, j, None, "FINISH: token flags must be 0"
                )
            break
        u = unit_of(insn)
        assert u is not None
        fault = static_fault(insn, regs, memory.windows, config, encoded=encoded)
        if fault is not None:
            return _EngineStopError(fault.code, j, u, fault.message)
        if u in waiting:
            if queued[u] == config.insn_queue_depth:
                break  # the decode holds this one until the queue has room: never
            queued[u] += 1
            continue
        pops, pushes, _ = token_ops(insn)
        for queue in pops:
            if tokens[queue] == 0:
                waiting[u] = (j, _no_token(queue, j, src, n))
                break
            tokens[queue] -= 1
        else:
            try:
                _execute(insn, j, u, m, memory, regs, res, config)
            except _EngineStopError as stop:
                return stop
            for queue in pushes:
                if tokens[queue] >= config.token_depth:
                    return _EngineStopError(
                        EngineError.TOKEN_OVERFLOW,
                        j,
                        u,
                        f"push into {queue.name} holding token_depth={config.token_depth} tokens",
                    )
                tokens[queue] += 1
    first = min(waiting)
    at, text = waiting[first]
    return _EngineStopError(EngineError.WATCHDOG, at, first, text)


def _no_token(queue: Queue, pc: int, src: object, n: int) -> str:
    later = False
    if isinstance(src, Sequence):
        for insn in src[pc + 1 : n]:
            if isinstance(insn, Finish):
                break
            if queue in token_ops(insn)[1]:
                later = True
                break
    if later:
        return (
            f"pop of {queue.name} with no token pushed earlier in program order "
            "(docs/isa.md tokens rule 4; the push only comes later)"
        )
    return f"pop of {queue.name} whose push never comes: the engine deadlocks"


def _execute(
    insn: Instruction,
    pc: int,
    unit: Unit,
    m: Machine,
    memory: Memory,
    regs: list[int],
    res: RunResult,
    config: NpuConfig,
) -> None:
    if isinstance(insn, Load):
        base = regs[insn.base]
        src = fp.load_sources(insn, base)
        fault = memory.fault_for(src.reshape(-1), fp.elem_bytes(insn.buffer, config.block))
        if fault is not None:
            raise _EngineStopError(
                EngineError[f"LOAD_{fault.kind}"],
                pc,
                unit,
                f"LOAD: a read of [{fault.addr:#x}, +{fault.nbytes}) answered {fault.kind}",
            )
        res.bytes_read += m.load(insn, base, memory)
    elif isinstance(insn, Store):
        base = regs[insn.base]
        dst = fp.store_targets(insn, base)
        fault = memory.fault_for(
            dst.reshape(-1), fp.store_elem_bytes(insn, config.block), access="write"
        )
        if fault is not None:
            raise _EngineStopError(
                EngineError[f"STORE_{fault.kind}"],
                pc,
                unit,
                f"STORE: a write to [{fault.addr:#x}, +{fault.nbytes}) answered {fault.kind}",
            )
        res.bytes_written += m.store(insn, base, memory)
    elif isinstance(insn, Gemm):
        m.gemm(insn)
        res.macs += insn.n0 * insn.n1 * insn.n2 * config.block**2
    elif isinstance(insn, Vec):
        m.vec(insn)
    elif isinstance(insn, Sync):
        pass
