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

from xrt.dtypes import TensorType
from xrt.errors import ErrorCode
from xrt.ops._common import check_nonneg, check_positive, fail, need_float, need_rank
from xrt.ops._registry import AttrSpec, OpDef, OpLike, register_op
from xrt.ops.convtranspose import convtranspose_out_size

__all__ = ["convtranspose3d_forward"]


def _infer(op: OpLike, ins: list[TensorType], params: Mapping[str, np.ndarray]) -> list[TensorType]:
    a = op.attrs
    x = ins[0]
    need_float(op, x)
    need_rank(op, x, 5)
    w = params["weight"]
    if w.dtype.kind != "f" or w.ndim != 5:
        raise fail(
            op,
            f"weight must be float of rank 5, got {w.dtype} {list(w.shape)}",
            ErrorCode.WRONG_TYPE,
        )
    check_positive(op, "strides", a["strides"])
    check_positive(op, "dilations", a["dilations"])
    check_nonneg(op, "pads", a["pads"])
    check_nonneg(op, "output_padding", a["output_padding"])
    g = a["groups"]
    c = x.shape[1]
    if g <= 0 or c % g or w.shape[0] != c:
        raise fail(op, f"weight {list(w.shape)} and groups {g} do not fit {c} input channels")
    co = w.shape[1] * g
    bias = params.get("bias")
    if bias is not None and bias.shape != (co,):
        raise fail(op, f"bias must have shape [{co}], got {list(bias.shape)}")
    p = a["pads"]
    out = [
        convtranspose_out_size(
            n,
            w.shape[2 + i],
            a["strides"][i],
            p[i],
            p[i + 3],
            a["dilations"][i],
            a["output_padding"][i],
        )
        for i, n in enumerate(x.shape[2:])
    ]
    if min(out) <= 0:
        raise fail(op, f"pads {p} leave no output ({out})")
    return [TensorType(x.dtype, (x.shape[0], co, *out), x.layout)]


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
        infer=_infer,
        forward=convtranspose3d_forward,
        fed_roles=("weight", "bias"),
        doc="3-D transposed convolution on the host (NCDHW, weight (C_in, C_out/g, kd, kh, kw))",
    )
)
