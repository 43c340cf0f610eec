"""Volumetric transposed convolution on the host: ``ConvTranspose3d`` over NCDHW tensors
(ONNX ConvTranspose on 5-D inputs; the NPU and `xrt.ops.convtranspose` are 2-D).

Weight ``(C_in, C_out / groups, kd, kh, kw)`` as in ONNX, optional bias. The same scheme as
``ConvTranspose2d``: one matmul per group to kernel-tap columns (float64), then one strided
scatter-add per tap, then the pads cropped.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from math import prod

import numpy as np

from xrt.ops._registry import AttrSpec, OpDef, OpLike, register_op
from xrt.ops.convtranspose import convtranspose_infer

__all__ = ["convtranspose3d_forward"]


def convtranspose3d_forward(
    op: OpLike, inputs: list[np.ndarray], params: Mapping[str, np.ndarray]
) -> list[np.ndarray]:
    """Transposed convolution: per-group matmul to kernel-tap columns, strided scatter-add."""
    a = op.attrs
    x = inputs[0]
    w = params["weight"]
    g = a["groups"]
    n, c, *sp = x.shape
    cig, cog, k = c // g, w.shape[1], w.shape[2:]
    s, d, p, extra = a["strides"], a["dilations"], a["pads"], a["output_padding"]
    xg = x.astype(np.float64).reshape(n, g, cig, prod(sp))
    wg = w.astype(np.float64).reshape(g, cig, cog * prod(k)).transpose(0, 2, 1)
    cols = np.matmul(wg[None], xg).reshape(n, g * cog, *k, *sp)
    full_size = [s[i] * (sp[i] - 1) + d[i] * (k[i] - 1) + 1 + extra[i] for i in range(3)]
    full = np.zeros((n, g * cog, *full_size))
    for tap in itertools.product(*(range(kk) for kk in k)):
        dst = tuple(
            slice(t * d[i], t * d[i] + s[i] * (sp[i] - 1) + 1, s[i]) for i, t in enumerate(tap)
        )
        full[(slice(None), slice(None), *dst)] += cols[(slice(None), slice(None), *tap)]
    crop = tuple(slice(p[i], full_size[i] - p[i + 3]) for i in range(3))
    out = full[(slice(None), slice(None), *crop)]
    if params.get("bias") is not None:
        out = out + params["bias"].astype(np.float64).reshape(1, -1, 1, 1, 1)
    return [np.ascontiguousarray(out).astype(x.dtype)]


register_op(
    OpDef(
        op_type="ConvTranspose3d",
        num_inputs=(1, 1),
        num_outputs=1,
        attrs={
            "strides": AttrSpec("ints", [1, 1, 1], 3),
            "pads": AttrSpec("ints", [0] * 6, 6, "cropped [d0, h0, w0, d1, h1, w1]"),
            "dilations": AttrSpec("ints", [1, 1, 1], 3),
            "groups": AttrSpec("int", 1),
            "output_padding": AttrSpec(
                "ints", [0, 0, 0], 3, "extra planes/rows/columns at the end"
            ),
        },
        params=("weight",),
        optional_params=("bias",),
        infer=convtranspose_infer(5),
        forward=convtranspose3d_forward,
        fed_roles=("weight", "bias"),
        doc="3-D transposed convolution on the host (NCDHW, weight (C_in, C_out/g, kd, kh, kw))",
    )
)
