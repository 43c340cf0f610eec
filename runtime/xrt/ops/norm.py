"""``BatchNorm`` (inference form). The ONNX importer folds it into the preceding convolution
when that convolution's output feeds nothing else (`fold_batchnorm`); what remains runs here.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from xrt.dtypes import TensorType
from xrt.ops._common import fail, need_float
from xrt.ops._registry import AttrSpec, OpDef, OpLike, register_op

__all__ = ["batchnorm_forward", "batchnorm_scale_shift"]

_ROLES = ("scale", "bias", "mean", "var")


def batchnorm_scale_shift(
    params: Mapping[str, np.ndarray], epsilon: float
) -> tuple[np.ndarray, np.ndarray]:
    """Per-channel ``(a, b)`` with ``BN(x) = a * x + b``, computed in float64.

    ``a = scale / sqrt(var + epsilon)``, ``b = bias - mean * a``.
    """
    scale = params["scale"].astype(np.float64)
    a = scale / np.sqrt(params["var"].astype(np.float64) + epsilon)
    b = params["bias"].astype(np.float64) - params["mean"].astype(np.float64) * a
    return a, b


def _infer(op: OpLike, ins: list[TensorType], params: Mapping[str, np.ndarray]) -> list[TensorType]:
    x = ins[0]
    need_float(op, x)
    if x.ndim < 2:
        raise fail(op, f"input must have rank >= 2 (N, C, ...), got {list(x.shape)}")
    for role in _ROLES:
        if params[role].shape != (x.shape[1],):
            raise fail(op, f"{role} must have shape [{x.shape[1]}], got {list(params[role].shape)}")
    if op.attrs["epsilon"] < 0:
        raise fail(op, "epsilon must be >= 0")
    return [x]


def batchnorm_forward(
    op: OpLike, inputs: list[np.ndarray], params: Mapping[str, np.ndarray]
) -> list[np.ndarray]:
    """``(x - mean) / sqrt(var + epsilon) * scale + bias`` per channel (axis 1), float32."""
    x = inputs[0]
    shape = (1, -1) + (1,) * (x.ndim - 2)
    f32 = np.float32
    inv = (1.0 / np.sqrt(params["var"].astype(f32) + f32(op.attrs["epsilon"]))).reshape(shape)
    y = (x.astype(f32) - params["mean"].astype(f32).reshape(shape)) * inv
    y = y * params["scale"].astype(f32).reshape(shape) + params["bias"].astype(f32).reshape(shape)
    return [y.astype(x.dtype, copy=False)]


register_op(
    OpDef(
        "BatchNorm",
        (1, 1),
        1,
        {"epsilon": AttrSpec("float", 1e-5)},
        _infer,
        batchnorm_forward,
        params=_ROLES,
        doc="batch normalisation with running statistics (ONNX BatchNormalization, inference)",
    )
)
