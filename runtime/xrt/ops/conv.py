"""Convolution: ``Conv2d`` (float) and ``QConv2d`` (int8, integer-only).

Both take NCHW input, an OIHW weight (``(C_out, C_in / groups, kh, kw)``) and an optional
bias, with ONNX's stride / padding / dilation / group semantics. Pads are
``[top, left, bottom, right]``.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from xrt.dtypes import DataType, TensorType
from xrt.errors import ErrorCode
from xrt.ops import intmath
from xrt.ops._common import check_nonneg, check_positive, fail, need_dtype, need_float, need_rank
from xrt.ops._qcommon import SAT_ATTRS, check_requant_params, check_sat, int_accumulate
from xrt.ops._registry import AttrSpec, OpDef, OpLike, register_op
from xrt.ops._window import conv_core, out_hw, windows

__all__ = ["QCONV2D_KERNELS", "conv2d_forward", "qconv2d_forward", "qconv2d_forward_per_tap"]

CONV_ATTRS: dict[str, AttrSpec] = {
    "strides": AttrSpec("ints", [1, 1], 2, "step of the window along H and W"),
    "pads": AttrSpec("ints", [0, 0, 0, 0], 4, "zero padding [top, left, bottom, right]"),
    "dilations": AttrSpec("ints", [1, 1], 2, "spacing of the kernel taps along H and W"),
    "groups": AttrSpec("int", 1, None, "number of channel groups (C_in for depthwise)"),
}


def _check_conv(op: OpLike, x: TensorType, weight: np.ndarray) -> TensorType:
    a = op.attrs
    need_rank(op, x, 4)
    if weight.ndim != 4:
        raise fail(op, f"weight must have rank 4 (OIHW), got shape {list(weight.shape)}")
    check_positive(op, "strides", a["strides"])
    check_positive(op, "dilations", a["dilations"])
    check_nonneg(op, "pads", a["pads"])
    groups = a["groups"]
    n, c, h, w = x.shape
    co, cig, kh, kw = weight.shape
    if groups <= 0 or c % groups or co % groups:
        raise fail(op, f"groups={groups} must divide C_in={c} and C_out={co}")
    if cig * groups != c:
        raise fail(op, f"weight expects {cig * groups} input channels, input has {c}")
    if min(kh, kw, co) <= 0:
        raise fail(op, f"weight shape {list(weight.shape)} has an empty dimension")
    ho, wo = out_hw(h, w, (kh, kw), a["strides"], a["pads"], a["dilations"])
    if ho <= 0 or wo <= 0:
        raise fail(op, f"kernel {kh}x{kw} does not fit the padded input {h}x{w}")
    return TensorType(x.dtype, (n, co, ho, wo), x.layout)


def _infer_conv(
    op: OpLike, ins: list[TensorType], params: Mapping[str, np.ndarray]
) -> list[TensorType]:
    need_float(op, ins[0])
    weight = params["weight"]
    if weight.dtype.kind != "f":
        raise fail(op, f"weight must be float, got {weight.dtype}", ErrorCode.WRONG_TYPE)
    out = _check_conv(op, ins[0], weight)
    bias = params.get("bias")
    if bias is not None and bias.shape != (weight.shape[0],):
        raise fail(op, f"bias must have shape [{weight.shape[0]}], got {list(bias.shape)}")
    return [out]


def conv2d_forward(
    op: OpLike, inputs: list[np.ndarray], params: Mapping[str, np.ndarray]
) -> list[np.ndarray]:
    """Float ``Conv2d``: im2col + matmul in float32 (depthwise: a loop over kernel taps)."""
    a = op.attrs
    x = inputs[0]
    out = conv_core(x, params["weight"], a["strides"], a["pads"], a["dilations"], a["groups"])
    bias = params.get("bias")
    if bias is not None:
        out += bias.astype(np.float32).reshape(1, -1, 1, 1)
    return [out.astype(x.dtype, copy=False)]


def _infer_qconv(
    op: OpLike, ins: list[TensorType], params: Mapping[str, np.ndarray]
) -> list[TensorType]:
    need_dtype(op, ins[0], DataType.SINT8)
    weight = params["weight"]
    if weight.dtype != np.int8:
        raise fail(op, f"weight must be int8, got {weight.dtype}", ErrorCode.WRONG_TYPE)
    out = _check_conv(op, ins[0], weight)
    co = weight.shape[0]
    bias = params["bias"]
    if bias.dtype != np.int32 or bias.shape != (co,):
        raise fail(op, f"bias must be int32 of shape [{co}], got {bias.dtype} {list(bias.shape)}")
    check_requant_params(op, params, co)
    return [TensorType(DataType.SINT8, out.shape, out.layout, check_sat(op))]


def qconv2d_forward(
    op: OpLike, inputs: list[np.ndarray], params: Mapping[str, np.ndarray]
) -> list[np.ndarray]:
    """``QConv2d``: int8 x int8 -> int32 accumulators (+ int32 bias) -> per-channel requantize.

    ``acc[n,o,y,x] = bias[o] + sum_{c,i,j} x[n, g*C_ig + c, y*sh - pt + i*dh, x*sw - pl + j*dw]
    * w[o, c, i, j]`` (padding contributes 0: activations are symmetric, zero point 0), then
    ``out = clamp((acc * M[o] + 2**(S[o]-1)) >> S[o], lo, hi)``.
    """
    a = op.attrs
    x = inputs[0]
    weight = params["weight"]
    sums = conv_core(x, weight, a["strides"], a["pads"], a["dilations"], a["groups"], np.float64)
    acc = int_accumulate(sums, params["bias"], (1, -1, 1, 1))
    mult = params["multiplier"].astype(np.int64).reshape(1, -1, 1, 1)
    shift = params["shift"].astype(np.int64).reshape(1, -1, 1, 1)
    return [intmath.requantize(acc, mult, shift, a["lo"], a["hi"])]


def _per_tap_sums(
    x: np.ndarray,
    weight: np.ndarray,
    strides: list[int],
    pads: list[int],
    dilations: list[int],
    groups: int,
) -> np.ndarray:
    """The convolution's sums (float64, exact for int8 operands) as one matmul per kernel
    tap over a strided view of the padded input, accumulated: no im2col matrix of
    ``C * kh * kw`` rows, which wins when that matrix is large against the taps' work."""
    n, _, h, w = x.shape
    co, cig, kh, kw = weight.shape
    cog = co // groups
    ho, wo = out_hw(h, w, (kh, kw), strides, pads, dilations)
    win = windows(x.astype(np.float64), (kh, kw), strides, pads, dilations, (ho, wo), 0)
    wg = weight.astype(np.float64).reshape(groups, cog, cig, kh, kw)
    acc = np.zeros((n, groups, cog, ho * wo), np.float64)
    for i in range(kh):
        for j in range(kw):
            tap = np.ascontiguousarray(win[..., i, j]).reshape(n, groups, cig, ho * wo)
            acc += np.matmul(wg[None, :, :, :, i, j], tap)
    return acc.reshape(n, co, ho, wo)


def qconv2d_forward_per_tap(
    op: OpLike, inputs: list[np.ndarray], params: Mapping[str, np.ndarray]
) -> list[np.ndarray]:
    """``QConv2d`` as `qconv2d_forward`, its sums accumulated per kernel tap (bit-exact:
    integer products summed in float64 below 2**53 are exact in any order). The host
    backend's tuning times it against the im2col kernel (`QCONV2D_KERNELS`)."""
    a = op.attrs
    weight = params["weight"]
    sums = _per_tap_sums(inputs[0], weight, a["strides"], a["pads"], a["dilations"], a["groups"])
    acc = int_accumulate(sums, params["bias"], (1, -1, 1, 1))
    mult = params["multiplier"].astype(np.int64).reshape(1, -1, 1, 1)
    shift = params["shift"].astype(np.int64).reshape(1, -1, 1, 1)
    return [intmath.requantize(acc, mult, shift, a["lo"], a["hi"])]


QCONV2D_KERNELS = {"im2col": qconv2d_forward, "per_tap": qconv2d_forward_per_tap}
"""The host's QConv2d kernels by name, the default first (bit-exact with each other)."""


register_op(
    OpDef(
        op_type="Conv2d",
        num_inputs=(1, 1),
        num_outputs=1,
        attrs=CONV_ATTRS,
        params=("weight",),
        optional_params=("bias",),
        infer=_infer_conv,
        forward=conv2d_forward,
        fed_roles=("weight", "bias"),
        doc="2-D convolution (NCHW, OIHW weight), optional bias; BatchNormalization folds in.",
    )
)

register_op(
    OpDef(
        op_type="QConv2d",
        num_inputs=(1, 1),
        num_outputs=1,
        attrs={**CONV_ATTRS, **SAT_ATTRS},
        params=("weight", "bias", "multiplier", "shift"),
        infer=_infer_qconv,
        forward=qconv2d_forward,
        quantized=True,
        doc="int8 convolution, int32 accumulation, per-channel requantisation and saturation.",
    )
)
