"""The buffer rows and memory granules an instruction reads and writes.

Memory is tracked in granules of B bytes (every LOAD/STORE address and stride is a
multiple of B, so an access covers whole granules); granule ``g`` is bytes
``[g*B, g*B + B)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from xrt.hw.config import NpuConfig
from xrt.hw.isa import Buffer, Gemm, GemmInit, Instruction, Load, Store, StoreMode, Vec, VecFunc

from . import footprint as fp

__all__ = ["MEM", "Access", "accesses"]

MEM = "MEM"
"""Resource name of memory (granules of B bytes)."""


@dataclass(frozen=True)
class Access:
    """One resource an instruction touches: sorted unique rows (or granules)."""

    resource: str  # INP, WGT, ACC, PRM, LUT or MEM
    rows: np.ndarray
    write: bool


def _rows(idx: np.ndarray) -> np.ndarray:
    return np.unique(idx)


def _range(lo: int, n: int) -> np.ndarray:
    return np.arange(lo, lo + n, dtype=np.int64)


def _granules(starts: np.ndarray, nbytes: int, block: int) -> np.ndarray:
    g = starts.reshape(-1, 1) // block + np.arange(nbytes // block)
    return np.unique(g)


def accesses(insn: Instruction, bases: Sequence[int], config: NpuConfig) -> list[Access]:
    """Every resource ``insn`` reads or writes (reads first). The instruction must have
    passed `validate.static_fault`."""
    b = config.block
    if isinstance(insn, Load):
        e = fp.elem_bytes(insn.buffer, b)
        src = fp.load_sources(insn, bases[insn.base])
        _, _, n = fp.load_geometry(insn)
        return [
            Access(MEM, _granules(src, e, b), False),
            Access(Buffer(insn.buffer).name, _range(insn.sram, n), True),
        ]
    if isinstance(insn, Store):
        out = [Access("ACC", _rows(fp.store_acc_rows(insn)), False)]
        if insn.mode == StoreMode.INT8 and insn.use_prm:
            out.append(Access("PRM", _range(insn.m_or_prm, insn.z_size), False))
        dst = fp.store_targets(insn, bases[insn.base])
        out.append(Access(MEM, _granules(dst, fp.store_elem_bytes(insn, b), b), True))
        return out
    if isinstance(insn, Gemm):
        acc = _rows(fp.affine(insn.acc, fp.gemm_loops(insn, "acc")))
        out = [
            Access("INP", _rows(fp.affine(insn.inp, fp.gemm_loops(insn, "inp"))), False),
            Access("WGT", _rows(fp.affine(insn.wgt, fp.gemm_loops(insn, "wgt"))), False),
        ]
        if insn.init == GemmInit.BIAS:
            out.append(Access("ACC", np.array([insn.bias], np.int64), False))
        out.append(Access("ACC", acc, True))
        return out
    if isinstance(insn, Vec):
        out = []
        for operand, buf in fp.vec_reads(insn):
            out.append(
                Access(
                    buf.name,
                    _rows(fp.affine(getattr(insn, operand), fp.vec_loops(insn, operand))),
                    False,
                )
            )
        if insn.func == VecFunc.LUT:
            per = 256 // b
            out.append(Access("LUT", _range(insn.b * per, per), False))
        out.append(Access("ACC", _rows(fp.affine(insn.dst, fp.vec_loops(insn, "dst"))), True))
        return out
    return []
