"""Column-folded stems: a convolution over few channels with its kw taps folded into lanes.

With C <= B/2 channels (a network's stem) most of the array's B input lanes would carry
zeros. Instead a first convolution with 0/1 weights (kernel 1 x kw, the op's column stride,
padding and dilation) copies the columns each output column reads into ``C*kw`` channels,
``X'[j*C + c](y, x) = X[c](y, x*sw - pl + j*dw)``, exactly (M = 1, S = 0), into a scratch
copy that the memory planner places; the op then runs as a kh x 1 convolution over X' with
the same sums, bias and requantization (NVDLA's image mode, done on the engine).

`plan_stem_fold` decides once per operator and compile whether the fold applies; the memory
planner (the copy's shape), the tuner (`tiled_geoms`: two tilings) and the lowering read
that one decision.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from xrt.dtypes import TensorType
from xrt.hw.config import NpuConfig
from xrt.network import Operator
from xrt.npu.compiler._conv import ConvConsts, emit_conv
from xrt.npu.compiler._emit import Emitter
from xrt.npu.compiler._geometry import conv_geom
from xrt.npu.compiler._layout import View
from xrt.npu.compiler._pack import PackedConv, bias_rows, conv_blocks, prm_rows
from xrt.npu.compiler._tiler import ConvGeom, ConvPlan, plan_conv

__all__ = ["StemFold", "emit_stem_fold", "folded_copy_name", "plan_stem_fold"]


@dataclass(frozen=True)
class StemFold:
    """The two convolutions of a column-folded stem, in emission order: the fold (0/1
    weights, kernel 1 x kw) and the kh x 1 convolution over its result.

    Attributes:
        geoms: The tiler's geometry of each (a tuning record holds one tiling per geometry).
        packed: The weight blocks of each.
        folded_shape: ``(N, C*kw, H, Wo)``: the copy the fold writes and the convolution reads.
        op_geom: The operator's own geometry, unfolded (its useful MACs).
    """

    geoms: tuple[ConvGeom, ConvGeom]
    packed: tuple[PackedConv, PackedConv]
    folded_shape: tuple[int, int, int, int]
    op_geom: ConvGeom


def folded_copy_name(value: str) -> str:
    """The name of the column-folded copy a stem convolution producing `value` reads."""
    return value + "#fold"


def plan_stem_fold(
    op: Operator, xt: TensorType, params: Mapping[str, np.ndarray], cfg: NpuConfig
) -> StemFold | None:
    """The folded form of a convolution over few channels, or None when it does not qualify
    (not a QConv2d, grouped, kw = 1, more than B/2 channels, or a step does not tile)."""
    if op.op_type != "QConv2d":
        return None
    a = op.attrs
    w = params["weight"]
    o, c, kh, kw = w.shape
    b = cfg.block
    n, _, h, wd = xt.shape
    if a["groups"] != 1 or kw < 2 or 2 * c > b:
        return None
    sh, sw = a["strides"]
    dh, dw = a["dilations"]
    pt, pl = a["pads"][:2]
    g = conv_geom(op, xt, params, cfg)
    cf = c * kw
    w1 = np.zeros((cf, c, 1, kw), np.int8)
    for j in range(kw):
        w1[j * c + np.arange(c), np.arange(c), 0, j] = 1
    w2 = w.transpose(0, 3, 1, 2).reshape(o, cf, kh, 1)  # [o, j*C + c, i, 0] = W[o, c, i, j]
    pk1, pk2 = conv_blocks(w1, 1, b), conv_blocks(w2, 1, b)
    g1 = ConvGeom(c, h, wd, cf, h, g.wo, 1, kw, 1, sw, 1, dw, 0, pl, pk1.ib_n, c)
    g2 = ConvGeom(cf, h, g.wo, o, g.ho, g.wo, kh, 1, sh, 1, dh, 1, pt, 0, pk2.ib_n, cf)
    if isinstance(plan_conv(g1, cfg), str) or isinstance(plan_conv(g2, cfg), str):
        return None
    return StemFold((g1, g2), (pk1, pk2), (n, cf, h, g.wo), g)


def emit_stem_fold(
    em: Emitter,
    fold: StemFold,
    views: tuple[list[View], list[View], list[View]],
    plans: Sequence[ConvPlan],
    params: Mapping[str, np.ndarray],
    clamp: tuple[int, int],
) -> int:
    """Emit the fold into the copy, then the kh x 1 convolution; returns their GEMM cycles.

    Args:
        views: The input's, the folded copy's and the output's views, one per image.
        plans: One tiling per geometry of `fold`.
        clamp: The op's output bounds ``(lo, hi)``.
    """
    xs, mids, ys = views
    p1, p2 = plans
    pk1, pk2 = fold.packed
    b = em.cfg.block
    cf = fold.folded_shape[1]
    one = np.ones(cf, np.int32)
    k1 = ConvConsts(
        pk1,
        em.const(pk1.blocks),
        em.const(bias_rows(np.zeros(cf, np.int32), b)),
        em.const(prm_rows(one, 0 * one, b)),
    )
    k2 = ConvConsts(
        pk2,
        em.const(pk2.blocks),
        em.const(bias_rows(params["bias"], b)),
        em.const(prm_rows(params["multiplier"], params["shift"], b)),
    )
    cycles = emit_conv(em, xs, mids, fold.geoms[0], p1, k1, -128, 127)
    return cycles + emit_conv(em, mids, ys, fold.geoms[1], p2, k2, *clamp)
