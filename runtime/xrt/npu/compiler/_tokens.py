"""Automatic dependency-token insertion (docs/isa.md "Dependency tokens").

The emitters produce `Step` s: an instruction without token flags plus what it reads and
writes (buffer row ranges, memory byte ranges per base register). `insert_tokens` walks
them in program order and, for every conflict (read after write, write after read, write
after write) between instructions of different units that is not already ordered, sets a
push flag on the earlier instruction and a pop flag on the later one. LOAD and STORE are not
neighbours: an order between them goes through a SYNC on COMPUTE placed just before the
waiting instruction.

Ordering knowledge is a vector clock per unit: ``clock[u][v]`` is the position of the last
instruction of unit ``v`` known to have completed before unit ``u``'s next instruction
starts. A conflict with an instruction at or below that position needs no token. Because a
unit only ever waits for a later instruction than it already waited for, the k-th push of a
queue always meets the k-th pop, and every push is popped (balanced at FINISH).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from xrt.hw import isa

__all__ = ["Access", "Step", "insert_tokens"]

Access = tuple[str, int, int]
"""``(space, lo, hi)``: rows ``[lo, hi)`` of a buffer (``"INP"``, ``"WGT"``, ``"ACC"``,
``"PRM"``, ``"LUT"``) or bytes ``[lo, hi)`` of memory at a base register (``"mem3"``)."""

_L, _C, _S = int(isa.Unit.LOAD), int(isa.Unit.COMPUTE), int(isa.Unit.STORE)


_USERS = {
    "INP": (_L, _C),
    "WGT": (_L, _C),
    "LUT": (_L, _C),
    "PRM": (_L, _S),
    "ACC": (_L, _C, _S),
}
"""The units that can touch each buffer (an access only conflicts with these)."""


@dataclass
class Step:
    """One instruction (token flags clear) and the resources it touches."""

    insn: isa.Instruction
    reads: list[Access] = field(default_factory=list)
    writes: list[Access] = field(default_factory=list)


@dataclass
class _Entry:
    unit: int
    pos: int
    index: int  # index into the output list
    write: bool
    lo: int
    hi: int


_KEEP = 8
"""Entries one unit's reads (or writes) of one grain are spread over."""


class _Tracker:
    """Recent accesses per space, pruned once every other unit is ordered after them.

    Accesses of one unit and kind within one `grain` of rows (a buffer half) go round robin
    into `_KEEP` entries, each merging into what its entry held: its rows the union, its
    position the latest. Whoever must wait for an earlier one waits for the latest, which
    (program order) covers it; the union can only add waits. Keeping several apart lets a
    GEMM wait only for the LOAD of its own output block's weights, not for the last of a
    layer's weight LOADs.
    """

    def __init__(self, clock: list[list[int]], grains: Mapping[str, int]) -> None:
        self.spaces: dict[str, dict[tuple[int, bool, int, int], _Entry]] = defaultdict(dict)
        self.count: dict[tuple[str, int, bool, int], int] = defaultdict(int)
        self.limit: dict[str, int] = defaultdict(lambda: 64)
        self.clock = clock
        self.grains = grains

    def conflicts(
        self, unit: int, acc: Access, write: bool, need: dict[int, tuple[int, int]]
    ) -> None:
        space, lo, hi = acc
        for e in self.spaces[space].values():
            if (
                e.unit != unit
                and (write or e.write)
                and e.lo < hi
                and lo < e.hi
                and (e.unit not in need or need[e.unit][0] < e.pos)
            ):
                need[e.unit] = (e.pos, e.index)

    def add(self, entry: _Entry, space: str) -> None:
        entries = self.spaces[space]
        grain = self.grains.get(space)
        if grain:
            group = (space, entry.unit, entry.write, entry.lo // grain)
            self.count[group] += 1
            key = (entry.unit, entry.write, entry.lo // grain, self.count[group] % _KEEP)
            old = entries.get(key)
            if old is not None:
                entry.lo, entry.hi = min(entry.lo, old.lo), max(entry.hi, old.hi)
        else:
            key = (entry.unit, entry.write, entry.lo, entry.hi)
        entries[key] = entry
        if len(entries) > self.limit[space]:
            clock = self.clock
            users = _USERS.get(space, (_L, _S))  # memory: LOAD and STORE
            kept = {
                k: e
                for k, e in entries.items()
                if any(clock[u][e.unit] < e.pos for u in users if u != e.unit)
            }
            self.spaces[space] = kept
            self.limit[space] = max(64, 2 * len(kept))


def _flags(insn: isa.Instruction, **flags: bool) -> isa.Instruction:
    return insn.replace(**{k: getattr(insn, k) or v for k, v in flags.items()})


def insert_tokens(
    steps: list[Step], with_index: bool = False, grains: Mapping[str, int] | None = None
) -> Any:
    """The program with token flags and SYNCs that order every conflicting pair, then FINISH.

    `grains` (rows per buffer half) lets accesses within one half merge, which keeps the
    pass linear on long programs. With `with_index`, returns ``(program, index)`` where
    ``index[k]`` is the position of ``steps[k]`` in the program.
    """
    where: list[int] = []
    out: list[isa.Instruction] = []
    last = [-1, -1, -1]  # output index of each unit's latest instruction
    pos = [0, 0, 0]
    clocks: dict[int, list[int]] = {}  # output index -> vector clock at completion
    clock = [[0, 0, 0] for _ in range(3)]
    tracker = _Tracker(clock, grains or {})

    def emit(insn: isa.Instruction, unit: int, waits: dict[int, int]) -> int:
        """Append `insn` on `unit`, popping from each neighbour unit's instruction in `waits`."""
        flags: dict[str, bool] = {}
        vc = list(clock[unit])
        for v, j in waits.items():
            prev = v < unit  # v is the previous unit (L before C before S)
            out[j] = _flags(out[j], **{"push_next" if prev else "push_prev": True})
            flags["pop_prev" if prev else "pop_next"] = True
            vc = [max(a, b) for a, b in zip(vc, clocks[j], strict=True)]
        pos[unit] += 1
        vc[unit] = pos[unit]
        out.append(_flags(insn, **flags) if flags else insn)
        last[unit] = len(out) - 1
        clocks[len(out) - 1] = vc
        clock[unit] = vc
        return len(out) - 1

    for step in steps:
        unit = int(isa.unit_of(step.insn))  # type: ignore[arg-type]
        need: dict[int, tuple[int, int]] = {}
        for acc in step.reads:
            tracker.conflicts(unit, acc, False, need)
        for acc in step.writes:
            tracker.conflicts(unit, acc, True, need)
        need = {v: pj for v, pj in need.items() if pj[0] > clock[unit][v]}
        waits: dict[int, int] = {}
        far = _S if unit == _L else _L if unit == _S else None
        if far is not None and far in need:
            # LOAD <-> STORE: ordered through COMPUTE. If COMPUTE already waited for that
            # instruction, waiting for COMPUTE's latest instruction is enough; otherwise
            # the far unit pushes to COMPUTE and a SYNC there passes the token on.
            fpos, fj = need.pop(far)
            if clock[_C][far] >= fpos:
                if pos[_C] > clock[unit][_C]:
                    need[_C] = (pos[_C], last[_C])
            else:
                need.pop(_C, None)  # every earlier COMPUTE instruction precedes the SYNC
                waits[_C] = emit(isa.Sync(unit=isa.Unit.COMPUTE), _C, {far: fj})
        for v, (_p, j) in need.items():
            waits[v] = j
        index = emit(step.insn, unit, waits)
        where.append(index)
        for acc in step.reads:
            tracker.add(_Entry(unit, pos[unit], index, False, acc[1], acc[2]), acc[0])
        for acc in step.writes:
            tracker.add(_Entry(unit, pos[unit], index, True, acc[1], acc[2]), acc[0])
    out.append(isa.Finish())
    return (out, where) if with_index else out
