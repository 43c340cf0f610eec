"""Reductions over axes: ``ReduceMean``, ``ReduceSum``, ``ReduceMax``, ``ReduceMin``,
``ReduceProd``, ``ReduceL1``, ``ReduceL2``, ``ReduceSumSquare``, ``ReduceLogSumExp``,
``ArgMax`` / ``ArgMin``, and the int8 ``QReduceMean`` (docs/quantization.md).

``axes`` is a list attribute here (the importer reads ONNX's axes input); an empty list
reduces every axis unless ``noop_with_empty_axes``. Float sums accumulate in float64 and
round once to the input dtype.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from xrt.dtypes import DataType, TensorType
from xrt.errors import ErrorCode
from xrt.ops import intmath
from xrt.ops._common import fail, need_dtype, norm_axis
from xrt.ops._qcommon import SAT_ATTRS, check_sat, check_scalar_requant
from xrt.ops._registry import AttrSpec, OpDef, OpLike, register_op

__all__ = ["REDUCE_OPS", "qreduce_mean_forward", "reduce_axes"]


def _sum(x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    acc = np.float64 if x.dtype.kind == "f" else np.int64
    return np.sum(x, axis=axes, dtype=acc, keepdims=True)


def _lowest(dtype: np.dtype, highest: bool = False) -> object:
    """The identity of max (of min when `highest`): what ONNX gives over an empty set."""
    if dtype.kind == "b":
        return highest
    if dtype.kind == "f":
        return np.inf if highest else -np.inf
    info = np.iinfo(dtype)
    return info.max if highest else info.min


def _max(x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    return np.max(x, axis=axes, keepdims=True, initial=_lowest(x.dtype))


def _min(x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    return np.min(x, axis=axes, keepdims=True, initial=_lowest(x.dtype, highest=True))


def _logsumexp(x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    x64 = x.astype(np.float64)
    m = _max(x64, axes)
    m = np.where(np.isfinite(m), m, 0.0)
    return np.log(np.sum(np.exp(x64 - m), axis=axes, keepdims=True)) + m


REDUCE_OPS: dict[str, tuple[Callable[[np.ndarray, tuple[int, ...]], np.ndarray], str]] = {
    "ReduceSum": (_sum, "sum"),
    "ReduceMean": (
        lambda x, ax: _sum(x, ax) / max(1, int(np.prod([x.shape[a] for a in ax]))),
        "mean",
    ),
    "ReduceMax": (_max, "maximum (over an empty set: -inf, or the type's lowest value)"),
    "ReduceMin": (_min, "minimum (over an empty set: +inf, or the type's highest value)"),
    "ReduceProd": (
        lambda x, ax: np.prod(
            x.astype(np.float64) if x.dtype.kind == "f" else x, axis=ax, keepdims=True
        ),
        "product",
    ),
    "ReduceL1": (lambda x, ax: _sum(np.abs(x), ax), "sum of |x|"),
    "ReduceL2": (lambda x, ax: np.sqrt(_sum(x.astype(np.float64) ** 2, ax)), "Euclidean norm"),
    "ReduceSumSquare": (
        lambda x, ax: _sum(
            x.astype(np.float64) ** 2 if x.dtype.kind == "f" else x.astype(np.int64) ** 2, ax
        ),
        "sum of x**2",
    ),
    "ReduceLogSumExp": (_logsumexp, "log(sum(exp(x)))"),
}
"""Op type -> (function(x, axes) with keepdims, doc)."""

_REDUCE_ATTRS = {
    "axes": AttrSpec("ints", [], None, "axes to reduce (negative counts from the end)"),
    "keepdims": AttrSpec("bool", True, None, "keep reduced axes with length 1"),
    "noop_with_empty_axes": AttrSpec("bool", False, None, "empty axes: identity, not all"),
}


def reduce_axes(op: OpLike, ndim: int) -> tuple[int, ...] | None:
    """The reduced axes, sorted; None for the identity (empty axes with noop)."""
    axes = op.attrs["axes"]
    if not axes:
        return None if op.attrs["noop_with_empty_axes"] else tuple(range(ndim))
    out = sorted({norm_axis(op, a, ndim) for a in axes})
    if len(out) != len(axes):
        raise fail(op, f"axes {axes} repeat an axis")
    return tuple(out)


def _out_shape(op: OpLike, shape: tuple[int, ...], axes: tuple[int, ...]) -> tuple[int, ...]:
    if op.attrs["keepdims"]:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def _infer_reduce(
    op: OpLike, ins: list[TensorType], params: Mapping[str, np.ndarray]
) -> list[TensorType]:
    x = ins[0]
    if x.dtype is DataType.BOOL and op.op_type not in ("ReduceMax", "ReduceMin"):
        raise fail(op, "input must be numeric, got Bool", ErrorCode.WRONG_TYPE)
    axes = reduce_axes(op, x.ndim)
    if axes is None:
        return [TensorType(x.dtype, x.shape, x.layout)]
    return [TensorType(x.dtype, _out_shape(op, x.shape, axes), "*")]


def _reduce_forward(
    op: OpLike, inputs: list[np.ndarray], params: Mapping[str, np.ndarray]
) -> list[np.ndarray]:
    """The reduction of `REDUCE_OPS` over ``axes``, in the input's dtype."""
    x = inputs[0]
    axes = reduce_axes(op, x.ndim)
    if axes is None:
        return [x.copy()]
    with np.errstate(all="ignore"):
        y = REDUCE_OPS[op.op_type][0](x, axes)
    y = np.asarray(y).astype(x.dtype, copy=False)
    return [y.reshape(_out_shape(op, x.shape, axes))]


def _infer_arg(
    op: OpLike, ins: list[TensorType], params: Mapping[str, np.ndarray]
) -> list[TensorType]:
    x = ins[0]
    if x.dtype is DataType.BOOL:
        raise fail(op, "input must be numeric, got Bool", ErrorCode.WRONG_TYPE)
    axis = norm_axis(op, op.attrs["axis"], x.ndim)
    if x.shape[axis] == 0:
        raise fail(op, f"axis {axis} is empty")
    shape = _out_shape(op, x.shape, (axis,))
    return [TensorType(DataType.SINT64, shape, "*")]


def _arg_forward(
    op: OpLike, inputs: list[np.ndarray], params: Mapping[str, np.ndarray]
) -> list[np.ndarray]:
    """Index of the first (or, with ``select_last_index``, last) maximum / minimum."""
    x = inputs[0]
    axis = norm_axis(op, op.attrs["axis"], x.ndim)
    fn = np.argmax if op.op_type == "ArgMax" else np.argmin
    if op.attrs["select_last_index"]:
        flipped = np.flip(x, axis=axis)
        idx = x.shape[axis] - 1 - fn(flipped, axis=axis, keepdims=True)
    else:
        idx = fn(x, axis=axis, keepdims=True)
    idx = np.asarray(idx, dtype=np.int64)
    return [idx.reshape(_out_shape(op, x.shape, (axis,)))]


def _infer_qreduce_mean(
    op: OpLike, ins: list[TensorType], params: Mapping[str, np.ndarray]
) -> list[TensorType]:
    x = ins[0]
    need_dtype(op, x, DataType.SINT8)
    check_scalar_requant(op, ("multiplier", "shift"))
    axes = reduce_axes(op, x.ndim)
    if axes is None:
        raise fail(op, "needs axes to reduce")
    count = int(np.prod([x.shape[a] for a in axes]))
    if not 0 < count <= 2**24:  # keeps |sum| <= 2**31 (int32 accumulator)
        raise fail(op, f"reduces {count} values; 1..2**24 are supported")
    return [TensorType(DataType.SINT8, _out_shape(op, x.shape, axes), "*", check_sat(op))]


def qreduce_mean_forward(
    op: OpLike, inputs: list[np.ndarray], params: Mapping[str, np.ndarray]
) -> list[np.ndarray]:
    """``QReduceMean``: int32 sum over ``axes``, then ``requantize(sum, M, S, lo, hi)`` with
    ``M * 2**-S ~= s_in / (s_out * count)``."""
    a = op.attrs
    x = inputs[0]
    axes = reduce_axes(op, x.ndim)
    assert axes is not None  # checked by inference
    sums = x.astype(np.int64).sum(axis=axes, keepdims=True)
    out = intmath.requantize(sums, a["multiplier"], a["shift"], a["lo"], a["hi"])
    return [out.reshape(_out_shape(op, x.shape, axes))]


for _name, (_fn, _doc) in REDUCE_OPS.items():
    register_op(
        OpDef(
            _name,
            (1, 1),
            1,
            _REDUCE_ATTRS,
            _infer_reduce,
            _reduce_forward,
            doc=f"{_doc} over axes",
            fed_roles=("axes",),
            shape_roles=("axes",),
        )
    )
for _name in ("ArgMax", "ArgMin"):
    register_op(
        OpDef(
            _name,
            (1, 1),
            1,
            {
                "axis": AttrSpec("int", 0),
                "keepdims": AttrSpec("bool", True),
                "select_last_index": AttrSpec("bool", False),
            },
            _infer_arg,
            _arg_forward,
            doc=f"index of the {'largest' if _name == 'ArgMax' else 'smallest'} value (SInt64)",
        )
    )
register_op(
    OpDef(
        "QReduceMean",
        (1, 1),
        1,
        {
            **SAT_ATTRS,
            "axes": AttrSpec("ints", doc="axes to average over"),
            "keepdims": AttrSpec("bool", True),
            "noop_with_empty_axes": AttrSpec("bool", False, None, "must stay false"),
            "multiplier": AttrSpec("int", doc="M ~= s_in / (s_out * count) * 2**S"),
            "shift": AttrSpec("int", doc="right shift S"),
        },
        _infer_qreduce_mean,
        qreduce_mean_forward,
        quantized=True,
        doc="int8 mean over axes: int32 sum, one requantisation",
    )
)
