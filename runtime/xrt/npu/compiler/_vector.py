"""Lowering of the vector-unit operators: pointwise, pooling, concatenation, data movement.

Every operator here works plane by plane on channel-tiled data (B channels per buffer row),
tiles over output rows so one tile fits half of INP and half of ACC, and ends in one
requantizing STORE per tile (or per region of equal divisor for average pooling):

* pointwise (QAdd, QMul, QClip/Relu, QLut, copies): one VEC per tile, its inner loop over
  the tile's pixels and its outer loop over planes; a broadcast operand of one pixel per
  plane gets a zero inner stride.
* pooling: one VEC per plane and tap (MOV for the first tap, then MAX/ADD into the
  accumulators), reading the padded INP tile with the window's strides; padding rows and
  columns come from the LOAD (-128 for max pooling, 0 for sums).
* padding, nearest resizing: padded LOADs, VEC MOVs, STOREs that repeat rows.

Concatenation and the other lane-crossing movements are in `xrt.npu.compiler._movement`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from xrt.hw import isa
from xrt.npu.compiler._emit import MAX_COUNT, Emitter
from xrt.npu.compiler._layout import View

__all__ = [
    "StoreQ",
    "emit_gap",
    "emit_pad",
    "emit_pointwise",
    "emit_pool",
    "emit_resize",
    "pool_tile_rows",
]


@dataclass(frozen=True)
class StoreQ:
    """Per-tensor requantization of a STORE: ``clamp((acc*m + round) >> s, lo, hi)``."""

    m: int = 1
    s: int = 0
    lo: int = -128
    hi: int = 127


def _row_tile(em: Emitter, rows: int, cols: int, planes: int, inp_per_px: int) -> tuple[int, int]:
    """``(rows, planes)`` per tile: rows*cols <= 1023 (one VEC loop), INP and ACC halves."""
    th = max(1, min(rows, MAX_COUNT // cols, em.half("ACC") // cols,
                    em.half("INP") // (cols * inp_per_px)))  # fmt: skip
    per_plane = th * cols
    nz = min(
        planes, MAX_COUNT, em.half("ACC") // per_plane, em.half("INP") // (per_plane * inp_per_px)
    )
    return th, max(1, nz)


def emit_pointwise(
    em: Emitter,
    func: isa.VecFunc,
    a: View,
    yv: View,
    q: StoreQ,
    b: View | None = None,
    b_bcast: bool = False,
    ma: int = 0,
    mb: int = 0,
    table: int = 0,
) -> None:
    """``y = store(func(a, b))`` pixel by pixel; `b` may be one pixel per plane (broadcast)."""
    rows, cols, planes = yv.rows, yv.cols, yv.planes
    th, nz = _row_tile(em, rows, cols, planes, 1 if b is None else 2)
    for z0 in range(0, planes, nz):
        tz = min(nz, planes - z0)
        for y0 in range(0, rows, th):
            ty = min(th, rows - y0)
            p = ty * cols
            ibase = em.slot("INP")
            em.load_view(ibase, a, z0, tz, y0, ty)
            bbase = ibase + tz * p
            if b is not None:
                if b_bcast:
                    em.load_view(bbase, b, z0, tz, 0, 1, nx=1)
                else:
                    em.load_view(bbase, b, z0, tz, y0, ty)
            abase = em.slot("ACC")
            loops = [(p, 1, 1, 0 if b_bcast else 1), (tz, p, p, 1 if b_bcast else p)]
            if func == isa.VecFunc.LUT:
                em.vec(func, abase, ibase, loops, b=table)
            elif b is None:
                em.vec(func, abase, ibase, loops)
            else:
                em.vec(func, abase, ibase, loops, b=bbase, ma=ma, mb=mb)
            em.store(yv, z0, y0, 0, cols, ty, tz, abase, 1, cols, p, q.m, q.s, q.lo, q.hi)


def pool_tile_rows(em: Emitter, xv: View, ho: int, wo: int, win: tuple[int, ...]) -> int:
    """Output rows per pooling tile (0: not even one row fits)."""
    kh, kw, sh, sw, dh, dw, _pt, pl, _pb, _pr = win
    pw = pl + xv.cols + _right_pad(xv.cols, wo, kw, sw, dw, pl)
    th = min(ho, MAX_COUNT, em.half("ACC") // wo)
    while th >= 1 and ((th - 1) * sh + (kh - 1) * dh + 1) * pw > em.half("INP"):
        th -= 1
    return th


def _right_pad(w: int, wo: int, kw: int, sw: int, dw: int, pl: int) -> int:
    return max(0, (wo - 1) * sw - pl + (kw - 1) * dw - (w - 1))


def emit_pool(
    em: Emitter,
    xv: View,
    yv: View,
    win: tuple[int, ...],
    kind: str,
    stores: list[tuple[int, int, int, int, StoreQ]] | StoreQ,
) -> None:
    """Max (``kind = "max"``) or sum (``"sum"``) pooling of `xv` into `yv`.

    Args:
        win: ``(kh, kw, sh, sw, dh, dw, pt, pl, pb, pr)``.
        stores: One requantization for the whole output, or rectangles
            ``(y0, y1, x0, x1, StoreQ)`` covering it (average pooling: one per divisor).
    """
    kh, kw, sh, sw, dh, dw, pt, pl, _pb, _pr = win
    h, w = xv.rows, xv.cols
    ho, wo = yv.rows, yv.cols
    prr = _right_pad(w, wo, kw, sw, dw, pl)
    pw = pl + w + prr
    th = pool_tile_rows(em, xv, ho, wo, win)
    func = isa.VecFunc.MAX if kind == "max" else isa.VecFunc.ADD
    for y0 in range(0, ho, th):
        y1 = min(ho, y0 + th)
        p_lo, p_hi = y0 * sh, (y1 - 1) * sh + (kh - 1) * dh  # padded rows
        r_lo, r_hi = max(0, p_lo - pt), min(h - 1, p_hi - pt)
        pads = (max(0, pt - p_lo), max(0, p_hi - pt - (h - 1)), pl, prr)
        ph = p_hi - p_lo + 1
        nz = max(1, min(xv.planes, em.half("INP") // (ph * pw), em.half("ACC") // (th * wo)))
        for z0 in range(0, xv.planes, nz):
            tz = min(nz, xv.planes - z0)
            ibase = em.slot("INP")
            em.load_view(ibase, xv, z0, tz, r_lo, r_hi - r_lo + 1, pads, kind == "max")
            abase = em.slot("ACC")
            for zl in range(tz):
                dst = abase + zl * th * wo
                for i in range(kh):
                    for j in range(kw):
                        a = ibase + zl * ph * pw + i * dh * pw + j * dw
                        loops = [(wo, 1, sw, 1), (y1 - y0, wo, sh * pw, wo)]
                        if i == 0 and j == 0:
                            em.vec(isa.VecFunc.MOV, dst, a, loops)
                        else:
                            em.vec(func, dst, a, loops, b=dst, b_acc=True)
            rects = [(0, ho, 0, wo, stores)] if isinstance(stores, StoreQ) else stores
            for ra, rb, ca, cb, q in rects:
                ya, yb = max(ra, y0), min(rb, y1)
                if yb <= ya:
                    continue
                em.store(
                    yv, z0, ya, ca, cb - ca, yb - ya, tz,
                    abase + (ya - y0) * wo + ca, 1, wo, th * wo, q.m, q.s, q.lo, q.hi,
                )  # fmt: skip


def emit_gap(em: Emitter, xv: View, yv: View, q: StoreQ) -> None:
    """Global sum pooling per plane (VEC MOV + ADD chains), then one STORE per plane chunk."""
    h, w = xv.rows, xv.cols
    rows_fit = max(1, em.half("INP") // w)
    nz = max(1, min(xv.planes, em.half("INP") // (min(h, rows_fit) * w), em.half("ACC")))
    for z0 in range(0, xv.planes, nz):
        tz = min(nz, xv.planes - z0)
        abase = em.slot("ACC")
        th = max(1, min(h, em.half("INP") // (tz * w)))
        for y0 in range(0, h, th):
            ty = min(th, h - y0)
            p = ty * w
            ibase = em.slot("INP")
            em.load_view(ibase, xv, z0, tz, y0, ty)
            for zl in range(tz):
                dst = abase + zl
                src = ibase + zl * p
                done = 0
                if y0 == 0:
                    em.vec(isa.VecFunc.MOV, dst, src, [(1, 0, 0, 0)])
                    done = 1
                while done < p:
                    left = p - done
                    n0 = min(left, MAX_COUNT)
                    n1 = min(left // n0, MAX_COUNT)
                    em.vec(
                        isa.VecFunc.ADD, dst, src + done,
                        [(n0, 0, 1, 0), (n1, 0, n0, 0)], b=dst, b_acc=True,
                    )  # fmt: skip
                    done += n0 * n1
        em.store(yv, z0, 0, 0, 1, 1, tz, abase, 1, 1, 1, q.m, q.s, q.lo, q.hi)


def emit_pad(
    em: Emitter, xv: View, yv: View, pads: tuple[int, int, int, int], pad_min: bool
) -> None:
    """Spatial constant padding (value 0 or -128): padded LOADs, VEC MOV, STORE.

    A tile of output rows lying wholly in the padding copies one padding row the LOAD
    inserted above a single real pixel.
    """
    pt, pl, _pb, pr = pads
    h = xv.rows
    ho, wo = yv.rows, yv.cols
    th = max(1, min(ho, MAX_COUNT // wo, em.half("ACC") // wo, em.half("INP") // wo))
    nz = max(1, min(yv.planes, em.half("INP") // (th * wo), em.half("ACC") // (th * wo)))
    for y0 in range(0, ho, th):
        y1 = min(ho, y0 + th)
        r_lo, r_hi = max(0, y0 - pt), min(h - 1, y1 - 1 - pt)
        top, bottom = max(0, pt - y0), max(0, (y1 - 1 - pt) - (h - 1))
        for z0 in range(0, yv.planes, nz):
            tz = min(nz, yv.planes - z0)
            p = (y1 - y0) * wo
            ibase = em.slot("INP")
            abase = em.slot("ACC")
            if r_hi < r_lo:  # all padding
                em.load_view(ibase, xv, z0, tz, 0, 1, (1, 0, 0, 0), pad_min, nx=1)
                em.vec(isa.VecFunc.MOV, abase, ibase, [(p, 1, 0, 0), (tz, p, 2, 0)])
            else:
                pads_ = (top, bottom, pl, pr)
                em.load_view(ibase, xv, z0, tz, r_lo, r_hi - r_lo + 1, pads_, pad_min)
                em.vec(isa.VecFunc.MOV, abase, ibase, [(p, 1, 1, 0), (tz, p, p, 0)])
            em.store(yv, z0, y0, 0, wo, y1 - y0, tz, abase, 1, wo, p)


def emit_resize(em: Emitter, xv: View, yv: View, iy: np.ndarray, ix: np.ndarray) -> None:
    """Nearest resize: per source row, VEC MOVs spread columns, STOREs repeat rows."""
    w, wo = xv.cols, yv.cols
    runs: list[tuple[int, int, int]] = []  # (first output col, length, source col)
    for x, src in enumerate(ix.tolist()):
        if runs and runs[-1][2] == src and runs[-1][0] + runs[-1][1] == x:
            runs[-1] = (runs[-1][0], runs[-1][1] + 1, src)
        else:
            runs.append((x, 1, src))
    f = runs[0][1]
    uniform = all(r[1] == f and r[2] == k and r[0] == k * f for k, r in enumerate(runs))
    uniform = uniform and len(runs) == w
    nz = max(1, min(yv.planes, em.half("INP") // w, em.half("ACC") // wo))
    groups: list[tuple[int, int, int]] = []  # (first output row, count, source row)
    for y, src in enumerate(iy.tolist()):
        if groups and groups[-1][2] == src and groups[-1][0] + groups[-1][1] == y:
            groups[-1] = (groups[-1][0], groups[-1][1] + 1, src)
        else:
            groups.append((y, 1, src))
    for z0 in range(0, yv.planes, nz):
        tz = min(nz, yv.planes - z0)
        for ya, count, src in groups:
            ibase = em.slot("INP")
            em.load_view(ibase, xv, z0, tz, src, 1)
            abase = em.slot("ACC")
            for zl in range(tz):
                if uniform:
                    em.vec(
                        isa.VecFunc.MOV, abase + zl * wo, ibase + zl * w,
                        [(f, 1, 0, 0), (w, f, 1, 0)],
                    )  # fmt: skip
                    continue
                for x0, n, sx in runs:
                    em.vec(
                        isa.VecFunc.MOV, abase + zl * wo + x0, ibase + zl * w + sx, [(n, 1, 0, 0)]
                    )
            for c0 in range(0, count, MAX_COUNT):
                em.store(yv, z0, ya + c0, 0, wo, min(MAX_COUNT, count - c0), tz, abase, 1, 0, wo)
