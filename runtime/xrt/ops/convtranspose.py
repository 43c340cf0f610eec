"""``ConvTranspose2d``: the gradient of a convolution (deconvolution, learned upsampling).

NCHW input, weight ``(C_in, C_out / groups, kh, kw)`` as in ONNX, optional bias. Output
size per axis: ``stride * (in - 1) + output_padding + dilation * (k - 1) + 1 - pad_begin -
pad_end``. The kernel multiplies once per group (BLAS) and scatters each kernel tap's
contribution with one strided add: a loop over the kh * kw taps, none per element.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from xrt.dtypes import TensorType
from xrt.errors import ErrorCode
from xrt.ops._common import check_nonneg, check_positive, fail, need_float, need_rank
from xrt.ops._registry import AttrSpec, OpDef, OpLike, register_op

__all__ = ["convtranspose2d_forward", "convtranspose_out_size"]


def convtranspose_out_size(
    size: int, kernel: int, stride: int, pad_begin: int, pad_end: int, dilation: int, out_pad: int
) -> int:
    """Output length along one axis."""
    return stride * (size - 1) + out_pad + dilation * (kernel - 1) + 1 - pad_begin - pad_end


def convtranspose_infer(rank: int) -> Callable[..., list[TensorType]]:
    """The type inference of a transposed convolution over tensors of `rank` (4: 2-D,
    5: 3-D): checks the weight, groups, bias and attributes; output lengths per spatial axis
    by `convtranspose_out_size`."""

    def infer(
        op: OpLike, ins: list[TensorType], params: Mapping[str, np.ndarray]
    ) -> list[TensorType]:
        a = op.attrs
        x = ins[0]
        need_float(op, x)
        need_rank(op, x, rank)
        w = params["weight"]
        if w.dtype.kind != "f" or w.ndim != rank:
            raise fail(
                op,
                f"weight must be float of rank {rank}, got {w.dtype} {list(w.shape)}",
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
        p, axes = a["pads"], rank - 2
        out = [
            convtranspose_out_size(
                n,
                w.shape[2 + i],
                a["strides"][i],
                p[i],
                p[i + axes],
                a["dilations"][i],
                a["output_padding"][i],
            )
            for i, n in enumerate(x.shape[2:])
        ]
        if min(out) <= 0:
            raise fail(op, f"pads {list(p)} leave no output ({'x'.join(map(str, out))})")
        return [TensorType(x.dtype, (x.shape[0], co, *out), x.layout)]

    return infer


def convtranspose2d_forward(
    op: OpLike, inputs: list[np.ndarray], params: Mapping[str, np.ndarray]
) -> list[np.ndarray]:
    """Transposed convolution: per-group matmul to kernel-tap columns, strided scatter-add."""
    a = op.attrs
    x = inputs[0]
    w = params["weight"]
    g = a["groups"]
    n, c, h, wd = x.shape
    cig, cog, kh, kw = c // g, w.shape[1], w.shape[2], w.shape[3]
    sh, sw = a["strides"]
    dh, dw = a["dilations"]
    pt, pl, pb, pr = a["pads"]
    oph, opw = a["output_padding"]
    # cols[n, g, o, i, j, y, x] = sum_c x[n, g, c, y, x] * w[g, c, o, i, j]
    xg = x.astype(np.float32).reshape(n, g, cig, h * wd)
    wg = w.astype(np.float32).reshape(g, cig, cog * kh * kw).transpose(0, 2, 1)
    cols = np.matmul(wg[None], xg).reshape(n, g * cog, kh, kw, h, wd)
    full_h = sh * (h - 1) + dh * (kh - 1) + 1 + oph
    full_w = sw * (wd - 1) + dw * (kw - 1) + 1 + opw
    full = np.zeros((n, g * cog, full_h, full_w), np.float32)
    for i in range(kh):
        for j in range(kw):
            full[
                :,
                :,
                i * dh : i * dh + sh * (h - 1) + 1 : sh,
                j * dw : j * dw + sw * (wd - 1) + 1 : sw,
            ] += cols[:, :, i, j]
    ho = full_h - pt - pb
    wo = full_w - pl - pr
    out = full[:, :, pt : pt + ho, pl : pl + wo]
    if params.get("bias") is not None:
        out = out + params["bias"].astype(np.float32).reshape(1, -1, 1, 1)
    return [np.ascontiguousarray(out).astype(x.dtype, copy=False)]


register_op(
    OpDef(
        op_type="ConvTranspose2d",
        num_inputs=(1, 1),
        num_outputs=1,
        attrs={
            "strides": AttrSpec("ints", [1, 1], 2),
            "pads": AttrSpec("ints", [0, 0, 0, 0], 4, "cropped [top, left, bottom, right]"),
            "dilations": AttrSpec("ints", [1, 1], 2),
            "groups": AttrSpec("int", 1),
            "output_padding": AttrSpec("ints", [0, 0], 2, "extra rows/columns at the end"),
        },
        params=("weight",),
        optional_params=("bias",),
        infer=convtranspose_infer(4),
        forward=convtranspose2d_forward,
        fed_roles=("weight", "bias"),
        doc="2-D transposed convolution (NCHW, weight (C_in, C_out/g, kh, kw)), optional bias",
    )
)
