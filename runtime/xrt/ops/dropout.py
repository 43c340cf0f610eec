"""``Dropout`` in training mode (ONNX Dropout with ``training_mode`` True or fed at run
time; the importer removes inference-mode Dropout, which is the identity).

Each element is kept with probability ``1 - ratio`` and scaled by ``1 / (1 - ratio)``; the
second output is the keep mask. ``ratio`` 0 or ``training_mode`` False give the input and
an all-True mask. With a ``seed`` the mask is the same at every forward: the keep test is
``uniform(0, 1) >= ratio`` over the shape, drawn by numpy's ``RandomState(seed)`` (the
generator ONNX's reference evaluator uses, so seeded results match it); without one each
forward draws a fresh mask.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from xrt.dtypes import DataType, TensorType
from xrt.errors import ErrorCode
from xrt.ops._common import fail
from xrt.ops._registry import AttrSpec, OpDef, OpLike, register_op

__all__ = ["dropout_forward"]


def _ratio(op: OpLike) -> float:
    ratio = op.attrs["ratio"]
    if not 0.0 <= ratio < 1.0:
        raise fail(op, f"ratio must be in [0, 1), got {ratio}")
    return float(ratio)


def _infer(op: OpLike, ins: list[TensorType], params: Mapping[str, np.ndarray]) -> list[TensorType]:
    x = ins[0]
    if not x.dtype.is_float or x.quant is not None:
        raise fail(op, f"input must be float, got {x.dtype.manual_name}", ErrorCode.WRONG_TYPE)
    if "ratio" not in op.fed:
        _ratio(op)
    seed = op.attrs["seed"]
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise fail(op, f"seed must be an int or None, got {seed!r}", ErrorCode.WRONG_TYPE)
    return [TensorType(x.dtype, x.shape, x.layout), TensorType(DataType.BOOL, x.shape, x.layout)]


def dropout_forward(
    op: OpLike, inputs: list[np.ndarray], params: Mapping[str, np.ndarray]
) -> list[np.ndarray]:
    """``x * keep / (1 - ratio)`` and ``keep``; the identity and all-True when not training."""
    x = inputs[0]
    ratio = _ratio(op)
    if not op.attrs["training_mode"] or ratio == 0.0:
        return [x.copy(), np.ones(x.shape, np.bool_)]
    seed = op.attrs["seed"]
    # RandomState takes a seed in [0, 2**32): a negative or larger ONNX seed wraps there.
    rng = np.random.RandomState(None if seed is None else seed % 2**32)
    keep = rng.uniform(0.0, 1.0, x.shape) >= ratio
    y = (keep * x) * x.dtype.type(1.0 / (1.0 - ratio))
    return [y.astype(x.dtype, copy=False), keep]


register_op(
    OpDef(
        "Dropout",
        (1, 1),
        2,
        {
            "ratio": AttrSpec("float", 0.5, None, "probability of dropping an element"),
            "training_mode": AttrSpec("bool", False, None, "False: the identity"),
            "seed": AttrSpec("json", None, None, "int: the same mask at every forward"),
        },
        _infer,
        dropout_forward,
        fed_roles=("ratio", "training_mode"),
        doc="dropout in training mode: keep with probability 1 - ratio, scale by "
        "1 / (1 - ratio); outputs the result and the keep mask (ONNX Dropout)",
    )
)
