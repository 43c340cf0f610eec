"""Random legal programs (for the RTL tests of issue 10) and their field-value coverage.

`generate_program(seed)` builds a program instruction by instruction on a small
configuration: random LOAD / STORE / GEMM / VEC / SYNC instructions over typed memory
regions (activations, outputs, weights, accumulators, PRM words, LUT tables), each region
behind its own base register. Before adding an instruction it asks the checker's
happens-before tracker (`checker.HbTracker`) which units the instruction would race with
and inserts dependency tokens (SYNCs on the other unit, pops on this one) until it races
with none; random extra tokens on real instructions exercise every token flag. The result
is race free by construction and `check` verifies it (the tests do, for many seeds).

`coverage.coverage(programs)` counts the field-value classes the programs hit.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from xrt.hw.config import MemoryWindow, NpuConfig
from xrt.hw.isa import (
    Buffer,
    Finish,
    Gemm,
    GemmInit,
    Instruction,
    Load,
    Store,
    StoreMode,
    Sync,
    Unit,
    Vec,
    VecFunc,
    encode_program,
)
from xrt.hw.targets import NPU, target

from . import footprint as fp
from .access import accesses
from .checker import HbTracker
from .machine import prm_word
from .memory import Memory
from .tokens import QUEUE_ENDS, Queue, token_ops, unit_of

__all__ = ["GeneratedProgram", "Region", "generate_program", "small_config"]

REGION_KINDS = ("act", "out", "wgt", "acc", "prm", "lut")
_POP_FLAG = {  # (unit, queue) -> the flag that pops it
    (Unit.COMPUTE, Queue.L2C): "pop_prev",
    (Unit.LOAD, Queue.C2L): "pop_next",
    (Unit.STORE, Queue.C2S): "pop_prev",
    (Unit.COMPUTE, Queue.S2C): "pop_next",
}
_PUSH_FLAG = {
    (Unit.LOAD, Queue.L2C): "push_next",
    (Unit.COMPUTE, Queue.C2L): "push_prev",
    (Unit.COMPUTE, Queue.C2S): "push_next",
    (Unit.STORE, Queue.S2C): "push_prev",
}


def small_config(block: int = NPU.block, rows: int = 256) -> NpuConfig:
    """A small engine for RTL tests: ``rows`` INP and ACC rows, fewer WGT and PRM rows."""
    return replace(
        NPU,
        block=block,
        inp_rows=rows,
        wgt_rows=max(16, rows // 4),
        acc_rows=rows,
        prm_rows=max(16, rows // 8),
        lut_tables=2,
    )


@dataclass(frozen=True)
class Region:
    """A typed memory region a base register points at."""

    kind: str  # act, out, wgt, acc, prm, lut
    addr: int
    size: int
    reg: int  # the base register holding addr


@dataclass
class GeneratedProgram:
    """A random legal program with everything needed to run it.

    Attributes:
        program: The instructions (ending with FINISH).
        bases: BASE register values.
        windows: Memory windows the regions lie in.
        regions: The typed regions by kind.
        init: ``(address, bytes)`` to write into memory before the launch.
        config: The engine configuration it was generated for.
        seed: Its seed.
    """

    program: list[Instruction]
    bases: list[int]
    windows: tuple[MemoryWindow, ...]
    regions: dict[str, Region]
    init: list[tuple[int, bytes]]
    config: NpuConfig
    seed: int
    stats: Counter = field(default_factory=Counter)
    link_pushes: list[int] = field(default_factory=list)
    """Indices of the SYNCs whose push was inserted to order a racing pair."""

    def memory(self) -> Memory:
        """Fresh memories holding the initial data."""
        mem = Memory(self.windows)
        for addr, data in self.init:
            mem.write(addr, data)
        return mem

    def encode(self) -> bytes:
        """The program's bytes."""
        return encode_program(self.program)


class _Builder:
    def __init__(
        self,
        rng: np.random.Generator,
        config: NpuConfig,
        regions: dict[str, Region],
        bases: list[int],
    ) -> None:
        self.rng, self.config, self.regions, self.bases = rng, config, regions, bases
        g = [
            np.arange(r.addr // config.block, (r.addr + r.size) // config.block)
            for r in regions.values()
        ]
        self.tracker = HbTracker(config, np.unique(np.concatenate(g)))
        self.program: list[Instruction] = []
        self.stats: Counter = Counter()
        self.link_pushes: list[int] = []

    # --- tokens -------------------------------------------------------------------------

    def pending(self, q: Queue) -> int:
        return len(self.tracker.pending[q])

    def _add(self, insn: Instruction, accs: Sequence = ()) -> None:
        found = self.tracker.add(len(self.program), insn, accs)
        if found:
            raise AssertionError(f"generator bug: {found[0]}")
        self.program.append(insn)

    def _sync(self, unit: Unit, **flags: bool) -> None:
        self._add(Sync(unit=unit, **flags))
        self.stats["sync_inserted"] += 1

    def _drain(self, unit: Unit, q: Queue, leave: int) -> None:
        while self.pending(q) > leave:
            self._sync(unit, **{_POP_FLAG[(unit, q)]: True})

    def _link(self, src: Unit, dst: Unit) -> Queue:
        """Tokens so that everything ``src`` did so far happens before ``dst``'s next
        instruction; returns the queue that instruction must pop (once)."""
        direct = {(a, b): q for q, (a, b) in QUEUE_ENDS.items()}
        if (src, dst) in direct:
            q = direct[(src, dst)]
            self.link_pushes.append(len(self.program))
            self._sync(src, **{_PUSH_FLAG[(src, q)]: True})
        else:  # LOAD <-> STORE through a SYNC on COMPUTE
            q_in = direct[(src, Unit.COMPUTE)]
            q = direct[(Unit.COMPUTE, dst)]
            self.link_pushes.append(len(self.program))
            self._sync(src, **{_PUSH_FLAG[(src, q_in)]: True})
            self._drain(Unit.COMPUTE, q_in, 1)
            self._sync(
                Unit.COMPUTE,
                **{_POP_FLAG[(Unit.COMPUTE, q_in)]: True, _PUSH_FLAG[(Unit.COMPUTE, q)]: True},
            )
        self._drain(dst, q, 1)
        return q

    def emit(self, insn: Instruction) -> None:
        """Add ``insn`` with random extra tokens and the tokens that make it race free."""
        unit = unit_of(insn)
        assert unit is not None
        flags = {}
        for (u, q), flag in _POP_FLAG.items():
            if u == unit and self.pending(q) and self.rng.random() < 0.5:
                flags[flag] = True
        for (u, q), flag in _PUSH_FLAG.items():
            if u == unit and self.pending(q) < 2 and self.rng.random() < 0.15:
                flags[flag] = True
        insn = insn.replace(**flags)
        accs = accesses(insn, self.bases, self.config)
        direct = {(a, b): q for q, (a, b) in QUEUE_ENDS.items()}
        for _ in range(4 + 2 * self.config.token_depth):
            vc = self.tracker.start_clock(unit, token_ops(insn)[0])
            need = self.tracker.unordered_units(unit, vc, accs)
            if not need:
                break
            # A LOAD<->STORE link passes through COMPUTE and orders COMPUTE too: do it first.
            src = max(need, key=lambda v: abs(int(v) - int(unit)))
            q = direct.get((src, unit))
            if q is not None and self.pending(q):
                # Tokens already on their way may carry the order: take them first, so
                # that a pushed link token is only added when it is needed.
                flag = _POP_FLAG[(unit, q)]
                if getattr(insn, flag):
                    self._sync(unit, **{flag: True})
                else:
                    insn = insn.replace(**{flag: True})
                continue
            q = self._link(src, unit)
            insn = insn.replace(**{_POP_FLAG[(unit, q)]: True})
        else:
            raise AssertionError("generator bug: could not order an instruction")
        self._add(insn, accs)

    def finish(self) -> None:
        for q in Queue:
            self._drain(QUEUE_ENDS[q][1], q, 0)
        self.program.append(Finish())


# --- random fields ------------------------------------------------------------------------


def _choice(rng: np.random.Generator, options: Sequence, p: Sequence[float] | None = None):
    return options[int(rng.choice(len(options), p=p))]


def _loop_start(
    rng: np.random.Generator, rows: int, loops: Sequence[tuple[int, int]]
) -> int | None:
    lo, hi = fp.extremes(0, loops)
    if hi - lo >= rows:
        return None
    return int(rng.integers(-lo, rows - hi))


def _strides(rng: np.random.Generator, n: int) -> list[int]:
    return [int(_choice(rng, [-2, -1, 0, 1, 1, 2, 3])) for _ in range(n)]


def _tile_strides(
    rng: np.random.Generator, sizes: tuple[int, int, int], elem: int, block: int
) -> tuple[int, int, int]:
    """(x, y, z) byte strides: dense, zero or with gaps."""
    _, yn, xn = sizes
    xs = _choice(rng, [elem, elem, 0, elem + block * int(rng.integers(1, 4))])
    ys = _choice(rng, [xn * max(xs, elem), 0, xn * max(xs, elem) + block * int(rng.integers(1, 4))])
    zs = _choice(rng, [yn * max(ys, xn * elem), 0, yn * max(ys, xn * elem) + block])
    return int(xs), int(ys), int(zs)


def _place(
    rng: np.random.Generator,
    region: Region,
    sizes: tuple[int, int, int],
    strides: tuple[int, int, int],
    elem: int,
    block: int,
) -> int | None:
    (zn, yn, xn), (xs, ys, zs) = sizes, strides
    extent = (zn - 1) * zs + (yn - 1) * ys + (xn - 1) * xs + elem
    if extent > region.size:
        return None
    return block * int(rng.integers(0, (region.size - extent) // block + 1))


def _load(b: _Builder) -> Instruction | None:
    rng, cfg, blk = b.rng, b.config, b.config.block
    buf = _choice(rng, list(Buffer), [0.35, 0.2, 0.15, 0.15, 0.15])
    e = fp.elem_bytes(buf, blk)
    region = b.regions[
        {
            Buffer.INP: _choice(rng, ["act", "out"]),
            Buffer.WGT: "wgt",
            Buffer.ACC: "acc",
            Buffer.PRM: "prm",
            Buffer.LUT: "lut",
        }[buf]
    ]
    sizes = (
        int(rng.integers(1, 3)),
        int(rng.integers(1, 4)),
        int(rng.integers(1, 6 if buf == Buffer.INP else 4)),
    )
    strides = _tile_strides(rng, sizes, e, blk)
    offset = _place(rng, region, sizes, strides, e, blk)
    if offset is None:
        return None
    pads = dict(pad_top=0, pad_bottom=0, pad_left=0, pad_right=0)
    pad_min = False
    if buf == Buffer.INP and rng.random() < 0.4:
        pads = {k: int(rng.integers(0, 3)) for k in pads}
        pad_min = bool(rng.random() < 0.5)
    insn = Load(
        buffer=buf,
        base=region.reg,
        offset=offset,
        z_size=sizes[0],
        y_size=sizes[1],
        x_size=sizes[2],
        x_stride=strides[0],
        y_stride=strides[1],
        z_stride=strides[2],
        pad_min=pad_min,
        **pads,
    )
    _, _, n = fp.load_geometry(insn)
    rows = fp.buffer_rows(buf, cfg)
    if n > rows:
        return None
    return insn.replace(sram=int(rng.integers(0, rows - n + 1)))


def _store(b: _Builder) -> Instruction | None:
    rng, cfg, blk = b.rng, b.config, b.config.block
    mode = _choice(rng, [StoreMode.INT8, StoreMode.INT32], [0.7, 0.3])
    e = 4 * blk if mode == StoreMode.INT32 else blk
    region = b.regions["acc" if mode == StoreMode.INT32 else _choice(rng, ["out", "out", "act"])]
    sizes = (int(rng.integers(1, 3)), int(rng.integers(1, 4)), int(rng.integers(1, 5)))
    strides = _tile_strides(rng, sizes, e, blk)
    offset = _place(rng, region, sizes, strides, e, blk)
    if offset is None:
        return None
    zn, yn, xn = sizes
    sx = _choice(rng, [1, 1, 0, 2])
    sy = _choice(rng, [xn * max(sx, 1), 0, int(rng.integers(1, 8))])
    sz = _choice(rng, [yn * max(sy, xn), 0, int(rng.integers(1, 16))])
    hi_row = (zn - 1) * sz + (yn - 1) * sy + (xn - 1) * sx
    if hi_row >= cfg.acc_rows:
        return None
    lo, hi = _choice(rng, [(-128, 127), (0, 127), (-128, -128), (127, 127), None]) or tuple(
        sorted(int(v) for v in rng.integers(-128, 128, 2))
    )
    fields = dict(
        mode=mode,
        base=region.reg,
        offset=offset,
        z_size=zn,
        y_size=yn,
        x_size=xn,
        x_stride=strides[0],
        y_stride=strides[1],
        z_stride=strides[2],
        sram_x_stride=sx,
        sram_y_stride=sy,
        sram_z_stride=sz,
        lo=lo,
        hi=hi,
        sram=int(rng.integers(0, cfg.acc_rows - hi_row)),
    )
    if mode == StoreMode.INT8 and rng.random() < 0.4 and zn <= cfg.prm_rows:
        fields.update(use_prm=True, m_or_prm=int(rng.integers(0, cfg.prm_rows - zn + 1)))
    else:
        m = _choice(
            rng,
            [0, 1, -32768, 32767, int(rng.integers(2**14, 2**15)), -int(rng.integers(1, 2**15))],
        )
        fields.update(
            m_or_prm=m & 0xFFFF,
            shift=_choice(rng, [0, 46, int(rng.integers(1, 46)), int(rng.integers(10, 20))]),
        )
    return Store(**fields)


def _gemm(b: _Builder) -> Instruction | None:
    rng, cfg = b.rng, b.config
    n = (int(rng.integers(1, 4)), int(rng.integers(1, 4)), int(rng.integers(1, 7)))  # n2, n1, n0
    fields: dict = dict(n2=n[0], n1=n[1], n0=n[2], init=_choice(rng, list(GemmInit)))
    for op, rows in (("acc", cfg.acc_rows), ("inp", cfg.inp_rows), ("wgt", cfg.wgt_rows)):
        s = _strides(rng, 3)
        start = _loop_start(rng, rows, list(zip(n, s, strict=True)))
        if start is None:
            return None
        fields.update({op: start, f"{op}_s2": s[0], f"{op}_s1": s[1], f"{op}_s0": s[2]})
    fields["bias"] = int(rng.integers(0, cfg.acc_rows))
    return Gemm(**fields)


def _vec(b: _Builder) -> Instruction | None:
    rng, cfg = b.rng, b.config
    func = _choice(rng, list(VecFunc))
    n = (int(rng.integers(1, 4)), int(rng.integers(1, 7)))  # n1, n0
    lut = func == VecFunc.LUT
    a_acc = not lut and bool(rng.random() < 0.5)
    b_acc = not lut and bool(rng.random() < 0.5)
    mult = [0, 1, -1, 32767, -32768, int(rng.integers(-(2**15), 2**15))]
    fields: dict = dict(
        func=func,
        n1=n[0],
        n0=n[1],
        a_acc=a_acc,
        b_acc=b_acc,
        ma=_choice(rng, mult),
        mb=_choice(rng, mult),
    )
    for op, on_acc in (("dst", True), ("a", a_acc), ("b", b_acc)):
        s = _strides(rng, 2)
        start = _loop_start(
            rng, cfg.acc_rows if on_acc else cfg.inp_rows, list(zip(n, s, strict=True))
        )
        if start is None:
            return None
        fields.update({op: start, f"{op}_s1": s[0], f"{op}_s0": s[1]})
    if lut:
        fields.update(b=int(rng.integers(0, cfg.lut_tables)), b_s0=0, b_s1=0)
    elif rng.random() < 0.25:  # pooling: B is the destination itself
        fields.update(b_acc=True, b=fields["dst"], b_s0=fields["dst_s0"], b_s1=fields["dst_s1"])
    return Vec(**fields)


def _random_sync(b: _Builder) -> None:
    unit = _choice(b.rng, list(Unit))
    flags = {}
    for (u, q), flag in _POP_FLAG.items():
        if u == unit and b.pending(q) and b.rng.random() < 0.7:
            flags[flag] = True
    for (u, q), flag in _PUSH_FLAG.items():
        if u == unit and b.pending(q) < 2 and b.rng.random() < 0.5:
            flags[flag] = True
    b._add(Sync(unit=unit, **flags))


def _regions(
    rng: np.random.Generator, windows: Sequence[MemoryWindow], block: int, region_bytes: int
) -> tuple[dict[str, Region], list[int]]:
    regs = [int(r) for r in rng.permutation(NPU.base_regs)[: len(REGION_KINDS)]]
    bases = [0] * NPU.base_regs
    regions = {}
    used: dict[str, int] = {}
    for i, kind in enumerate(REGION_KINDS):
        w = windows[i % len(windows)]
        at = used.get(w.name, 0)
        if at + region_bytes > w.size:
            raise ValueError(f"window {w.name} ({w.size:#x} bytes) is too small for the regions")
        used[w.name] = at + region_bytes
        regions[kind] = Region(kind, w.base + at, region_bytes, regs[i])
        bases[regs[i]] = w.base + at
    return regions, bases


def _init_data(
    rng: np.random.Generator, regions: dict[str, Region], block: int
) -> list[tuple[int, bytes]]:
    out = []
    for kind, r in regions.items():
        if kind in ("act", "wgt", "lut"):
            data = rng.integers(-128, 128, r.size, dtype=np.int64).astype(np.int8).tobytes()
        elif kind == "acc":
            n = r.size // 4
            small = rng.integers(-3000, 3000, n)
            big = rng.integers(-(2**31), 2**31, n)
            data = np.where(rng.random(n) < 0.2, big, small).astype("<i4").tobytes()
        elif kind == "prm":
            n = r.size // 4
            m = np.where(rng.random(n) < 0.1, 0, rng.integers(-(2**15), 2**15, n))
            s = np.where(rng.random(n) < 0.1, rng.integers(47, 64, n), rng.integers(0, 47, n))
            data = prm_word(m, s).tobytes()
        else:  # out starts zeroed
            continue
        out.append((r.addr, data))
    return out


def generate_program(
    seed: int,
    config: NpuConfig | None = None,
    windows: Sequence[MemoryWindow] | None = None,
    length: int = 150,
    region_bytes: int = 8192,
) -> GeneratedProgram:
    """A random race-free program of about ``length`` work instructions.

    Args:
        seed: Seed of the random choices (the same seed gives the same program).
        config: Engine sizes (default `small_config()`).
        windows: Memory windows to place the six data regions in, round robin
            (default: the ZG330 target's udma, plddr and ocm).
        length: Instructions before FINISH, about (the final token drain adds a few).
        region_bytes: Size of each data region.
    """
    rng = np.random.default_rng(seed)
    config = config or small_config()
    windows = tuple(windows or target("zg330").memories)
    regions, bases = _regions(rng, windows, config.block, region_bytes)
    b = _Builder(rng, config, regions, bases)
    makers = [_load, _store, _gemm, _vec]
    while len(b.program) < length:
        kind = _choice(rng, ["load", "store", "gemm", "vec", "sync"], [0.3, 0.2, 0.2, 0.22, 0.08])
        if kind == "sync":
            _random_sync(b)
            continue
        insn = makers[["load", "store", "gemm", "vec"].index(kind)](b)
        if insn is not None:
            b.emit(insn)
    b.finish()
    return GeneratedProgram(
        b.program,
        bases,
        windows,
        regions,
        _init_data(rng, regions, config.block),
        config,
        seed,
        b.stats,
        b.link_pushes,
    )
