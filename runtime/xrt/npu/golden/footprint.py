"""What an instruction touches: its affine index sets, buffer rows and memory addresses.

The executor, the checker and the program generator all derive an instruction's rows and
addresses from these functions, so the three can never disagree on them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from xrt.hw.config import NpuConfig
from xrt.hw.isa import Buffer, Gemm, GemmInit, Load, Store, StoreMode, Vec, VecFunc

__all__ = [
    "Loop",
    "affine",
    "buffer_rows",
    "elem_bytes",
    "extremes",
    "gemm_loops",
    "load_dest_rows",
    "load_geometry",
    "load_sources",
    "lut_rows",
    "store_acc_rows",
    "store_elem_bytes",
    "store_targets",
    "tile_addresses",
    "vec_loops",
    "vec_reads",
]

Loop = tuple[int, int]
"""(count, stride) of one loop level."""


def affine(start: int, loops: Sequence[Loop]) -> np.ndarray:
    """Indices ``start + sum(i_k * stride_k)`` of nested loops (outermost first), flattened
    in execution order (innermost fastest), as int64."""
    idx = np.array([start], np.int64)
    for count, stride in loops:
        if count != 1:
            idx = (idx[:, None] + np.arange(count, dtype=np.int64) * stride).reshape(-1)
    return idx


def extremes(start: int, loops: Sequence[Loop]) -> tuple[int, int]:
    """Lowest and highest index the loops reach."""
    lo = hi = start
    for count, stride in loops:
        span = (count - 1) * stride
        lo += min(span, 0)
        hi += max(span, 0)
    return lo, hi


def lut_rows(config: NpuConfig) -> int:
    """Rows of the LUT buffer (256 entries per table, B per row)."""
    return config.lut_tables * 256 // config.block


def buffer_rows(buffer: Buffer, config: NpuConfig) -> int:
    """Rows of an on-chip buffer."""
    return {
        Buffer.INP: config.inp_rows,
        Buffer.WGT: config.wgt_rows,
        Buffer.ACC: config.acc_rows,
        Buffer.PRM: config.prm_rows,
        Buffer.LUT: lut_rows(config),
    }[Buffer(buffer)]


def elem_bytes(buffer: Buffer, block: int) -> int:
    """Bytes one row of ``buffer`` occupies in memory (E in docs/isa.md)."""
    return {
        Buffer.INP: block,
        Buffer.LUT: block,
        Buffer.WGT: block * block,
        Buffer.ACC: 4 * block,
        Buffer.PRM: 4 * block,
    }[Buffer(buffer)]


def store_elem_bytes(insn: Store, block: int) -> int:
    """Bytes a STORE writes per accumulator row."""
    return 4 * block if insn.mode == StoreMode.INT32 else block


# --- LOAD -------------------------------------------------------------------------------


def load_geometry(insn: Load) -> tuple[int, int, int]:
    """(PW, PH, rows written): padded row length, padded plane height, total rows."""
    pw = insn.pad_left + insn.x_size + insn.pad_right
    ph = insn.pad_top + insn.y_size + insn.pad_bottom
    return pw, ph, insn.z_size * ph * pw


def tile_addresses(
    first: int, sizes: tuple[int, int, int], strides: tuple[int, int, int]
) -> np.ndarray:
    """Addresses ``first + z*zs + y*ys + x*xs`` of a (z, y, x) tile, shape (z, y, x)."""
    (zn, yn, xn), (zs, ys, xs) = sizes, strides
    return affine(first, [(zn, zs), (yn, ys), (xn, xs)]).reshape(zn, yn, xn)


def load_sources(insn: Load, base_addr: int) -> np.ndarray:
    """First byte of every element a LOAD reads, shape (z, y, x)."""
    return tile_addresses(
        base_addr + insn.offset,
        (insn.z_size, insn.y_size, insn.x_size),
        (insn.z_stride, insn.y_stride, insn.x_stride),
    )


def load_dest_rows(insn: Load) -> np.ndarray:
    """Buffer row every element read lands in, shape (z, y, x) (padding rows excluded)."""
    pw, ph, _ = load_geometry(insn)
    first = insn.sram + insn.pad_top * pw + insn.pad_left
    return tile_addresses(first, (insn.z_size, insn.y_size, insn.x_size), (ph * pw, pw, 1))


# --- STORE ------------------------------------------------------------------------------


def store_acc_rows(insn: Store) -> np.ndarray:
    """Accumulator row every element comes from, shape (z, y, x)."""
    return tile_addresses(
        insn.sram,
        (insn.z_size, insn.y_size, insn.x_size),
        (insn.sram_z_stride, insn.sram_y_stride, insn.sram_x_stride),
    )


def store_targets(insn: Store, base_addr: int) -> np.ndarray:
    """First byte every element is written to, shape (z, y, x)."""
    return tile_addresses(
        base_addr + insn.offset,
        (insn.z_size, insn.y_size, insn.x_size),
        (insn.z_stride, insn.y_stride, insn.x_stride),
    )


# --- GEMM and VEC -----------------------------------------------------------------------


def gemm_loops(insn: Gemm, operand: str) -> list[Loop]:
    """Loops (outermost first) of one GEMM operand: ``"acc"``, ``"inp"`` or ``"wgt"``."""
    s = insn.__dict__
    return [
        (insn.n2, s[f"{operand}_s2"]),
        (insn.n1, s[f"{operand}_s1"]),
        (insn.n0, s[f"{operand}_s0"]),
    ]


def gemm_reads_old_acc(insn: Gemm) -> bool:
    """True when some iteration reads the accumulator row it adds to."""
    return insn.init == GemmInit.ACC or insn.n2 > 1


def vec_loops(insn: Vec, operand: str) -> list[Loop]:
    """Loops (outermost first) of one VEC operand: ``"dst"``, ``"a"`` or ``"b"``."""
    s = insn.__dict__
    return [(insn.n1, s[f"{operand}_s1"]), (insn.n0, s[f"{operand}_s0"])]


def vec_reads(insn: Vec) -> list[tuple[str, Buffer]]:
    """Source operands a VEC reads with their buffers (B is not read by MOV and LUT)."""
    out = [("a", Buffer.ACC if insn.a_acc else Buffer.INP)]
    if insn.func not in (VecFunc.MOV, VecFunc.LUT):
        out.append(("b", Buffer.ACC if insn.b_acc else Buffer.INP))
    return out
