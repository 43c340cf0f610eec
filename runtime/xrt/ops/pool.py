"""Pooling: ``MaxPool2d`` (and where its maxima come from, ``MaxPool2dIndices``),
``AvgPool2d``, ``GlobalAvgPool`` and the int8 ``QAvgPool2d``, ``QGlobalAvgPool``.

``MaxPool2d`` is dtype-generic: on int8 it is exact and keeps the input's scale, so the
quantized network uses it unchanged. Averages need a division, which the integer kernels
do as a multiply and a rounding shift (docs/quantization.md, "Pooling").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from xrt.dtypes import DataType, TensorType
from xrt.errors import ErrorCode
from xrt.ops import intmath
from xrt.ops._common import (
    check_nonneg,
    check_positive,
    fail,
    need_dtype,
    need_float,
    need_rank,
    pool_out_size,
)
from xrt.ops._qcommon import SAT_ATTRS, check_sat
from xrt.ops._registry import AttrSpec, OpDef, OpLike, register_op
from xrt.ops._window import out_hw, windows

__all__ = [
    "avgpool2d_forward",
    "axis_counts",
    "global_avgpool_forward",
    "maxpool2d_forward",
    "maxpool2d_indices_forward",
    "pool_counts",
    "qavgpool2d_forward",
    "qglobal_avgpool_forward",
]

POOL_ATTRS: dict[str, AttrSpec] = {
    "kernel": AttrSpec("ints", length=2, doc="window height and width"),
    "strides": AttrSpec("ints", [1, 1], 2, "step of the window along H and W"),
    "pads": AttrSpec("ints", [0, 0, 0, 0], 4, "padding [top, left, bottom, right]"),
    "dilations": AttrSpec("ints", [1, 1], 2, "spacing of the window taps"),
    "ceil_mode": AttrSpec("bool", False, None, "round the output size up (ONNX ceil_mode)"),
}

AVG_ATTRS: dict[str, AttrSpec] = {
    **POOL_ATTRS,
    "count_include_pad": AttrSpec("bool", False, None, "divide by the window size including pads"),
}


def _pool_out(op: OpLike, x: TensorType) -> tuple[int, int, int, int]:
    a = op.attrs
    need_rank(op, x, 4)
    check_positive(op, "kernel", a["kernel"])
    check_positive(op, "strides", a["strides"])
    check_positive(op, "dilations", a["dilations"])
    check_nonneg(op, "pads", a["pads"])
    kh, kw = a["kernel"]
    pads = a["pads"]
    if max(pads[0], pads[2]) >= kh or max(pads[1], pads[3]) >= kw:
        # A window lying wholly in the padding would have nothing to pool.
        raise fail(op, f"pads {pads} must be smaller than the kernel {a['kernel']}")
    n, c, h, w = x.shape
    ho, wo = out_hw(h, w, a["kernel"], a["strides"], a["pads"], a["dilations"], a["ceil_mode"])
    if ho <= 0 or wo <= 0:
        raise fail(op, f"kernel {a['kernel']} does not fit the padded input {h}x{w}")
    return n, c, ho, wo


def _infer_maxpool(
    op: OpLike, ins: list[TensorType], params: Mapping[str, np.ndarray]
) -> list[TensorType]:
    x = ins[0]
    if x.dtype is DataType.BOOL:
        raise fail(op, "input must be numeric", ErrorCode.WRONG_TYPE)
    return [TensorType(x.dtype, _pool_out(op, x), x.layout, x.quant)]


def maxpool2d_forward(
    op: OpLike, inputs: list[np.ndarray], params: Mapping[str, np.ndarray]
) -> list[np.ndarray]:
    """``MaxPool2d`` on any numeric dtype; padding never wins (-inf, or the integer minimum)."""
    a = op.attrs
    x = inputs[0]
    pad_value = -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min
    h, w = x.shape[2:]
    size = out_hw(h, w, a["kernel"], a["strides"], a["pads"], a["dilations"], a["ceil_mode"])
    win = windows(x, a["kernel"], a["strides"], a["pads"], a["dilations"], size, pad_value)
    return [_reduce_taps(win, np.maximum).astype(x.dtype, copy=False)]


def _infer_maxpool_indices(
    op: OpLike, ins: list[TensorType], params: Mapping[str, np.ndarray]
) -> list[TensorType]:
    x = ins[0]
    if x.dtype is DataType.BOOL:
        raise fail(op, "input must be numeric", ErrorCode.WRONG_TYPE)
    if op.attrs["storage_order"] not in (0, 1):
        raise fail(op, f"storage_order must be 0 or 1, got {op.attrs['storage_order']}")
    return [TensorType(DataType.SINT64, _pool_out(op, x), x.layout)]


def maxpool2d_indices_forward(
    op: OpLike, inputs: list[np.ndarray], params: Mapping[str, np.ndarray]
) -> list[np.ndarray]:
    """Where each ``MaxPool2d`` maximum comes from: its flat index in the input (row-major
    NCHW; with ``storage_order`` 1, H and W column-major), the first of equal maxima in
    window order (rows, then columns), as ONNX MaxPool's Indices output."""
    a = op.attrs
    x = inputs[0]
    n, c, h, w = x.shape
    pad_value = -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min
    ho, wo = out_hw(h, w, a["kernel"], a["strides"], a["pads"], a["dilations"], a["ceil_mode"])
    win = windows(x, a["kernel"], a["strides"], a["pads"], a["dilations"], (ho, wo), pad_value)
    kh, kw = a["kernel"]
    tap_i, tap_j = np.divmod(win.reshape(n, c, ho, wo, kh * kw).argmax(axis=-1), kw)
    rows = np.arange(ho)[:, None] * a["strides"][0] - a["pads"][0] + tap_i * a["dilations"][0]
    cols = np.arange(wo)[None, :] * a["strides"][1] - a["pads"][1] + tap_j * a["dilations"][1]
    plane = rows * w + cols if a["storage_order"] == 0 else rows + cols * h
    base = np.arange(n * c, dtype=np.int64).reshape(n, c, 1, 1) * (h * w)
    return [(base + plane).astype(np.int64)]


def _reduce_taps(win: np.ndarray, fn: np.ufunc) -> np.ndarray:
    """Combine the kernel taps of a window view with `fn`, one tap at a time (vectorised)."""
    kh, kw = win.shape[-2:]
    out = np.array(win[..., 0, 0])
    for i in range(kh):
        for j in range(kw):
            if i or j:
                fn(out, win[..., i, j], out=out)
    return out


def axis_counts(
    size: int, kernel: int, stride: int, begin: int, end: int, dil: int, ceil: bool, incl: bool
) -> np.ndarray:
    """How many taps of each window along one axis land on counted positions."""
    n_out = pool_out_size(size, kernel, stride, begin, end, dil, ceil)
    starts = np.arange(n_out, dtype=np.int64)[:, None] * stride - begin
    taps = starts + np.arange(kernel, dtype=np.int64)[None, :] * dil
    lo, hi = (-begin, size + end) if incl else (0, size)
    return ((taps >= lo) & (taps < hi)).sum(axis=1)


def pool_counts(attrs: Mapping[str, Any], h: int, w: int) -> np.ndarray:
    """Divisor of every output position of an average pool, shape ``(Ho, Wo)``, int64.

    Positions past the end padding (``ceil_mode``) never count; the explicit padding counts
    only with ``count_include_pad``. The count is separable: rows times columns.
    """
    k, s, p, d = attrs["kernel"], attrs["strides"], attrs["pads"], attrs["dilations"]
    ceil, incl = bool(attrs["ceil_mode"]), bool(attrs["count_include_pad"])
    ch = axis_counts(h, k[0], s[0], p[0], p[2], d[0], ceil, incl)
    cw = axis_counts(w, k[1], s[1], p[1], p[3], d[1], ceil, incl)
    return ch[:, None] * cw[None, :]


def _infer_avgpool(
    op: OpLike, ins: list[TensorType], params: Mapping[str, np.ndarray]
) -> list[TensorType]:
    need_float(op, ins[0])
    x = ins[0]
    return [TensorType(x.dtype, _pool_out(op, x), x.layout)]


def avgpool2d_forward(
    op: OpLike, inputs: list[np.ndarray], params: Mapping[str, np.ndarray]
) -> list[np.ndarray]:
    """Float ``AvgPool2d``: window sums (float32) divided by `pool_counts`."""
    a = op.attrs
    x = inputs[0]
    h, w = x.shape[2:]
    size = out_hw(h, w, a["kernel"], a["strides"], a["pads"], a["dilations"], a["ceil_mode"])
    win = windows(
        x.astype(np.float32, copy=False),
        a["kernel"],
        a["strides"],
        a["pads"],
        a["dilations"],
        size,
        0,
    )
    sums = _reduce_taps(win, np.add)
    counts = pool_counts(a, h, w).astype(np.float32)
    return [(sums / counts).astype(x.dtype, copy=False)]


def _requant_table(op: OpLike) -> dict[int, tuple[int, int]]:
    table: dict[int, tuple[int, int]] = {}
    for entry in op.attrs["requant"]:
        if (
            not isinstance(entry, list)
            or len(entry) != 3
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in entry)
        ):
            raise fail(op, f"requant entries must be [count, multiplier, shift], got {entry!r}")
        count, m, s = entry
        if count <= 0 or not (0 <= m <= intmath.MULTIPLIER_MAX and 0 <= s <= intmath.SHIFT_MAX):
            raise fail(op, f"requant entry {entry} out of range")
        table[count] = (m, s)
    return table


def _infer_qavgpool(
    op: OpLike, ins: list[TensorType], params: Mapping[str, np.ndarray]
) -> list[TensorType]:
    x = ins[0]
    need_dtype(op, x, DataType.SINT8)
    shape = _pool_out(op, x)
    table = _requant_table(op)
    counts = np.unique(pool_counts(op.attrs, x.shape[2], x.shape[3]))
    missing = [int(k) for k in counts if int(k) not in table]
    if missing:
        raise fail(op, f"requant table has no entry for window size(s) {missing}")
    return [TensorType(DataType.SINT8, shape, x.layout, check_sat(op))]


def qavgpool2d_forward(
    op: OpLike, inputs: list[np.ndarray], params: Mapping[str, np.ndarray]
) -> list[np.ndarray]:
    """``QAvgPool2d``: int32 window sums, then per-window-size ``(M_k, S_k)`` requantisation.

    ``out = clamp((sum * M_k + 2**(S_k-1)) >> S_k, lo, hi)`` where ``k`` is the position's
    divisor and ``M_k * 2**-S_k ~= s_in / (s_out * k)``.
    """
    a = op.attrs
    x = inputs[0]
    h, w = x.shape[2:]
    size = out_hw(h, w, a["kernel"], a["strides"], a["pads"], a["dilations"], a["ceil_mode"])
    win = windows(x.astype(np.int64), a["kernel"], a["strides"], a["pads"], a["dilations"], size, 0)
    sums = _reduce_taps(win, np.add)
    counts = pool_counts(a, h, w)
    table = _requant_table(op)
    lut_m = np.zeros(int(counts.max()) + 1, dtype=np.int64)
    lut_s = np.zeros_like(lut_m)
    for k, (m, s) in table.items():
        if k < lut_m.size:
            lut_m[k], lut_s[k] = m, s
    return [intmath.requantize(sums, lut_m[counts], lut_s[counts], a["lo"], a["hi"])]


def _infer_gap(
    op: OpLike, ins: list[TensorType], params: Mapping[str, np.ndarray]
) -> list[TensorType]:
    x = ins[0]
    need_float(op, x)
    if x.ndim < 3:
        raise fail(op, f"input must have rank >= 3 (N, C, spatial...), got {list(x.shape)}")
    return [TensorType(x.dtype, x.shape[:2] + (1,) * (x.ndim - 2), x.layout)]


def global_avgpool_forward(
    op: OpLike, inputs: list[np.ndarray], params: Mapping[str, np.ndarray]
) -> list[np.ndarray]:
    """``GlobalAvgPool``: mean over every spatial axis, kept as size-1 axes."""
    x = inputs[0]
    axes = tuple(range(2, x.ndim))
    return [x.mean(axis=axes, keepdims=True, dtype=np.float32).astype(x.dtype, copy=False)]


def _infer_qgap(
    op: OpLike, ins: list[TensorType], params: Mapping[str, np.ndarray]
) -> list[TensorType]:
    x = ins[0]
    need_dtype(op, x, DataType.SINT8)
    if x.ndim < 3:
        raise fail(op, f"input must have rank >= 3 (N, C, spatial...), got {list(x.shape)}")
    m, s = op.attrs["multiplier"], op.attrs["shift"]
    if not (0 <= m <= intmath.MULTIPLIER_MAX and 0 <= s <= intmath.SHIFT_MAX):
        raise fail(op, f"multiplier/shift {m}/{s} out of range")
    return [TensorType(DataType.SINT8, x.shape[:2] + (1,) * (x.ndim - 2), x.layout, check_sat(op))]


def qglobal_avgpool_forward(
    op: OpLike, inputs: list[np.ndarray], params: Mapping[str, np.ndarray]
) -> list[np.ndarray]:
    """``QGlobalAvgPool``: int32 sum over H*W, then ``requantize(sum, M, S, lo, hi)``."""
    a = op.attrs
    x = inputs[0]
    axes = tuple(range(2, x.ndim))
    sums = x.astype(np.int64).sum(axis=axes, keepdims=True)
    return [intmath.requantize(sums, a["multiplier"], a["shift"], a["lo"], a["hi"])]


register_op(
    OpDef(
        op_type="MaxPool2d",
        num_inputs=(1, 1),
        num_outputs=1,
        attrs=POOL_ATTRS,
        infer=_infer_maxpool,
        forward=maxpool2d_forward,
        doc="2-D max pooling on any numeric dtype (int8 keeps its scale).",
    )
)
register_op(
    OpDef(
        op_type="MaxPool2dIndices",
        num_inputs=(1, 1),
        num_outputs=1,
        attrs={
            **POOL_ATTRS,
            "storage_order": AttrSpec("int", 0, None, "1: H and W indexed column-major"),
        },
        infer=_infer_maxpool_indices,
        forward=maxpool2d_indices_forward,
        doc="the flat input index of each MaxPool2d maximum (ONNX MaxPool's Indices output).",
    )
)
register_op(
    OpDef(
        op_type="AvgPool2d",
        num_inputs=(1, 1),
        num_outputs=1,
        attrs=AVG_ATTRS,
        infer=_infer_avgpool,
        forward=avgpool2d_forward,
        doc="2-D average pooling (ONNX AveragePool semantics).",
    )
)
register_op(
    OpDef(
        op_type="GlobalAvgPool",
        num_inputs=(1, 1),
        num_outputs=1,
        attrs={},
        infer=_infer_gap,
        forward=global_avgpool_forward,
        doc="Mean over all spatial axes.",
    )
)
register_op(
    OpDef(
        op_type="QAvgPool2d",
        num_inputs=(1, 1),
        num_outputs=1,
        attrs={
            **AVG_ATTRS,
            **SAT_ATTRS,
            "requant": AttrSpec("json", doc="[[window size k, M_k, S_k], ...]"),
        },
        infer=_infer_qavgpool,
        forward=qavgpool2d_forward,
        quantized=True,
        doc="int8 average pooling: int32 sums, division as multiply + rounding shift.",
    )
)
register_op(
    OpDef(
        op_type="QGlobalAvgPool",
        num_inputs=(1, 1),
        num_outputs=1,
        attrs={
            **SAT_ATTRS,
            "multiplier": AttrSpec("int", doc="M for s_in / (s_out * H * W)"),
            "shift": AttrSpec("int", doc="S for s_in / (s_out * H * W)"),
        },
        infer=_infer_qgap,
        forward=qglobal_avgpool_forward,
        quantized=True,
        doc="int8 global average pool: int32 sum, then requantize.",
    )
)
