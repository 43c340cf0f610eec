"""Static checks of a program: races, tokens, ranges (docs/isa.md "What the race checker
enforces").

The happens-before order is tracked with vector clocks over the three units: ``clock[u]``
counts, per unit, the instructions known to have completed before unit ``u``'s next
instruction may start (program order within a unit; an edge from the completion of the
k-th push of a queue to the start of its k-th pop). Every buffer row and memory granule
keeps, per unit, its last writer and its last reader; an access conflicts with them
unless their clock entries are covered. Since a unit's earlier accesses happen before its
later ones, this finds every instruction that races with an earlier one (naming its
latest racing partner per unit). Work per instruction is a few numpy operations
over its rows, so programs of 100k instructions check in seconds.

Token checks: every pop needs a push earlier in program order; a push into a queue that
could hold ``token_depth`` tokens in some interleaving (pushes so far minus the pops that
happen before it) is reported; so are tokens left at FINISH and a missing FINISH. The
overflow bound ignores the instruction queues' limit on how far a unit runs ahead, so it
is conservative.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from xrt.hw.config import MemoryWindow, NpuConfig, TargetConfig
from xrt.hw.isa import (
    INSN_BYTES,
    Buffer,
    EngineError,
    Finish,
    Instruction,
    IsaError,
    Unit,
    decode,
)
from xrt.hw.targets import NPU, target

from . import footprint as fp
from .access import MEM, Access, accesses
from .executor import normalize_bases
from .memory import Memory
from .tokens import QUEUE_ENDS, Queue, token_ops, unit_of
from .validate import static_fault

__all__ = ["CheckReport", "Finding", "HbTracker", "check"]

_UNITS = (Unit.LOAD, Unit.COMPUTE, Unit.STORE)


@dataclass(frozen=True)
class Finding:
    """One problem of a program.

    Attributes:
        kind: ``race``, ``fault`` (a check of docs/isa.md fails: `code` says which),
            ``token_order`` (a pop before its push), ``token_overflow``, ``tokens_left``,
            ``no_finish`` or ``decode``.
        pc: The instruction (the later one of a race).
        message: What and where, naming both instructions of a race.
        other_pc: The earlier instruction of a race.
        resource: INP, WGT, ACC, PRM, LUT or MEM (races).
        span: First and last conflicting row, or byte range ``[lo, hi)`` for MEM (races).
        severity: ``error`` or ``warning`` (tokens left at FINISH).
    """

    kind: str
    pc: int | None
    message: str
    other_pc: int | None = None
    resource: str | None = None
    span: tuple[int, int] | None = None
    severity: str = "error"
    code: object = None

    def __str__(self) -> str:
        where = f"pc {self.pc}: " if self.pc is not None else ""
        return f"{self.severity}: {where}{self.message}"


@dataclass
class CheckReport:
    """The checker's verdict: `ok` when no finding is an error."""

    findings: list[Finding] = field(default_factory=list)
    instructions: int = 0

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "error"]

    @property
    def ok(self) -> bool:
        return not self.errors

    def of_kind(self, kind: str) -> list[Finding]:
        return [f for f in self.findings if f.kind == kind]

    def __str__(self) -> str:
        if not self.findings:
            return f"{self.instructions} instructions: no findings"
        return "\n".join(str(f) for f in self.findings)


class _RowState:
    """Per unit, the last instruction that wrote and the last that read each row of one
    resource (an earlier access of a unit happens before its later ones, so these are
    the only candidates for a race with a new access)."""

    def __init__(self, n: int) -> None:
        self.w_done = np.zeros((3, n), np.int64)  # writer's unit-local index + 1 (0: none)
        self.w_pc = np.full((3, n), -1, np.int64)
        self.r_done = np.zeros((3, n), np.int64)
        self.r_pc = np.full((3, n), -1, np.int64)


class HbTracker:
    """Incremental happens-before and race state of a program, instruction by instruction.

    The checker feeds it a whole program; the program generator asks it, before adding an
    instruction, which units it would race with (`unordered_units`).

    Args:
        config: Buffer sizes.
        granules: Sorted memory granules the program may touch (see `access`).
    """

    def __init__(self, config: NpuConfig, granules: np.ndarray) -> None:
        self.config = config
        self.granules = granules
        sizes = {name: fp.buffer_rows(buf, config) for name, buf in _BUFFERS.items()}
        sizes[MEM] = granules.size
        self.state = {name: _RowState(n) for name, n in sizes.items()}
        self.clock = {u: np.zeros(3, np.int64) for u in _UNITS}
        self.count = {u: 0 for u in _UNITS}
        self.pending: dict[Queue, deque[np.ndarray]] = {q: deque() for q in Queue}
        self.pushes = {q: 0 for q in Queue}
        # pops_upto[q][j]: pops of q by the popping unit's first j instructions.
        self.pops_upto: dict[Queue, list[int]] = {q: [0] for q in Queue}

    # --- queries ------------------------------------------------------------------------

    def start_clock(self, unit: Unit, pops: Sequence[Queue]) -> np.ndarray:
        """The clock an instruction of ``unit`` popping ``pops`` would start with."""
        vc = self.clock[unit].copy()
        taken = {q: 0 for q in Queue}
        for q in pops:
            if taken[q] < len(self.pending[q]):
                vc = np.maximum(vc, self.pending[q][taken[q]])
            taken[q] += 1
        return vc

    def _index(self, acc: Access) -> np.ndarray:
        if acc.resource != MEM:
            return acc.rows
        return np.searchsorted(self.granules, acc.rows)

    def _conflicts(
        self, unit: Unit, vc: np.ndarray, acc: Access
    ) -> list[tuple[int, np.ndarray, np.ndarray, bool]]:
        """(other unit, rows, other pcs, other access is a write) of unordered earlier
        accesses."""
        st = self.state[acc.resource]
        idx = self._index(acc)
        late = vc[:, None]
        w_bad = st.w_done[:, idx] > late
        w_bad[int(unit)] = False
        r_bad = None
        if acc.write:
            r_bad = st.r_done[:, idx] > late
            r_bad[int(unit)] = False
        if not w_bad.any() and (r_bad is None or not r_bad.any()):
            return []
        out = []
        for v in _UNITS:
            if w_bad[v].any():
                out.append((int(v), acc.rows[w_bad[v]], st.w_pc[v, idx[w_bad[v]]], True))
            if r_bad is not None and r_bad[v].any():
                out.append((int(v), acc.rows[r_bad[v]], st.r_pc[v, idx[r_bad[v]]], False))
        return out

    def unordered_units(self, unit: Unit, vc: np.ndarray, accs: Sequence[Access]) -> set[Unit]:
        """Units with an earlier access that would race with ``accs`` started at ``vc``."""
        return {Unit(v) for a in accs for v, _, _, _ in self._conflicts(unit, vc, a)}

    # --- updates ------------------------------------------------------------------------

    def add(self, pc: int, insn: Instruction, accs: Sequence[Access]) -> list[Finding]:
        """Account for instruction ``pc``; returns its race and token findings."""
        unit = unit_of(insn)
        assert unit is not None
        pops, pushes, _ = token_ops(insn)
        found: list[Finding] = []
        vc = self.clock[unit].copy()
        for q in pops:
            if self.pending[q]:
                vc = np.maximum(vc, self.pending[q].popleft())
            else:
                found.append(
                    Finding(
                        "token_order", pc, f"pop of {q.name} with no push earlier in program order"
                    )
                )
        for acc in accs:
            for v, rows, pcs, other_w in self._conflicts(unit, vc, acc):
                found.extend(
                    _race_findings(
                        pc, insn, unit, Unit(v), acc, rows, pcs, other_w, self.config.block
                    )
                )
        local = self.count[unit]
        for acc in accs:
            st, idx = self.state[acc.resource], self._index(acc)
            if acc.write:
                st.w_done[int(unit), idx], st.w_pc[int(unit), idx] = local + 1, pc
            else:
                st.r_done[int(unit), idx], st.r_pc[int(unit), idx] = local + 1, pc
        vc[int(unit)] = local + 1
        self.clock[unit] = vc
        self.count[unit] = local + 1
        for q in Queue:
            if QUEUE_ENDS[q][1] == unit:
                self.pops_upto[q].append(self.pops_upto[q][-1] + pops.count(q))
        for q in pushes:
            popper = QUEUE_ENDS[q][1]
            before = self.pops_upto[q][int(vc[int(popper)])]
            if self.pushes[q] - before >= self.config.token_depth:
                found.append(
                    Finding(
                        "token_overflow",
                        pc,
                        f"push into {q.name} may find {self.pushes[q] - before} tokens there "
                        f"(token_depth={self.config.token_depth}): {self.pushes[q]} pushed, only "
                        f"{before} popped in every interleaving",
                    )
                )
            self.pushes[q] += 1
            self.pending[q].append(vc.copy())
        return found


_BUFFERS = {b.name: b for b in Buffer}


def _race_findings(
    pc: int,
    insn: Instruction,
    unit: Unit,
    other: Unit,
    acc: Access,
    rows: np.ndarray,
    pcs: np.ndarray,
    other_write: bool,
    block: int,
) -> list[Finding]:
    out = []
    for opc in np.unique(pcs)[:4]:
        sel = rows[pcs == opc]
        lo, hi = int(sel.min()), int(sel.max())
        if acc.resource == MEM:
            span = (lo * block, (hi + 1) * block)
            what = f"memory bytes [{span[0]:#x}, {span[1]:#x})"
        else:
            span = (lo, hi)
            what = f"{acc.resource} rows {lo}..{hi}"
        verb = "writes" if acc.write else "reads"
        name = type(insn).__name__.upper()
        out.append(
            Finding(
                "race",
                pc,
                f"race on {what}: {name} at pc {pc} ({unit.name}) {verb} them while pc {int(opc)} "
                f"({other.name}) may still {'write' if other_write else 'read'} them; "
                "no token orders the two",
                other_pc=int(opc),
                resource=acc.resource,
                span=span,
            )
        )
    return out


def _windows(
    memory_map: Sequence[MemoryWindow] | Memory | TargetConfig | str,
) -> tuple[MemoryWindow, ...]:
    if isinstance(memory_map, str):
        return target(memory_map).memories
    if isinstance(memory_map, TargetConfig):
        return memory_map.memories
    if isinstance(memory_map, Memory):
        return memory_map.windows
    return tuple(memory_map)


def _instructions(program: Sequence[Instruction] | bytes, report: CheckReport) -> list[Instruction]:
    if not isinstance(program, bytes | bytearray | memoryview):
        return list(program)
    blob = bytes(program)
    out = []
    for i in range(0, len(blob) - len(blob) % INSN_BYTES, INSN_BYTES):
        try:
            out.append(decode(blob[i : i + INSN_BYTES], i // INSN_BYTES))
        except IsaError as exc:
            report.findings.append(Finding("decode", i // INSN_BYTES, str(exc)))
            break
        if isinstance(out[-1], Finish):
            break  # nothing after FINISH is fetched
    if len(blob) % INSN_BYTES:
        report.findings.append(
            Finding(
                "decode",
                None,
                f"program length {len(blob)} is not a multiple of {INSN_BYTES} bytes",
            )
        )
    return out


def _self_writes(
    touched: list[tuple[int, Instruction, list[Access]]], prog_addr: int, n: int, block: int
) -> list[Finding]:
    """STOREs whose bytes overlap the program's own instructions."""
    lo, hi = prog_addr, prog_addr + n * INSN_BYTES
    out = []
    for pc, _, accs in touched:
        for a in accs:
            if a.resource != MEM or not a.write or not a.rows.size:
                continue
            starts = a.rows * block
            hit = starts[(starts < hi) & (starts + block > lo)]
            if hit.size:
                out.append(
                    Finding(
                        "self_write",
                        pc,
                        f"STORE writes the program's own instructions at {int(hit[0]):#x} "
                        f"(program [{lo:#x}, {hi:#x})): the engine fetches ahead, what runs "
                        "is unspecified",
                    )
                )
    return out


def check(
    program: Sequence[Instruction] | bytes,
    bases: Sequence[int] | Mapping[int, int] | None,
    memory_map: Sequence[MemoryWindow] | Memory | TargetConfig | str,
    config: NpuConfig = NPU,
    *,
    max_findings: int = 100,
    prog_addr: int | None = None,
) -> CheckReport:
    """Check a program for one launch (its base register values) without running it.

    Args:
        program: Instructions or the program's bytes.
        bases: BASE register values.
        memory_map: The memory windows (a list, a `Memory`, a `TargetConfig` or its name).
        config: Buffer sizes and token depth.
        max_findings: Stop collecting after this many findings.
        prog_addr: Where the program lies (PROG_ADDR): a STORE into its own instructions
            is then reported (``self_write``: what runs is unspecified, docs/isa.md).

    Returns:
        A `CheckReport`; ``report.ok`` is False when any error was found.
    """
    report = CheckReport()
    if prog_addr is not None and prog_addr % INSN_BYTES:
        report.findings.append(
            Finding(
                "fault",
                0,
                f"MISALIGNED: PROG_ADDR {prog_addr:#x} is not a multiple of {INSN_BYTES}",
                code=EngineError.MISALIGNED,
            )
        )
    insns = _instructions(program, report)
    windows = _windows(memory_map)
    regs = normalize_bases(bases, config.base_regs)
    # Pass 1: checks of every instruction up to FINISH, and what each touches.
    touched: list[tuple[int, Instruction, list[Access]]] = []
    finished = False
    for pc, insn in enumerate(insns):
        report.instructions = pc + 1
        if isinstance(insn, Finish):
            if any(insn.tokens()):
                report.findings.append(Finding("fault", pc, "FINISH: token flags must be 0"))
            finished = True
            break
        fault = static_fault(insn, regs, windows, config)
        if fault is not None:
            report.findings.append(
                Finding("fault", pc, f"{fault.code.name}: {fault.message}", code=fault.code)
            )
            if token_ops(insn)[2] is None:  # keep its tokens: later pops still match
                touched.append((pc, insn, []))
            continue
        touched.append((pc, insn, accesses(insn, regs, config)))
    if not finished and not any(f.kind == "decode" for f in report.findings):
        report.findings.append(
            Finding("no_finish", None, f"no FINISH in {len(insns)} instructions")
        )
    if prog_addr is not None:
        report.findings.extend(_self_writes(touched, prog_addr, len(insns), config.block))
    mem = [a.rows for _, _, accs in touched for a in accs if a.resource == MEM]
    granules = np.unique(np.concatenate(mem)) if mem else np.zeros(0, np.int64)
    # Pass 2: happens-before, races, tokens.
    tracker = HbTracker(config, granules)
    for pc, insn, accs in touched:
        report.findings.extend(tracker.add(pc, insn, accs))
        if len(report.findings) >= max_findings:
            report.findings.append(
                Finding(
                    "truncated", None, f"stopped after {max_findings} findings", severity="warning"
                )
            )
            return report
    if finished:
        for q, toks in tracker.pending.items():
            if toks:
                report.findings.append(
                    Finding(
                        "tokens_left",
                        report.instructions - 1,
                        f"{len(toks)} token(s) left in {q.name} at FINISH",
                        severity="warning",
                    )
                )
    return report
