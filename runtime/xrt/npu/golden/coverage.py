"""Field-value coverage of programs: which classes of each instruction's fields they hit.

`ALL_BINS` lists every bin (every opcode, every enum value, padding with 0 and -128,
zero and negative strides, init modes, every VEC function with A and B from either buffer,
PRM and immediate requantization with S = 0 / 46, M = 0 / negative / positive, saturation
bound extremes, SYNC on every unit, every token flag on a working instruction, three or
more base registers); `coverage` counts how often programs hit each.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

import numpy as np

from xrt.hw.isa import (
    Buffer,
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
)

from . import footprint as fp
from .tokens import FLAG_QUEUE, unit_of

__all__ = ["ALL_BINS", "bins_of", "coverage"]


def _bins_load(i: Load) -> Iterable[str]:
    yield f"load.buffer.{i.buffer.name}"
    e_dense = i.x_stride == 0
    if i.pad_top or i.pad_bottom or i.pad_left or i.pad_right:
        yield "load.pad"
        yield f"load.pad_value.{'-128' if i.pad_min else '0'}"
    if i.x_size > 1:
        yield "load.x_stride.0" if e_dense else "load.x_stride.nonzero"
    if i.y_size > 1 and i.y_stride == 0:
        yield "load.y_stride.0"
    if i.z_size > 1:
        yield "load.z_size>1"


def _bins_store(i: Store) -> Iterable[str]:
    yield f"store.mode.{i.mode.name}"
    if i.mode == StoreMode.INT8:
        if i.use_prm:
            yield "store.use_prm"
        else:
            m = i.m_or_prm - 0x10000 if i.m_or_prm & 0x8000 else i.m_or_prm
            yield "store.imm"
            yield "store.m.0" if m == 0 else ("store.m.neg" if m < 0 else "store.m.pos")
            if i.shift in (0, 46):
                yield f"store.shift.{i.shift}"
        if (i.lo, i.hi) == (-128, 127):
            yield "store.bounds.full"
        elif i.lo == i.hi == -128:
            yield "store.bounds.all_-128"
        elif i.lo == i.hi == 127:
            yield "store.bounds.all_127"
        else:
            yield "store.bounds.narrow"
    if any(
        n > 1 and s == 0
        for n, s in (
            (i.x_size, i.sram_x_stride),
            (i.y_size, i.sram_y_stride),
            (i.z_size, i.sram_z_stride),
        )
    ):
        yield "store.sram_stride.0"


def _bins_gemm(i: Gemm) -> Iterable[str]:
    yield f"gemm.init.{i.init.name}"
    strides = [getattr(i, f"{op}_s{k}") for op in ("acc", "inp", "wgt") for k in range(3)]
    if any(s < 0 for s in strides):
        yield "gemm.stride.neg"
    if i.n2 > 1:
        yield "gemm.n2>1"
    a = fp.affine(i.acc, fp.gemm_loops(i, "acc"))
    if np.unique(a).size < a.size:
        yield "gemm.acc_repeats"


def _bins_vec(i: Vec) -> Iterable[str]:
    yield f"vec.func.{i.func.name}"
    yield f"vec.a_acc.{int(i.a_acc)}"
    if i.func not in (VecFunc.MOV, VecFunc.LUT):
        yield f"vec.b_acc.{int(i.b_acc)}"
        if i.b_acc and i.b == i.dst and (i.b_s0, i.b_s1) == (i.dst_s0, i.dst_s1):
            yield "vec.reduce_into_dst"
    if any(getattr(i, f"{op}_s{k}") < 0 for op in ("dst", "a", "b") for k in range(2)):
        yield "vec.stride.neg"


def bins_of(insn: Instruction) -> list[str]:
    """The coverage bins one instruction hits."""
    out: list[str] = []
    if isinstance(insn, Load):
        out += _bins_load(insn)
    elif isinstance(insn, Store):
        out += _bins_store(insn)
    elif isinstance(insn, Gemm):
        out += _bins_gemm(insn)
    elif isinstance(insn, Vec):
        out += _bins_vec(insn)
    elif isinstance(insn, Sync):
        out.append(f"sync.{insn.unit.name}")
    unit = unit_of(insn)
    if unit is not None and not isinstance(insn, Sync):
        for flag in ("pop_prev", "pop_next", "push_prev", "push_next"):
            if getattr(insn, flag):
                out.append(f"token.{unit.name}.{flag}")
    return out


def _all_bins() -> list[str]:
    out = [f"load.buffer.{b.name}" for b in Buffer]
    out += [
        "load.pad",
        "load.pad_value.0",
        "load.pad_value.-128",
        "load.x_stride.0",
        "load.x_stride.nonzero",
        "load.y_stride.0",
        "load.z_size>1",
    ]
    out += [f"store.mode.{m.name}" for m in StoreMode]
    out += [
        "store.use_prm",
        "store.imm",
        "store.m.0",
        "store.m.neg",
        "store.m.pos",
        "store.shift.0",
        "store.shift.46",
    ]
    out += [
        "store.bounds.full",
        "store.bounds.all_-128",
        "store.bounds.all_127",
        "store.bounds.narrow",
        "store.sram_stride.0",
    ]
    out += [f"gemm.init.{g.name}" for g in GemmInit] + [
        "gemm.stride.neg",
        "gemm.n2>1",
        "gemm.acc_repeats",
    ]
    out += [f"vec.func.{f.name}" for f in VecFunc]
    out += [
        "vec.a_acc.0",
        "vec.a_acc.1",
        "vec.b_acc.0",
        "vec.b_acc.1",
        "vec.reduce_into_dst",
        "vec.stride.neg",
    ]
    out += [f"sync.{u.name}" for u in Unit]
    out += [f"token.{u.name}.{f}" for (u, f) in FLAG_QUEUE]
    out += ["program.bases>=3"]
    return out


ALL_BINS: tuple[str, ...] = tuple(_all_bins())
"""Every coverage bin `coverage` counts."""


def coverage(programs: Iterable[Sequence[Instruction]]) -> Counter:
    """How often each bin of `ALL_BINS` was hit (bins never hit have count 0)."""
    hits: Counter = Counter({name: 0 for name in ALL_BINS})
    for prog in programs:
        regs = set()
        for insn in prog:
            hits.update(bins_of(insn))
            if isinstance(insn, Load | Store):
                regs.add(insn.base)
        if len(regs) >= 3:
            hits["program.bases>=3"] += 1
    return hits
