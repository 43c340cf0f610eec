"""Lowerings: the steps of one operator, one function per operator family.

Which function lowers which op type is said once, in the table of
`xrt.npu.compiler._op_table`, next to the op type's legality check. The driver
(`xrt.npu.compiler._compile.compile_run`) hands each function an `OpLowering`: the operator,
where its values are placed, the emitter and the tilings asked for; the function emits the
operator's steps and returns its `LayerReport` (what it chose, MACs, GEMM cycles). Every
function may assume the operator passed `refusal`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from xrt.hw import isa
from xrt.hw.config import NpuConfig
from xrt.network import Network, NetworkView, Operator
from xrt.npu.compiler import _vector as vx
from xrt.npu.compiler._conv import ConvConsts, emit_conv
from xrt.npu.compiler._emit import Emitter
from xrt.npu.compiler._geometry import conv_geom, gemm_geom, pool_window
from xrt.npu.compiler._layout import View, as_nchw, view_of
from xrt.npu.compiler._legalize import reshape_kind
from xrt.npu.compiler._movement import (
    channel_permutation,
    concat_blocks,
    emit_flatten,
    emit_select,
    flatten_blocks,
    selection,
)
from xrt.npu.compiler._pack import bias_rows, conv_blocks, lut_rows, prm_rows
from xrt.npu.compiler._program import LayerReport
from xrt.npu.compiler._stem_fold import StemFold, emit_stem_fold
from xrt.npu.compiler._tiler import ConvGeom, ConvPlan, PlanChoice, plan_conv
from xrt.ops.pool import pool_counts
from xrt.ops.resize import nearest_indices

__all__ = [
    "Lower",
    "OpLowering",
    "Placed",
    "Tiling",
    "lower_avg_pool",
    "lower_binary",
    "lower_clip",
    "lower_concat",
    "lower_conv",
    "lower_gemm",
    "lower_global_avg_pool",
    "lower_lut",
    "lower_max_pool",
    "lower_pad",
    "lower_relu",
    "lower_reshape",
    "lower_resize",
    "lower_transpose",
]


@dataclass
class Placed:
    """Where a value's channel-tiled bytes are: base register, offset, and its shape."""

    base: int
    offset: int
    shape: tuple[int, ...]

    def views(self, block: int, shape: tuple[int, ...] | None = None) -> list[View]:
        """One view per image (one for a rank-2 ``(N, K)`` tensor: its N rows are one row of
        pixels), read as `shape` (default: its own; a reshape reads its input's bytes)."""
        shape = shape or self.shape
        if len(shape) == 2:
            return [view_of(shape, self.base, self.offset, 0, block)]
        return [view_of(shape, self.base, self.offset, n, block) for n in range(shape[0])]


@dataclass
class Tiling:
    """The tilings one operator was asked to use (None: the tiler's), and where to note a
    refused one."""

    chosen: Sequence[PlanChoice] | None
    notes: list[str] | None
    used: bool = False  # the chosen tilings were legal and used

    def plans(self, op: Operator, geoms: Sequence[ConvGeom], cfg: NpuConfig) -> list[ConvPlan]:
        """One plan per geometry: the chosen ones when all are legal, else the defaults."""
        defaults = [plan_conv(g, cfg) for g in geoms]
        assert all(not isinstance(p, str) for p in defaults)
        if self.chosen is None:
            return defaults  # type: ignore[return-value]
        why = f"{len(self.chosen)} tilings for {len(geoms)} convolutions"
        if len(self.chosen) == len(geoms):
            picked = [plan_conv(g, cfg, c) for g, c in zip(geoms, self.chosen, strict=True)]
            bad = [p for p in picked if isinstance(p, str)]
            if not bad:
                self.used = True
                return picked  # type: ignore[return-value]
            why = str(bad[0])
        if self.notes is not None:
            self.notes.append(f"{op.describe()}: recorded tiling ignored: {why}")
        return defaults  # type: ignore[return-value]


@dataclass
class OpLowering:
    """One operator being lowered, and everything its lowering reads.

    Attributes:
        em: The program's emitter (steps and constant blob).
        op: The operator.
        graph: The run it belongs to (value types, parameters).
        placed: Where every value the operator touches is.
        cfg: Buffer sizes and block.
        tiling: The tilings asked for (tuning records) and where to note a refused one.
        fold: Its stem fold when it has one, planned once per compile (`plan_stem_fold`).
        folded: Where the memory planner put that fold's copy.
    """

    em: Emitter
    op: Operator
    graph: Network | NetworkView
    placed: Mapping[str, Placed]
    cfg: NpuConfig
    tiling: Tiling
    fold: StemFold | None = None
    folded: Placed | None = None

    @property
    def block(self) -> int:
        return self.cfg.block

    @property
    def attrs(self) -> Mapping[str, Any]:
        return self.op.attrs

    @cached_property
    def params(self) -> Mapping[str, np.ndarray]:
        return self.graph.op_params(self.op)

    def shape(self, value: str) -> tuple[int, ...]:
        """The shape of one of the network's values."""
        return self.graph.values[value].shape

    @property
    def x(self) -> Placed:
        """The first input."""
        return self.placed[self.op.inputs[0]]

    @property
    def y(self) -> Placed:
        """The output."""
        return self.placed[self.op.outputs[0]]

    def report(self, detail: str = "") -> LayerReport:
        return LayerReport(self.op.op_id, self.op.op_type, self.op.name, detail)


Lower = Callable[[OpLowering], LayerReport]
"""A lowering: emits one operator's steps and reports what it chose."""


def lower_conv(ctx: OpLowering) -> LayerReport:
    """QConv2d: column-folded when it is a stem that folds, else GEMMs per tile."""
    if ctx.fold is not None:
        return _folded_conv(ctx, ctx.fold)
    g = conv_geom(ctx.op, ctx.graph.values[ctx.op.inputs[0]], ctx.params, ctx.cfg)
    b = ctx.block
    return _gemm_layer(
        ctx, g, ctx.params["weight"], ctx.attrs["groups"], ctx.x.views(b), ctx.y.views(b)
    )


def lower_gemm(ctx: OpLowering) -> LayerReport:
    """QGemm: a 1 x N convolution (the batch is the width)."""
    op, b = ctx.op, ctx.block
    g = gemm_geom(ctx.graph.values[op.inputs[0]], ctx.params, ctx.cfg)
    weight = ctx.params["weight"][:, :, None, None]
    xs = ctx.x.views(b, ctx.shape(op.inputs[0]))
    ys = ctx.y.views(b, ctx.shape(op.outputs[0]))
    return _gemm_layer(ctx, g, weight, 1, xs, ys)


def _gemm_layer(
    ctx: OpLowering, g: ConvGeom, weight: np.ndarray, groups: int, xs: list[View], ys: list[View]
) -> LayerReport:
    """A convolution over `xs` into `ys` (a dense layer is one): packed weights, bias and
    PRM rows into the blob, the tiling asked for or the tiler's, GEMMs per tile."""
    em, b, params = ctx.em, ctx.block, ctx.params
    rep = ctx.report()
    (plan,) = ctx.tiling.plans(ctx.op, [g], ctx.cfg)
    pk = conv_blocks(weight, groups, b)
    consts = ConvConsts(
        pk,
        em.const(pk.blocks),
        em.const(bias_rows(params["bias"], b)),
        em.const(prm_rows(params["multiplier"], params["shift"], b)),
    )
    rep.gemm_cycles = emit_conv(em, xs, ys, g, plan, consts, ctx.attrs["lo"], ctx.attrs["hi"])
    rep.detail = str(plan)
    rep.macs = g.o * g.ho * g.wo * g.kh * g.kw * g.c_per_group * len(xs)
    return rep


def _folded_conv(ctx: OpLowering, fold: StemFold) -> LayerReport:
    """A stem: the fold into the planner's copy, then the kh x 1 convolution over it."""
    assert ctx.folded is not None, "the memory planner placed no folded copy"
    b, a = ctx.block, ctx.attrs
    rep = ctx.report()
    p1, p2 = ctx.tiling.plans(ctx.op, fold.geoms, ctx.cfg)
    views = (ctx.x.views(b), ctx.folded.views(b), ctx.y.views(b))
    rep.gemm_cycles = emit_stem_fold(ctx.em, fold, views, (p1, p2), ctx.params, (a["lo"], a["hi"]))
    rep.detail = f"columns folded into {fold.folded_shape[1]} channels; fold: {p1}; conv: {p2}"
    _, c, kh, kw = ctx.params["weight"].shape
    g = fold.op_geom
    rep.macs = g.o * g.ho * g.wo * kh * kw * c * ctx.shape(ctx.op.inputs[0])[0]
    return rep


def lower_binary(ctx: OpLowering) -> LayerReport:
    """QAdd, QMul: VEC QADD or MUL per image; a ``(N, C, 1, 1)`` operand broadcasts."""
    op, a, b, t = ctx.op, ctx.attrs, ctx.block, ctx.op.op_type
    sa, sb = ctx.shape(op.inputs[0]), ctx.shape(op.inputs[1])
    pa, pb = ctx.placed[op.inputs[0]], ctx.placed[op.inputs[1]]
    ma, mb = (a["mult_a"], a["mult_b"]) if t == "QAdd" else (0, 0)
    if sa != ctx.shape(op.outputs[0]):  # the broadcast operand goes second
        pa, pb, sa, sb, ma, mb = pb, pa, sb, sa, mb, ma
    bcast = sa != sb
    bv = pb.views(b)
    func = isa.VecFunc.QADD if t == "QAdd" else isa.VecFunc.MUL
    q = vx.StoreQ(1 if t == "QAdd" else a["multiplier"], a["shift"], a["lo"], a["hi"])
    for n, (av_n, yv_n) in enumerate(zip(pa.views(b), ctx.y.views(b), strict=True)):
        bv_n = bv[n if len(bv) > 1 else 0]
        vx.emit_pointwise(ctx.em, func, av_n, yv_n, q, bv_n, bcast, ma, mb)
    return ctx.report(f"{'broadcast ' if bcast else ''}{t} via VEC {func.name}")


def lower_reshape(ctx: OpLowering) -> LayerReport:
    """Reshape, Flatten, Identity. A relabelling one compiles to nothing (the driver aliases
    it) unless its bytes must be at a base register of their own (a program output): then a
    copy. ``(N, C, H, W) -> (N, C*H*W)`` moves features across lanes."""
    op = ctx.op
    if reshape_kind(ctx.shape(op.inputs[0]), ctx.shape(op.outputs[0])) != "flatten":
        return _pointwise_layer(ctx, isa.VecFunc.MOV, vx.StoreQ())
    rep = ctx.report("features moved across lanes by single-entry selection GEMMs")
    b = ctx.block
    wgt = ctx.em.const(flatten_blocks(b))
    yv = ctx.y.views(b)[0]
    for n, xv in enumerate(ctx.x.views(b, ctx.shape(op.inputs[0]))):
        rep.gemm_cycles += emit_flatten(ctx.em, xv, yv, n, wgt)
    return rep


def lower_clip(ctx: OpLowering) -> LayerReport:
    """QClip: a copy whose STORE clamps."""
    return _pointwise_layer(ctx, isa.VecFunc.MOV, vx.StoreQ(lo=ctx.attrs["lo"], hi=ctx.attrs["hi"]))


def lower_relu(ctx: OpLowering) -> LayerReport:
    """Relu: a copy whose STORE clamps at 0."""
    return _pointwise_layer(ctx, isa.VecFunc.MOV, vx.StoreQ(lo=0))


def lower_lut(ctx: OpLowering) -> LayerReport:
    """QLut: the 256-entry table into a LUT slot, then VEC LUT."""
    b, em = ctx.block, ctx.em
    table = em.slot_lut()
    em.load_run(
        isa.Buffer.LUT, table * (256 // b), em.const(lut_rows(ctx.params["table"], b)), 256 // b
    )
    return _pointwise_layer(ctx, isa.VecFunc.LUT, vx.StoreQ(), table)


def _pointwise_layer(
    ctx: OpLowering, func: isa.VecFunc, q: vx.StoreQ, table: int = 0
) -> LayerReport:
    """VEC `func` then STORE with `q`, image by image; input and output both read in the
    input's shape (a copying reshape keeps the bytes' layout)."""
    b = ctx.block
    shape = ctx.shape(ctx.op.inputs[0])
    for xv, yv in zip(ctx.x.views(b, shape), ctx.y.views(b, shape), strict=True):
        vx.emit_pointwise(ctx.em, func, xv, yv, q, table=table)
    return ctx.report(f"VEC {func.name} + STORE clamp [{q.lo}, {q.hi}]")


def lower_max_pool(ctx: OpLowering) -> LayerReport:
    """MaxPool2d: padded LOADs (-128), VEC MOV then MAX per plane and tap."""
    return _pool_layer(ctx, "max", vx.StoreQ())


def lower_avg_pool(ctx: OpLowering) -> LayerReport:
    """QAvgPool2d: VEC sums, one STORE per rectangle of equal divisor."""
    _, _, h, w = ctx.shape(ctx.op.inputs[0])
    return _pool_layer(ctx, "sum", _avg_rects(ctx.attrs, h, w))


def _pool_layer(ctx: OpLowering, mode: str, stores: Any) -> LayerReport:
    """`stores`: one `StoreQ`, or per rectangle of equal divisor (`_avg_rects`)."""
    win = pool_window(ctx.attrs)
    b = ctx.block
    for xv, yv in zip(ctx.x.views(b), ctx.y.views(b), strict=True):
        vx.emit_pool(ctx.em, xv, yv, win, mode, stores)
    regions = f", {len(stores)} divisor regions" if isinstance(stores, list) else ""
    return ctx.report(f"window {win[:2]} stride {win[2:4]}: VEC per plane and tap" + regions)


def lower_global_avg_pool(ctx: OpLowering) -> LayerReport:
    """QGlobalAvgPool: VEC MOV + ADD chains per plane, one STORE ``(M, S)``."""
    a, b = ctx.attrs, ctx.block
    q = vx.StoreQ(a["multiplier"], a["shift"], a["lo"], a["hi"])
    yvs = ctx.y.views(b, ctx.shape(ctx.op.outputs[0]))
    for xv, yv in zip(ctx.x.views(b), yvs, strict=True):
        vx.emit_gap(ctx.em, xv, yv, q)
    return ctx.report("VEC ADD chains per plane")


def lower_concat(ctx: OpLowering) -> LayerReport:
    """Concat, QConcat: selection GEMMs move each input's lanes to its output lanes;
    QConcat's per-input ``(M_i, S_i)`` become per-lane PRM rows when they differ."""
    op, a, b, em = ctx.op, ctx.attrs, ctx.block, ctx.em
    shapes = [ctx.shape(v) for v in op.inputs]
    chans = [as_nchw(s)[1] for s in shapes]
    blocks, plan = concat_blocks(chans, b)
    wgt = em.const(blocks)
    prm = None
    q = vx.StoreQ()
    if op.op_type == "QConcat":
        ms, ss = a["multipliers"], a["shifts"]
        q = vx.StoreQ(lo=a["lo"], hi=a["hi"])
        if len(set(zip(ms, ss, strict=True))) == 1:
            q = vx.StoreQ(ms[0], ss[0], a["lo"], a["hi"])
        else:
            m_lane = np.concatenate([np.full(c, m) for c, m in zip(chans, ms, strict=True)])
            s_lane = np.concatenate([np.full(c, s) for c, s in zip(chans, ss, strict=True)])
            prm = em.const(prm_rows(m_lane, s_lane, b))
    per_input = [ctx.placed[v].views(b, s) for v, s in zip(op.inputs, shapes, strict=True)]
    for n, yv in enumerate(ctx.y.views(b)):
        emit_select(
            em, [v[n] for v in per_input], yv, wgt, len(blocks), plan, q.m, q.s, q.lo, q.hi, prm
        )
    return ctx.report(f"selection GEMMs, {len(blocks)} blocks")


def lower_pad(ctx: OpLowering) -> LayerReport:
    """Pad: padded LOADs (0 or -128), VEC MOV, STORE."""
    p = ctx.attrs["pads"]
    pads = (p[2], p[3], p[6], p[7])
    b = ctx.block
    for xv, yv in zip(ctx.x.views(b), ctx.y.views(b), strict=True):
        vx.emit_pad(ctx.em, xv, yv, pads, int(ctx.attrs["value"]) == -128)
    return ctx.report(f"padded LOADs {pads}")


def lower_resize(ctx: OpLowering) -> LayerReport:
    """Resize (nearest): VEC MOV spreads columns, STOREs with a zero row stride repeat rows."""
    a, b = ctx.attrs, ctx.block
    _, _, h, w = ctx.shape(ctx.op.inputs[0])
    _, _, ho, wo = ctx.shape(ctx.op.outputs[0])
    cm, nm = a["coordinate_transformation_mode"], a["nearest_mode"]
    sy, sx = a["scales"][2], a["scales"][3]
    iy = nearest_indices(h, ho, sy, cm, nm) if (ho, sy) != (h, 1.0) else np.arange(h)
    ix = nearest_indices(w, wo, sx, cm, nm) if (wo, sx) != (w, 1.0) else np.arange(w)
    for xv, yv in zip(ctx.x.views(b), ctx.y.views(b), strict=True):
        vx.emit_resize(ctx.em, xv, yv, iy, ix)
    return ctx.report("nearest: VEC MOV spreads columns, STOREs repeat rows")


def lower_transpose(ctx: OpLowering) -> LayerReport:
    """Transpose: H <-> W through LOAD strides, or a permutation of the channel axes (a
    channel shuffle) through selection GEMMs."""
    op, b = ctx.op, ctx.block
    perm = list(ctx.attrs["perm"])
    shape = ctx.shape(op.inputs[0])
    if perm == [0, 1, 3, 2]:
        for xv, yv in zip(ctx.x.views(b, shape), ctx.y.views(b), strict=True):
            tv = View(xv.base, xv.offset, xv.planes, xv.cols, xv.rows, xv.channels,
                      xv.z_stride, xv.x_stride, xv.y_stride, xv.pixel)  # fmt: skip
            vx.emit_pointwise(ctx.em, isa.VecFunc.MOV, tv, yv, vx.StoreQ())
        return ctx.report("H <-> W through LOAD strides")
    src = channel_permutation(shape, perm)
    assert src is not None
    blocks, plan = selection([(0, c) for c in src], b)
    wgt = ctx.em.const(blocks)
    yvs = ctx.y.views(b, ctx.shape(op.outputs[0]))
    for xv, yv in zip(ctx.x.views(b, shape), yvs, strict=True):
        emit_select(ctx.em, [xv], yv, wgt, len(blocks), plan, 1, 0, -128, 127, None)
    return ctx.report(f"channel permutation: selection GEMMs, {len(blocks)} blocks")


def _avg_rects(a: Mapping[str, Any], h: int, w: int) -> list[tuple[int, int, int, int, vx.StoreQ]]:
    """Rectangles of equal divisor of an average pool, each with its (M_k, S_k)."""
    counts = pool_counts(a, h, w)
    table = {int(k): (m, s) for k, m, s in a["requant"]}

    def runs(vals: np.ndarray) -> list[tuple[int, int]]:
        out: list[tuple[int, int]] = []
        start = 0
        for i in range(1, len(vals) + 1):
            if i == len(vals) or vals[i] != vals[start]:
                out.append((start, i))
                start = i
        return out

    # The divisor is separable (rows x columns): equal runs of each give the rectangles.
    row_runs = runs(_row_keys(counts))
    col_runs = runs(_row_keys(counts.T))
    rects = []
    for ya, yb in row_runs:
        for xa, xb in col_runs:
            m, s = table[int(counts[ya, xa])]
            rects.append((ya, yb, xa, xb, vx.StoreQ(m, s, a["lo"], a["hi"])))
    return rects


def _row_keys(counts: np.ndarray) -> np.ndarray:
    """One integer per row identifying its contents (rows equal <=> keys equal)."""
    _, keys = np.unique(counts, axis=0, return_inverse=True)
    return keys.reshape(-1)
