"""Layer geometry: an operator's attributes and shapes as the numbers the tiler plans with.

`conv_geom` and `gemm_geom` give the `ConvGeom` of a convolution or a dense layer (a 1 x N
convolution), `pool_window` the window of a pooling operator. Both legalize (`refusal`
must know whether a layer tiles at all) and the compiler driver (which then tiles and
emits it) read them, so they sit here, beside the tiler, rather than in either pass.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from xrt.dtypes import TensorType
from xrt.hw.config import NpuConfig
from xrt.npu.compiler._pack import block_spans
from xrt.npu.compiler._tiler import ConvGeom

if TYPE_CHECKING:
    from xrt.network import Operator

__all__ = ["conv_geom", "gemm_geom", "pool_window"]


def conv_geom(
    op: Operator, x: TensorType, params: Mapping[str, np.ndarray], cfg: NpuConfig
) -> ConvGeom:
    """The `ConvGeom` of a QConv2d image."""
    a = op.attrs
    w = params["weight"]
    _, c, h, wd = x.shape
    o, cig, kh, kw = w.shape
    sh, sw = a["strides"]
    dh, dw = a["dilations"]
    pt, pl, pb, pr = a["pads"]
    ho = (h + pt + pb - dh * (kh - 1) - 1) // sh + 1
    wo = (wd + pl + pr - dw * (kw - 1) - 1) // sw + 1
    _, ib_n = block_spans(o, cig, a["groups"], cfg.block)  # as conv_blocks packs them
    return ConvGeom(c, h, wd, o, ho, wo, kh, kw, sh, sw, dh, dw, pt, pl, ib_n, cig)


def gemm_geom(x: TensorType, params: Mapping[str, np.ndarray], cfg: NpuConfig) -> ConvGeom:
    """A QGemm ``(N, K) x (O, K)^T`` as a 1x1 convolution over a 1 x N image."""
    n, k = x.shape
    o = params["weight"].shape[0]
    zi = -(-k // cfg.block)
    zo = -(-o // cfg.block)
    return ConvGeom(k, 1, n, o, 1, n, 1, 1, 1, 1, 1, 1, 0, 0, (zi,) * zo, k)


def pool_window(a: Mapping[str, Any]) -> tuple[int, ...]:
    """``(kh, kw, sh, sw, dh, dw, pt, pl, pb, pr)`` of a pooling op's attributes."""
    kh, kw = a["kernel"]
    sh, sw = a["strides"]
    dh, dw = a["dilations"]
    pt, pl, pb, pr = a["pads"]
    return kh, kw, sh, sw, dh, dw, pt, pl, pb, pr
