"""The engine's state and what each instruction does to it (docs/isa.md, "Semantics").

`Machine` holds the five on-chip buffers; `Machine.load`, `store`, `gemm` and `vec`
apply one instruction that has already passed its checks (`validate.static_fault`).
Every instruction is numpy-vectorised. Iterations of a GEMM or VEC are sequential in the
spec; the vectorised paths are exact whenever no iteration reads a row an earlier
iteration of the same instruction wrote (or the pattern is a reduction handled with a
ufunc). Other aliasing patterns take `_gemm_slow` / `_vec_slow`, one Python step per
iteration: they are legal but rare (no compiler emits them on purpose).
"""

from __future__ import annotations

import numpy as np

from xrt.hw.config import NpuConfig
from xrt.hw.isa import Buffer, Gemm, GemmInit, Load, Store, StoreMode, Vec, VecFunc
from xrt.ops.intmath import requantize

from . import footprint as fp
from .memory import Memory

__all__ = ["Machine", "prm_word", "requantize_exact"]

_CHUNK = 1 << 16  # GEMM iterations vectorised at once (bounds temporary memory)
_REQUANT_SHIFT_CAP = 62  # every S in 48..63 gives 0 (|acc * M| <= 2**46), as S = 62 does


def prm_word(m: int | np.ndarray, s: int | np.ndarray) -> np.ndarray:
    """PRM words ``{S[21:16], M[15:0]}`` from signed 16-bit M and 6-bit S."""
    m = np.asarray(m, np.int64)
    s = np.asarray(s, np.int64)
    return ((s & 0x3F) << 16 | (m & 0xFFFF)).astype("<u4")


def requantize_exact(
    acc: np.ndarray, m: np.ndarray | int, s: np.ndarray | int, lo: int, hi: int
) -> np.ndarray:
    """docs/quantization.md 5.2 for any S in 0..63 and signed 16-bit M (int8 result)."""
    return requantize(acc, m, np.minimum(np.asarray(s, np.int64), _REQUANT_SHIFT_CAP), lo, hi)


def _wrap32(x: np.ndarray) -> np.ndarray:
    return x.astype(np.int64).astype("<i4")  # two's complement wrap (numpy casts modulo 2**32)


class Machine:
    """The on-chip buffers of one compute engine.

    Attributes:
        inp: INP rows, (inp_rows, B) int8.
        wgt: WGT blocks, (wgt_rows, B, B) int8, ``wgt[r, o, i]`` (output o, input i).
        acc: ACC rows, (acc_rows, B) int32.
        prm: PRM words, (prm_rows, B) uint32 ``{S[21:16], M[15:0]}``.
        lut: LUT rows, (lut_tables * 256 / B, B) int8; table t entry k is
            ``lut.reshape(-1)[t * 256 + k]``.
    """

    def __init__(self, config: NpuConfig) -> None:
        b = config.block
        if b < 1 or 256 % b:
            raise ValueError(f"block B={b} must divide 256")
        self.config = config
        self.inp = np.zeros((config.inp_rows, b), np.int8)
        self.wgt = np.zeros((config.wgt_rows, b, b), np.int8)
        self.acc = np.zeros((config.acc_rows, b), "<i4")
        self.prm = np.zeros((config.prm_rows, b), "<u4")
        self.lut = np.zeros((fp.lut_rows(config), b), np.int8)

    def buffer(self, buffer: Buffer) -> np.ndarray:
        """The array of one buffer."""
        return {
            Buffer.INP: self.inp,
            Buffer.WGT: self.wgt,
            Buffer.ACC: self.acc,
            Buffer.PRM: self.prm,
            Buffer.LUT: self.lut,
        }[Buffer(buffer)]

    def row_bytes(self, buffer: Buffer) -> np.ndarray:
        """A (rows, E) uint8 view of a buffer: row r as it sits in memory."""
        arr = self.buffer(buffer)
        return arr.view(np.uint8).reshape(arr.shape[0], -1)

    # --- LOAD / STORE -------------------------------------------------------------------

    def load(self, insn: Load, base_addr: int, memory: Memory) -> int:
        """Execute a LOAD; returns the bytes read from memory."""
        e = fp.elem_bytes(insn.buffer, self.config.block)
        src = fp.load_sources(insn, base_addr)
        win = memory.window_of(int(src.flat[0]), 1)
        assert win is not None  # checked before
        mem = memory.array(win)
        data = mem[(src - win.base)[..., None] + np.arange(e)]  # (z, y, x, E)
        pw, ph, n = fp.load_geometry(insn)
        pad = 0x80 if insn.pad_min else 0
        tile = np.full((insn.z_size, ph, pw, e), pad, np.uint8)
        tile[
            :,
            insn.pad_top : insn.pad_top + insn.y_size,
            insn.pad_left : insn.pad_left + insn.x_size,
        ] = data
        self.row_bytes(insn.buffer)[insn.sram : insn.sram + n] = tile.reshape(n, e)
        return int(data.size)

    def store_bytes(self, insn: Store) -> np.ndarray:
        """The bytes a STORE writes, (z, y, x, E) uint8."""
        acc = self.acc[fp.store_acc_rows(insn)]  # (z, y, x, B)
        if insn.mode == StoreMode.INT32:
            return acc.astype("<i4").view(np.uint8)
        if insn.use_prm:
            words = self.prm[insn.m_or_prm : insn.m_or_prm + insn.z_size].astype(np.int64)
            m = (words & 0xFFFF).astype(np.uint16).view(np.int16)[:, None, None, :]
            s = ((words >> 16) & 0x3F)[:, None, None, :]
        else:
            m = np.int64(insn.m_or_prm - 0x10000 if insn.m_or_prm & 0x8000 else insn.m_or_prm)
            s = np.int64(insn.shift)
        return requantize_exact(acc, m, s, insn.lo, insn.hi).view(np.uint8)

    def store(self, insn: Store, base_addr: int, memory: Memory) -> int:
        """Execute a STORE; returns the bytes written."""
        out = self.store_bytes(insn)
        e = out.shape[-1]
        dst = fp.store_targets(insn, base_addr)
        win = memory.window_of(int(dst.flat[0]), 1)
        assert win is not None
        idx = ((dst - win.base)[..., None] + np.arange(e)).reshape(-1)
        vals = out.reshape(-1)
        if not _disjoint(
            (insn.z_size, insn.y_size, insn.x_size),
            (insn.z_stride, insn.y_stride, insn.x_stride),
            e,
        ):
            # Overlapping elements: the last write in program order wins.
            rev = idx[::-1]
            uniq, first = np.unique(rev, return_index=True)
            idx, vals = uniq, vals[::-1][first]
        memory.array(win)[idx] = vals
        return int(out.size)

    # --- GEMM ---------------------------------------------------------------------------

    def gemm(self, insn: Gemm) -> None:
        """Execute a GEMM (int32 wrap-around, init on the first outer pass)."""
        a = fp.affine(insn.acc, fp.gemm_loops(insn, "acc"))
        x = fp.affine(insn.inp, fp.gemm_loops(insn, "inp"))
        w = fp.affine(insn.wgt, fp.gemm_loops(insn, "wgt"))
        first_pass = insn.n1 * insn.n0  # iterations with i2 == 0 come first
        if insn.init == GemmInit.BIAS and np.any(a == insn.bias):
            self._gemm_slow(insn, a, x, w, first_pass)
            return
        for lo in range(0, a.size, _CHUNK):
            hi = min(a.size, lo + _CHUNK)
            self._gemm_chunk(insn, a[lo:hi], x[lo:hi], w[lo:hi], first_pass - lo)

    def _products(self, x: np.ndarray, w: np.ndarray) -> np.ndarray:
        """``INP[x_k] . WGT[w_k]^T`` for every iteration k, int64 (N, B)."""
        if w.size and w.min() == w.max():  # one weight block (1x1 conv, one tap, FC row)
            return self.inp[x].astype(np.int64) @ self.wgt[w[0]].astype(np.int64).T
        blocks, inverse = np.unique(w, return_inverse=True)
        if blocks.size * 8 > w.size:  # mostly distinct blocks: gather and contract
            out = np.empty((x.size, self.config.block), np.int64)
            for lo in range(0, x.size, 4096):
                sl = slice(lo, lo + 4096)
                xs = self.inp[x[sl]].astype(np.int32)
                out[sl] = np.einsum("ki,koi->ko", xs, self.wgt[w[sl]].astype(np.int32))
            return out
        out = np.empty((x.size, self.config.block), np.int64)
        if blocks.size == 1:
            out[:] = self.inp[x].astype(np.int64) @ self.wgt[blocks[0]].astype(np.int64).T
            return out
        for j, blk in enumerate(blocks):  # one matmul per distinct weight block (conv taps)
            sel = np.nonzero(inverse == j)[0]
            out[sel] = self.inp[x[sel]].astype(np.int64) @ self.wgt[blk].astype(np.int64).T
        return out

    def _gemm_chunk(
        self, insn: Gemm, a: np.ndarray, x: np.ndarray, w: np.ndarray, first_pass: int
    ) -> None:
        prod = self._products(x, w)
        if self._distinct_acc_rows(insn):  # every row once: no accumulation inside the chunk
            start = self.acc[a].astype(np.int64)
            if insn.init != GemmInit.ACC:
                restart = np.arange(a.size) < first_pass
                start[restart] = 0 if insn.init == GemmInit.ZERO else self.acc[insn.bias]
            self.acc[a] = _wrap32(start + prod)
            return
        rows, inv = np.unique(a, return_inverse=True)
        k = np.arange(a.size)
        # last_init[r]: the last iteration (in this chunk) that restarts row r, or -1.
        last_init = np.full(rows.size, -1, np.int64)
        if insn.init != GemmInit.ACC:
            init_k = k[k < first_pass]
            np.maximum.at(last_init, inv[init_k], init_k)
        keep = k >= last_init[inv]
        sums = np.zeros((rows.size, self.config.block), np.int64)
        np.add.at(sums, inv[keep], prod[keep])
        start = self.acc[rows].astype(np.int64)
        restarted = last_init >= 0
        if insn.init == GemmInit.ZERO:
            start[restarted] = 0
        elif insn.init == GemmInit.BIAS:
            start[restarted] = self.acc[insn.bias].astype(np.int64)
        self.acc[rows] = _wrap32(start + sums)

    @staticmethod
    def _distinct_acc_rows(insn: Gemm) -> bool:
        loops = fp.gemm_loops(insn, "acc")
        sizes = tuple(n for n, _ in loops)
        strides = tuple(abs(s) for _, s in loops)
        return _disjoint(sizes, strides, 1)

    def _gemm_slow(
        self, insn: Gemm, a: np.ndarray, x: np.ndarray, w: np.ndarray, first_pass: int
    ) -> None:
        """One step per iteration: the bias row is also a destination (documented fallback)."""
        for k in range(a.size):
            if k < first_pass and insn.init == GemmInit.ZERO:
                start = np.zeros(self.config.block, np.int64)
            elif k < first_pass and insn.init == GemmInit.BIAS:
                start = self.acc[insn.bias].astype(np.int64)
            else:
                start = self.acc[a[k]].astype(np.int64)
            x_row = self.inp[x[k]].astype(np.int64)
            self.acc[a[k]] = _wrap32(start + self.wgt[w[k]].astype(np.int64) @ x_row)

    # --- VEC ----------------------------------------------------------------------------

    def _source(self, insn: Vec, operand: str) -> tuple[np.ndarray, bool]:
        idx = fp.affine(getattr(insn, operand), fp.vec_loops(insn, operand))
        return idx, bool(getattr(insn, f"{operand}_acc"))

    def _rows(self, idx: np.ndarray, from_acc: bool) -> np.ndarray:
        return (self.acc if from_acc else self.inp)[idx].astype(np.int64)

    def _apply(self, insn: Vec, av: np.ndarray, bv: np.ndarray | None) -> np.ndarray:
        f = insn.func
        if f == VecFunc.MOV:
            return av
        if f == VecFunc.LUT:
            table = self.lut.reshape(-1).astype(np.int64)
            return table[insn.b * 256 + av + 128]
        assert bv is not None
        if f == VecFunc.ADD:
            return av + bv
        if f == VecFunc.MUL:
            return _wrap32(av * bv).astype(np.int64)  # |A*B| < 2**63 for int32 operands
        if f == VecFunc.MAX:
            return np.maximum(av, bv)
        if f == VecFunc.MIN:
            return np.minimum(av, bv)
        if f == VecFunc.QADD:
            return av * insn.ma + bv * insn.mb  # |.| < 2**48: exact before the wrap
        raise ValueError(f"VEC: undefined func {f}")

    def vec(self, insn: Vec) -> None:
        """Execute a VEC (lane-wise int32, wrap-around, sequential iterations)."""
        d = fp.affine(insn.dst, fp.vec_loops(insn, "dst"))
        ai, a_acc = self._source(insn, "a")
        reads_b = insn.func not in (VecFunc.MOV, VecFunc.LUT)
        bi, b_acc = self._source(insn, "b") if reads_b else (ai, False)
        acc_reads = [i for i, on_acc in ((ai, a_acc), (bi, b_acc and reads_b)) if on_acc]
        n = d.size
        # Reductions (pooling): B (or A) is the destination itself, the other source is
        # never written by this instruction.
        reducer = {VecFunc.ADD: np.add, VecFunc.MAX: np.maximum, VecFunc.MIN: np.minimum}.get(
            insn.func
        )
        if reducer is not None:
            for self_idx, self_acc, other_idx, other_acc in (
                (bi, b_acc, ai, a_acc),
                (ai, a_acc, bi, b_acc),
            ):
                if (
                    self_acc
                    and np.array_equal(self_idx, d)
                    and not (other_acc and np.isin(other_idx, d).any())
                ):
                    vals = self._rows(other_idx, other_acc)
                    if insn.func == VecFunc.ADD:
                        rows, inv = np.unique(d, return_inverse=True)
                        sums = self.acc[rows].astype(np.int64)
                        np.add.at(sums, inv, vals)
                        self.acc[rows] = _wrap32(sums)
                    else:
                        reducer.at(self.acc, d, vals.astype("<i4"))
                    return
        # Vectorised when no iteration reads a row an earlier iteration wrote.
        first_write = np.full(self.config.acc_rows, n, np.int64)
        np.minimum.at(first_write, d, np.arange(n))
        k = np.arange(n)
        if all(np.all(first_write[idx] >= k) for idx in acc_reads):
            av = self._rows(ai, a_acc)
            bv = self._rows(bi, b_acc) if reads_b else None
            out = _wrap32(self._apply(insn, av, bv))
            rev_rows, last = np.unique(d[::-1], return_index=True)  # last write wins
            self.acc[rev_rows] = out[::-1][last]
            return
        self._vec_slow(insn, d, ai, a_acc, bi, b_acc, reads_b)

    def _vec_slow(
        self,
        insn: Vec,
        d: np.ndarray,
        ai: np.ndarray,
        a_acc: bool,
        bi: np.ndarray,
        b_acc: bool,
        reads_b: bool,
    ) -> None:
        """One step per iteration: a read-after-write inside the instruction that is not a
        plain reduction (documented fallback)."""
        for k in range(d.size):
            av = self._rows(ai[k : k + 1], a_acc)
            bv = self._rows(bi[k : k + 1], b_acc) if reads_b else None
            self.acc[d[k]] = _wrap32(self._apply(insn, av, bv))[0]


def _disjoint(sizes: tuple[int, ...], strides: tuple[int, ...], elem: int) -> bool:
    """True when the elements of a strided tile never overlap in memory."""
    extent = elem
    for n, s in sorted(
        ((n, s) for n, s in zip(sizes, strides, strict=True) if n > 1), key=lambda t: t[1]
    ):
        if s < extent:
            return False
        extent = s * (n - 1) + extent
    return True
