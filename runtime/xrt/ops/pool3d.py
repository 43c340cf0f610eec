"""Volumetric pooling on the host: ``MaxPool3d`` and ``AvgPool3d`` over NCDHW tensors
(ONNX MaxPool and AveragePool on 5-D inputs; the NPU pools 2-D only).

The same rules as the 2-D pools of `xrt.ops.pool`, axis by axis: output lengths by
`pool_out_size` (ceil_mode included), padding that never wins a maximum, and average
divisors counting the taps on the input (and, with ``count_include_pad``, on the explicit
padding), separable into a product over the three axes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from xrt.dtypes import DataType, TensorType
from xrt.errors import ErrorCode
from xrt.ops._common import check_nonneg, check_positive, fail, need_float, need_rank, pool_out_size
from xrt.ops._registry import AttrSpec, OpDef, OpLike, register_op
from xrt.ops.pool import axis_counts

__all__ = ["avgpool3d_forward", "maxpool3d_forward"]

POOL3D_ATTRS: dict[str, AttrSpec] = {
    "kernel": AttrSpec("ints", length=3, doc="window depth, height and width"),
    "strides": AttrSpec("ints", [1, 1, 1], 3, "step of the window along D, H and W"),
    "pads": AttrSpec("ints", [0] * 6, 6, "padding [d0, h0, w0, d1, h1, w1] (begins, ends)"),
    "dilations": AttrSpec("ints", [1, 1, 1], 3, "spacing of the window taps"),
    "ceil_mode": AttrSpec("bool", False, None, "round the output size up (ONNX ceil_mode)"),
}
AVG3D_ATTRS: dict[str, AttrSpec] = {
    **POOL3D_ATTRS,
    "count_include_pad": AttrSpec("bool", False, None, "divide by the window size including pads"),
}


def _out(op: OpLike, shape: Sequence[int]) -> tuple[int, ...]:
    a = op.attrs
    k, s, p, d = a["kernel"], a["strides"], a["pads"], a["dilations"]
    return tuple(
        pool_out_size(n, k[i], s[i], p[i], p[i + 3], d[i], a["ceil_mode"])
        for i, n in enumerate(shape[2:])
    )


def _infer(op: OpLike, ins: list[TensorType], params: Mapping[str, np.ndarray]) -> list[TensorType]:
    x = ins[0]
    a = op.attrs
    need_rank(op, x, 5)
    if op.op_type == "AvgPool3d":
        need_float(op, x)
    elif x.dtype is DataType.BOOL:
        raise fail(op, "input must be numeric", ErrorCode.WRONG_TYPE)
    for key in ("kernel", "strides", "dilations"):
        check_positive(op, key, a[key])
    check_nonneg(op, "pads", a["pads"])
    if any(max(a["pads"][i], a["pads"][i + 3]) >= a["kernel"][i] for i in range(3)):
        raise fail(op, f"pads {a['pads']} must be smaller than the kernel {a['kernel']}")
    out = _out(op, x.shape)
    if min(out) <= 0:
        raise fail(op, f"kernel {a['kernel']} does not fit the padded input {list(x.shape[2:])}")
    return [TensorType(x.dtype, (*x.shape[:2], *out), x.layout)]


def _windows(op: OpLike, x: np.ndarray, pad_value: float | int) -> np.ndarray:
    """A view ``(N, C, Do, Ho, Wo, kd, kh, kw)`` of the padded input (padded further where a
    ceil-mode window runs past the end padding)."""
    a = op.attrs
    k, s, p, d = a["kernel"], a["strides"], a["pads"], a["dilations"]
    out = _out(op, x.shape)
    spans = [d[i] * (k[i] - 1) + 1 for i in range(3)]
    widths = [(0, 0), (0, 0)]
    for i, n in enumerate(x.shape[2:]):
        extra = max(0, (out[i] - 1) * s[i] + spans[i] - (n + p[i] + p[i + 3]))
        widths.append((p[i], p[i + 3] + extra))
    xp = np.pad(x, widths, constant_values=pad_value) if any(map(any, widths)) else x
    win = sliding_window_view(xp, spans, axis=(2, 3, 4))
    steps = tuple(slice(None, (out[i] - 1) * s[i] + 1, s[i]) for i in range(3))
    return win[(slice(None), slice(None), *steps, *(slice(None, None, d[i]) for i in range(3)))]


def maxpool3d_forward(
    op: OpLike, inputs: list[np.ndarray], params: Mapping[str, np.ndarray]
) -> list[np.ndarray]:
    """The maximum of each window; padding never wins (-inf, or the integer minimum)."""
    x = inputs[0]
    pad_value = -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min
    return [_windows(op, x, pad_value).max(axis=(-3, -2, -1)).astype(x.dtype, copy=False)]


def avgpool3d_forward(
    op: OpLike, inputs: list[np.ndarray], params: Mapping[str, np.ndarray]
) -> list[np.ndarray]:
    """Window sums (float64) divided by the separable tap counts."""
    a = op.attrs
    x = inputs[0]
    sums = _windows(op, x.astype(np.float64), 0.0).sum(axis=(-3, -2, -1))
    k, s, p, d = a["kernel"], a["strides"], a["pads"], a["dilations"]
    ceil, incl = bool(a["ceil_mode"]), bool(a["count_include_pad"])
    c = [
        axis_counts(n, k[i], s[i], p[i], p[i + 3], d[i], ceil, incl)
        for i, n in enumerate(x.shape[2:])
    ]
    counts = c[0][:, None, None] * c[1][None, :, None] * c[2][None, None, :]
    return [(sums / counts).astype(x.dtype)]


register_op(
    OpDef(
        op_type="MaxPool3d",
        num_inputs=(1, 1),
        num_outputs=1,
        attrs=POOL3D_ATTRS,
        infer=_infer,
        forward=maxpool3d_forward,
        doc="3-D max pooling on any numeric dtype, host only (ONNX MaxPool on NCDHW).",
    )
)
register_op(
    OpDef(
        op_type="AvgPool3d",
        num_inputs=(1, 1),
        num_outputs=1,
        attrs=AVG3D_ATTRS,
        infer=_infer,
        forward=avgpool3d_forward,
        doc="3-D average pooling, host only (ONNX AveragePool on NCDHW).",
    )
)
