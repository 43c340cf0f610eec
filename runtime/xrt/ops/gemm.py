"""Matrix products: ``Gemm`` (a dense layer with a constant weight), ``MatMul`` (two
values) and the int8 ``QGemm``.

``Gemm`` computes ``y = x @ weight.T + bias`` with ``x`` of shape ``(M, K)`` and ``weight`` of
shape ``(N, K)``; the ONNX importer folds Gemm's ``alpha``, ``beta`` and ``transB`` into the
parameters and turns ``transA`` into a Transpose.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from xrt.dtypes import DataType, TensorType
from xrt.errors import ErrorCode
from xrt.ops import intmath
from xrt.ops._common import fail, need_dtype, need_float, need_rank
from xrt.ops._qcommon import SAT_ATTRS, check_requant_params, check_sat, int_accumulate
from xrt.ops._registry import OpDef, OpLike, register_op

__all__ = ["gemm_forward", "matmul_forward", "qgemm_forward"]


def _check_gemm(
    op: OpLike, x: TensorType, weight: np.ndarray, bias: np.ndarray | None
) -> tuple[int, int]:
    need_rank(op, x, 2)
    if weight.ndim != 2:
        raise fail(op, f"weight must have rank 2 (N, K), got {list(weight.shape)}")
    n, k = weight.shape
    if x.shape[1] != k:
        raise fail(op, f"input has {x.shape[1]} features, weight expects {k}")
    if bias is not None and bias.shape != (n,):
        raise fail(op, f"bias must have shape [{n}], got {list(bias.shape)}")
    return x.shape[0], n


def _infer_gemm(
    op: OpLike, ins: list[TensorType], params: Mapping[str, np.ndarray]
) -> list[TensorType]:
    need_float(op, ins[0])
    weight = params["weight"]
    if weight.dtype.kind != "f":
        raise fail(op, f"weight must be float, got {weight.dtype}", ErrorCode.WRONG_TYPE)
    m, n = _check_gemm(op, ins[0], weight, params.get("bias"))
    return [TensorType(ins[0].dtype, (m, n))]


def gemm_forward(
    op: OpLike, inputs: list[np.ndarray], params: Mapping[str, np.ndarray]
) -> list[np.ndarray]:
    """``x @ weight.T + bias`` in float32."""
    x = inputs[0]
    y = x.astype(np.float32, copy=False) @ params["weight"].astype(np.float32, copy=False).T
    bias = params.get("bias")
    if bias is not None:
        y += bias.astype(np.float32)
    return [y.astype(x.dtype, copy=False)]


def _infer_qgemm(
    op: OpLike, ins: list[TensorType], params: Mapping[str, np.ndarray]
) -> list[TensorType]:
    need_dtype(op, ins[0], DataType.SINT8)
    weight, bias = params["weight"], params["bias"]
    if weight.dtype != np.int8 or bias.dtype != np.int32:
        raise fail(
            op,
            f"weight/bias must be int8/int32, got {weight.dtype}/{bias.dtype}",
            ErrorCode.WRONG_TYPE,
        )
    m, n = _check_gemm(op, ins[0], weight, bias)
    check_requant_params(op, params, n)
    return [TensorType(DataType.SINT8, (m, n), "*", check_sat(op))]


def qgemm_forward(
    op: OpLike, inputs: list[np.ndarray], params: Mapping[str, np.ndarray]
) -> list[np.ndarray]:
    """``QGemm``: ``acc = x @ w.T + bias`` (int32), then per-output-channel requantize."""
    a = op.attrs
    sums = (
        inputs[0].astype(np.float64) @ params["weight"].astype(np.float64).T
    )  # exact, see conv_core
    acc = int_accumulate(sums, params["bias"], (1, -1))
    mult = params["multiplier"].astype(np.int64).reshape(1, -1)
    shift = params["shift"].astype(np.int64).reshape(1, -1)
    return [intmath.requantize(acc, mult, shift, a["lo"], a["hi"])]


def _infer_matmul(
    op: OpLike, ins: list[TensorType], params: Mapping[str, np.ndarray]
) -> list[TensorType]:
    a, b = ins
    need_float(op, a, "input 0")
    need_float(op, b, "input 1")
    if a.dtype is not b.dtype:
        raise fail(op, "input dtypes differ", ErrorCode.WRONG_TYPE)
    if a.ndim == 0 or b.ndim == 0:
        raise fail(op, "MatMul inputs must have rank >= 1")
    sa = a.shape if a.ndim > 1 else (1, *a.shape)
    sb = b.shape if b.ndim > 1 else (*b.shape, 1)
    if sa[-1] != sb[-2]:
        raise fail(op, f"inner dimensions differ: {list(a.shape)} @ {list(b.shape)}")
    try:
        batch = tuple(np.broadcast_shapes(sa[:-2], sb[:-2]))
    except ValueError:
        raise fail(
            op, f"batch dimensions do not broadcast: {list(a.shape)} @ {list(b.shape)}"
        ) from None
    shape = batch + (sa[-2],) * (a.ndim > 1) + (sb[-1],) * (b.ndim > 1)
    return [TensorType(a.dtype, shape)]


def matmul_forward(
    op: OpLike, inputs: list[np.ndarray], params: Mapping[str, np.ndarray]
) -> list[np.ndarray]:
    """``numpy.matmul`` (= ONNX MatMul)."""
    return [np.matmul(inputs[0], inputs[1])]


register_op(
    OpDef(
        "Gemm",
        (1, 1),
        1,
        {},
        _infer_gemm,
        gemm_forward,
        params=("weight",),
        optional_params=("bias",),
        doc="dense layer x @ weight.T + bias, weight (N, K)",
    )
)
register_op(
    OpDef("MatMul", (2, 2), 1, {}, _infer_matmul, matmul_forward, doc="numpy matmul of two values")
)
register_op(
    OpDef(
        "QGemm",
        (1, 1),
        1,
        dict(SAT_ATTRS),
        _infer_qgemm,
        qgemm_forward,
        params=("weight", "bias", "multiplier", "shift"),
        quantized=True,
        doc="int8 dense layer, int32 accumulation, per-channel requantisation",
    )
)
