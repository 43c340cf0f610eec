"""Lockstep checking: the engine's retirement trace against the golden model, launch by launch.

The RTL (built with ``NPU_LOCKSTEP``: rtl/sim/npu_cmp_lockstep.sv) records, per launch, its
start (PROG_ADDR, PROG_INSNS, BASE registers), every instruction its units retire (unit,
index, cycle), every beat its AXI master reads (the first read of each 16-byte granule, and
every error response), every beat the STORE unit writes (address, data, strobes, the
STORE's index), write responses with an error, and how the launch ended (code, index,
unit). `LockstepChecker` replays each launch on the golden model and compares
(docs/verification.md "Lockstep"):

* **memory image**: the golden model starts from the bytes the engine read (each granule's
  first read in the launch: its value before the launch wrote it, or the value a STORE
  ordered before the read by tokens wrote, which the golden model writes itself before
  reading it); bus errors the engine saw become the golden memory's faults;
* **buffers**: the golden `Machine` follows the engine's from launch to launch (programs
  may use rows an earlier one left), from zero after each wipe (reset, ``CORE_CTRL.WIPE``);
  after a launch that ended with an error the engine's buffers are undefined
  (docs/isa.md), so later launches are not checked until the next wipe;
* **per unit, program order**: the units run concurrently, so retirement order across
  units is timing; within a unit it is program order. Each unit's retired indices must be
  the golden model's for that unit (on an error: a prefix of those before the error);
* **effects**: each retired STORE's bytes in memory (the last write of each byte wins, as
  docs/isa.md says for overlapping elements) must be the golden model's, byte for byte;
* **the end**: error code, index and unit.

The first divergence in program order (the lowest instruction index) is reported as a
`Divergence` naming the instruction, its unit, and the expected and actual effect.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import NamedTuple

import numpy as np

from xrt.hw.config import MemoryWindow, NpuConfig
from xrt.hw.isa import INSN_BYTES, EngineError, Instruction, IsaError, Store, Unit, decode
from xrt.hw.targets import NPU

from . import footprint as fp
from .executor import RunResult, run
from .machine import Machine
from .memory import Memory

__all__ = [
    "BEAT_DTYPE",
    "EVENT_DTYPE",
    "Divergence",
    "Launch",
    "LockstepChecker",
    "insn_text",
]

# The C++ records (rtl/sim/npu_lockstep_dpi.cpp, struct Event and struct Beat).
EVENT_DTYPE = np.dtype(
    [
        ("kind", "<u4"),
        ("unit", "<u4"),
        ("pc", "<u4"),
        ("code", "<u4"),
        ("cycle", "<u8"),
        ("addr", "<u8"),
        ("mark", "<u8"),
    ]
)
BEAT_DTYPE = np.dtype(
    [
        ("addr", "<u8"),
        ("pc", "<u4"),
        ("strb", "<u2"),
        ("kind", "u1"),
        ("resp", "u1"),
        ("data", "u1", (16,)),
    ]
)
EV_START, EV_RETIRE, EV_END, EV_WIPED = 1, 2, 3, 4
BEAT_READ, BEAT_WRITE, BEAT_WRESP = 0, 1, 2
_RESP = {2: "SLVERR", 3: "DECERR"}
_UNIT_NAMES = {0: "LOAD", 1: "COMPUTE", 2: "STORE", 3: "ENGINE"}
GRANULE = 16  # bytes per beat of the engine's master


@dataclass(frozen=True)
class Launch:
    """One launch of the trace."""

    index: int
    prog_addr: int
    prog_insns: int
    bases: tuple[int, ...]
    retired: np.ndarray  # EVENT_DTYPE records of kind EV_RETIRE, in retirement order
    beats: np.ndarray  # BEAT_DTYPE records
    end: np.void  # the EV_END record
    wiped_before: bool  # a wipe completed since the previous launch


@dataclass(frozen=True)
class Divergence:
    """Where the engine first disagreed with the golden model."""

    launch: int
    pc: int | None
    text: str  # the instruction's disassembly
    unit: str
    what: str  # which effect: retirement, memory, end
    expected: str
    actual: str

    def __str__(self) -> str:
        where = "before any instruction" if self.pc is None else f"at instruction {self.pc}"
        return (
            f"lockstep divergence in launch {self.launch} {where} ({self.text}), unit "
            f"{self.unit}, {self.what}: golden model {self.expected}; RTL {self.actual}"
        )


def insn_text(insn: Instruction) -> str:
    """A short disassembly: the instruction's name and the fields that are not 0."""
    parts = []
    for f in fields(insn):
        v = getattr(insn, f.name)
        if v not in (0, False):
            parts.append(f"{f.name}={getattr(v, 'name', v)}")
    return f"{type(insn).__name__.upper()} {', '.join(parts)}".rstrip()


class _Effect(NamedTuple):
    """The bytes one STORE left in memory, by 16-byte granule (sorted addresses)."""

    addrs: np.ndarray  # (G,) uint64 granule addresses, sorted, distinct
    data: np.ndarray  # (G, 16) uint8
    mask: np.ndarray  # (G, 16) bool: the bytes written

    @property
    def nbytes(self) -> int:
        return int(self.mask.sum())

    def byte_view(self) -> tuple[np.ndarray, np.ndarray]:
        """(sorted byte addresses, their values)."""
        a = (self.addrs[:, None] + np.arange(GRANULE, dtype=np.uint64))[self.mask]
        return a, self.data[self.mask]

    def same(self, other: _Effect) -> bool:
        return (
            np.array_equal(self.addrs, other.addrs)
            and np.array_equal(self.mask, other.mask)
            and np.array_equal(self.data[self.mask], other.data[other.mask])
        )


_NO_EFFECT = _Effect(np.zeros(0, np.uint64), np.zeros((0, GRANULE), np.uint8),
                     np.zeros((0, GRANULE), bool))  # fmt: skip


class _Retirements(list):
    """The executor's `schedule` list, used as its per-instruction hook: when an
    instruction has executed, a STORE's bytes are read back from the golden memory (its
    effect), before any later instruction can overwrite them."""

    def __init__(self, memory: Memory, prog_addr: int, bases: Sequence[int], block: int) -> None:
        super().__init__()
        self.memory, self.prog_addr, self.bases, self.block = memory, prog_addr, bases, block
        self.stores: dict[int, _Effect] = {}

    def append(self, entry: tuple[int, Unit, int, int]) -> None:
        super().append(entry)
        pc, unit = entry[0], entry[1]
        if unit != Unit.STORE:
            return
        insn = decode(self.memory.read(self.prog_addr + pc * INSN_BYTES, INSN_BYTES).tobytes())
        if not isinstance(insn, Store):
            return  # a SYNC of the store unit
        elem = fp.store_elem_bytes(insn, self.block)
        starts = fp.store_targets(insn, self.bases[insn.base]).reshape(-1).astype(np.uint64)
        # Elements are whole granules at granule-aligned addresses (B = 16, the engine's
        # beat; the ISA's alignment check stops the engine before a misaligned STORE runs):
        # 16 times fewer items than bytes.
        steps = np.arange(0, elem, GRANULE, dtype=np.uint64)
        g = np.unique((starts[:, None] + steps).ravel())
        self.stores[pc] = _Effect(g, _gather(self.memory, g), np.ones((g.size, GRANULE), bool))


def _gather(memory: Memory, granules: np.ndarray) -> np.ndarray:
    """The 16 bytes at each granule address, (G, 16)."""
    out = np.zeros((granules.size, GRANULE), np.uint8)
    lanes = np.arange(GRANULE, dtype=np.int64)
    for w in memory.windows:
        sel = (granules >= w.base) & (granules + GRANULE <= w.end)
        out[sel] = memory.array(w)[(granules[sel] - w.base).astype(np.int64)[:, None] + lanes]
    return out


def _prefill(memory: Memory, beats: np.ndarray) -> None:
    """The engine's first reads as the golden memory; its error responses as faults."""
    reads = beats[beats["kind"] == BEAT_READ]
    good = reads[reads["resp"] == 0]
    lanes = np.arange(GRANULE, dtype=np.uint64)
    for w in memory.windows:
        sel = good[(good["addr"] >= w.base) & (good["addr"] + GRANULE <= w.end)]
        if sel.size:
            idx = ((sel["addr"] - w.base)[:, None] + lanes).astype(np.int64)
            memory.array(w)[idx] = sel["data"]
    bad = reads[reads["resp"] >= 2]
    # A burst that hit a fault answers it on every beat; a granule also read without
    # error lies outside the fault.
    for b in bad[~np.isin(bad["addr"], good["addr"])]:
        memory.add_fault(int(b["addr"]), GRANULE, _RESP[int(b["resp"])], "read")
    for b in beats[(beats["kind"] == BEAT_WRESP) & (beats["resp"] >= 2)]:
        memory.add_fault(int(b["addr"]), GRANULE * int(b["strb"]), _RESP[int(b["resp"])], "write")


def _strobes(strb: np.ndarray) -> np.ndarray:
    """(N,) 16-bit strobes as (N, 16) bools."""
    raw = strb.astype("<u2").view(np.uint8).reshape(-1, 2)
    return np.unpackbits(raw, axis=1, bitorder="little").astype(bool)


def _rtl_stores(beats: np.ndarray) -> dict[int, _Effect]:
    """Per STORE index: the bytes its W beats left (the last write of a byte wins)."""
    w = beats[beats["kind"] == BEAT_WRITE]
    w = w[np.argsort(w["pc"], kind="stable")]
    out = {}
    for chunk in np.split(w, np.flatnonzero(np.diff(w["pc"])) + 1):
        if not chunk.size:
            continue
        order = np.argsort(chunk["addr"], kind="stable")
        a = chunk["addr"][order]
        if np.all(chunk["strb"] == 0xFFFF) and not np.any(a[1:] == a[:-1]):
            out[int(chunk["pc"][0])] = _Effect(a, chunk["data"][order],
                                               np.ones((a.size, GRANULE), bool))  # fmt: skip
            continue
        # Partial strobes or a granule written twice: replay the beats in write order.
        cells: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        for beat, m in zip(chunk, _strobes(chunk["strb"]), strict=True):
            data, mask = cells.get(
                int(beat["addr"]), (np.zeros(GRANULE, np.uint8), np.zeros(GRANULE, bool))
            )
            data = np.where(m, beat["data"], data)
            cells[int(beat["addr"])] = (data, mask | m)
        keys = sorted(k for k, (_, m) in cells.items() if m.any())
        out[int(chunk["pc"][0])] = _Effect(
            np.array(keys, np.uint64),
            np.array([cells[k][0] for k in keys], np.uint8).reshape(-1, GRANULE),
            np.array([cells[k][1] for k in keys], bool).reshape(-1, GRANULE),
        )
    return out


def _store_diff(want: _Effect, got: _Effect | None) -> tuple[str, str] | None:
    """None when equal, else (expected text, actual text)."""
    got = got if got is not None else _NO_EFFECT
    if want.same(got):
        return None
    wa, wv = want.byte_view()
    ga, gv = got.byte_view()
    if not np.array_equal(wa, ga):
        missing = np.setdiff1d(wa, ga)
        extra = np.setdiff1d(ga, wa)
        first = int(missing[0]) if missing.size else None
        return (
            f"writes {wa.size} bytes" + (f", including {first:#x}" if first is not None else ""),
            f"wrote {ga.size} bytes ({missing.size} of them missing, {extra.size} extra"
            + (f", first extra at {int(extra[0]):#x}" if extra.size else "")
            + ")",
        )
    bad = np.flatnonzero(wv != gv)
    k = int(bad[0])
    return (
        f"byte {int(wa[k]):#x} = {int(wv[k]):#04x} ({bad.size} of {wa.size} bytes differ)",
        f"byte {int(wa[k]):#x} = {int(gv[k]):#04x}",
    )


class LockstepChecker:
    """Checks launches of one engine against the golden model, keeping the golden buffers.

    Args:
        windows: The memory windows the engine reaches.
        config: The engine's configuration.
    """

    def __init__(self, windows: Sequence[MemoryWindow], config: NpuConfig = NPU) -> None:
        self.windows = tuple(windows)
        self.config = config
        self.machine = Machine(config)
        self.trusted = True  # the golden buffers equal the engine's
        self.checked = 0
        self.skipped = 0
        self.stats: Counter[str] = Counter()  # what the checks compared (retired, store_bytes)
        self._events = np.zeros(0, EVENT_DTYPE)
        self._beats = np.zeros(0, BEAT_DTYPE)
        self._bases = np.zeros(0, np.uint64)
        self._wiped = False

    # ------------------------------------------------------------------ the trace
    def feed(self, events: np.ndarray, beats: np.ndarray, bases: np.ndarray) -> list[Divergence]:
        """Take a chunk of the trace (as `npuemu.sim.lockstep` reads it) and check every
        launch in it that has ended; a launch still running waits for the next chunk."""
        shift = self._beats.size
        events = events.copy()
        events["mark"] += shift
        self._events = np.concatenate([self._events, events])
        self._beats = np.concatenate([self._beats, beats])
        self._bases = np.concatenate([self._bases, bases.astype(np.uint64)])
        out = []
        for launch in self._launches():
            d = self.check(launch)
            if d is not None:
                out.append(d)
        return out

    def _launches(self) -> list[Launch]:
        ev, done, nstart, i = self._events, [], 0, 0
        while i < ev.size:
            kind = int(ev[i]["kind"])
            if kind != EV_START:
                self._wiped |= kind == EV_WIPED  # else a stray event: the trace began mid-launch
                i += 1
                continue
            ends = np.flatnonzero(ev["kind"][i + 1 :] == EV_END)
            if not ends.size:
                break  # still running
            j = i + 1 + int(ends[0])
            start, end = ev[i], ev[j]
            body = ev[i + 1 : j]
            done.append(
                Launch(
                    index=int(start["code"]),
                    prog_addr=int(start["addr"]),
                    prog_insns=int(start["pc"]),
                    bases=tuple(int(x) for x in self._bases[16 * nstart : 16 * nstart + 16]),
                    retired=body[body["kind"] == EV_RETIRE],
                    beats=self._beats[int(start["mark"]) : int(end["mark"])],
                    end=end,
                    wiped_before=self._wiped,
                )
            )
            self._wiped = False
            nstart += 1
            i = j + 1
        # Keep what is not checked yet: the running launch's start, events and beats.
        rest = self._events[i:]
        mark = int(rest[0]["mark"]) if rest.size else self._beats.size
        self._events = rest.copy()
        self._events["mark"] -= mark
        self._beats = self._beats[mark:]
        self._bases = self._bases[16 * nstart :]
        return done

    # ------------------------------------------------------------------ one launch
    def check(self, launch: Launch) -> Divergence | None:
        """Replay one launch on the golden model; the first divergence, or None."""
        if launch.wiped_before:
            self.machine = Machine(self.config)
            self.trusted = True
        if not self.trusted:
            self.skipped += 1
            return None
        self.checked += 1
        mem = Memory(self.windows)
        _prefill(mem, launch.beats)
        hook = _Retirements(mem, launch.prog_addr, launch.bases, self.config.block)
        res = run(
            None,
            mem,
            launch.bases,
            config=self.config,
            machine=self.machine,
            prog_addr=launch.prog_addr,
            prog_insns=launch.prog_insns,
            schedule=hook,
        )
        rtl_err = int(launch.end["code"])
        if not res.ok or rtl_err:
            self.trusted = False  # the engine's buffers are undefined after an error
        self.stats["retired"] += int(launch.retired.size)
        self.stats["store_bytes"] += sum(e.nbytes for e in hook.stores.values())
        found = [
            *self._retirement_divergences(launch, res, hook),
            *self._store_divergences(launch, res, hook),
            *self._end_divergence(launch, res),
        ]
        if not found:
            return None
        found.sort(key=lambda d: -1 if d.pc is None else d.pc)
        return found[0]

    def _text(self, mem_pc: int | None, launch: Launch) -> str:
        if mem_pc is None:
            return "no instruction"
        addr = launch.prog_addr + mem_pc * INSN_BYTES
        hit = launch.beats[(launch.beats["kind"] == BEAT_READ) & (launch.beats["resp"] == 0)]
        raw = b""
        for half in (0, GRANULE):
            row = hit[hit["addr"] == addr + half]
            if not row.size:
                return "not fetched"
            raw += row[0]["data"].tobytes()
        try:
            return insn_text(decode(raw, mem_pc))
        except IsaError:
            return f"undecodable {raw.hex()}"

    def _divergence(self, launch: Launch, pc: int | None, unit: str, what: str, want: str,
                    got: str) -> Divergence:  # fmt: skip
        return Divergence(launch.index, pc, self._text(pc, launch), unit, what, want, got)

    def _retirement_divergences(self, launch: Launch, res: RunResult, hook: _Retirements):
        stop = res.error_pc if not res.ok else None
        for u in range(3):
            want = [pc for pc, unit, _, _ in hook if int(unit) == u]
            got = [int(p) for p in launch.retired["pc"][launch.retired["unit"] == u]]
            if stop is not None:
                got = [p for p in got if p < stop]  # beyond the golden model's error: no reference
            prefix_ok = int(launch.end["code"]) != 0  # an engine error cuts each unit short
            n = min(len(want), len(got))
            bad = next((k for k in range(n) if want[k] != got[k]), None)
            if bad is None and len(got) > len(want):
                bad = len(want)
            if bad is None and len(got) < len(want) and not prefix_ok:
                bad = len(got)
            if bad is None:
                continue
            w = want[bad] if bad < len(want) else None
            g = got[bad] if bad < len(got) else None
            pc = min(p for p in (w, g) if p is not None)
            yield self._divergence(
                launch, pc, _UNIT_NAMES[u], f"{_UNIT_NAMES[u]} retirement {bad}",
                "retires instruction " + (str(w) if w is not None else "nothing more"),
                "retired " + (f"instruction {g}" if g is not None else "nothing more"),
            )  # fmt: skip

    def _store_divergences(self, launch: Launch, res: RunResult, hook: _Retirements):
        got = _rtl_stores(launch.beats)
        retired = set(int(p) for p in launch.retired["pc"][launch.retired["unit"] == 2])
        for pc in sorted(hook.stores):
            if pc not in retired:
                continue  # not retired by the engine: a retirement divergence, or cut short
            diff = _store_diff(hook.stores[pc], got.get(pc))
            if diff is not None:
                yield self._divergence(launch, pc, "STORE", "memory writes", *diff)

    def _end_divergence(self, launch: Launch, res: RunResult):
        want = (res.error, res.error_pc, 3 if res.error_unit is None else int(res.error_unit))
        code = int(launch.end["code"])
        got_err = EngineError(code)
        got = (got_err, int(launch.end["pc"]) if code else None, int(launch.end["unit"]))
        if res.ok and not code:
            return
        if want == got:
            return
        pcs = [p for p in (want[1], got[1]) if p is not None]
        yield self._divergence(
            launch, min(pcs) if pcs else None, _UNIT_NAMES[got[2] if code else want[2]], "end",
            _end_text(*want) + (f" ({res.message})" if res.message else ""), _end_text(*got),
        )  # fmt: skip


def _end_text(code: EngineError, pc: int | None, unit: int) -> str:
    if code == EngineError.NONE:
        return "finishes without error"
    return f"stops with {code.name} at instruction {pc}, unit {_UNIT_NAMES[unit]}"
