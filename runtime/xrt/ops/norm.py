"""Normalisations: ``BatchNorm`` (inference form), ``BatchNormTrain`` (training form),
``LRN``, ``LayerNorm``, ``InstanceNorm``.

The ONNX importer folds BatchNorm into the preceding convolution
when that convolution's output feeds nothing else (`fold_batchnorm`); what remains runs here.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from xrt.dtypes import TensorType
from xrt.ops._common import fail, need_float
from xrt.ops._registry import AttrSpec, OpDef, OpLike, register_op

__all__ = [
    "batchnorm_forward",
    "batchnorm_scale_shift",
    "batchnorm_train_forward",
    "instnorm_forward",
    "layernorm_forward",
    "lrn_forward",
]

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
        fed_roles=_ROLES,
        doc="batch normalisation with running statistics (ONNX BatchNormalization, inference)",
    )
)


def _infer_train(
    op: OpLike, ins: list[TensorType], params: Mapping[str, np.ndarray]
) -> list[TensorType]:
    (x,) = _infer(op, ins, params)
    if not 0.0 <= op.attrs["momentum"] <= 1.0:
        raise fail(op, f"momentum must be in [0, 1], got {op.attrs['momentum']}")
    stat = TensorType(x.dtype, (x.shape[1],))
    return [x, stat, stat]


def batchnorm_train_forward(
    op: OpLike, inputs: list[np.ndarray], params: Mapping[str, np.ndarray]
) -> list[np.ndarray]:
    """Normalise with the batch's own statistics (mean and population variance over every
    axis but 1, float64), and update the running ones:
    ``running = given * momentum + batch * (1 - momentum)``."""
    x = inputs[0]
    axes = (0, *range(2, x.ndim))
    x64 = x.astype(np.float64)
    mean, var = x64.mean(axis=axes), x64.var(axis=axes)
    a, b = batchnorm_scale_shift({**params, "mean": mean, "var": var}, op.attrs["epsilon"])
    shape = (1, -1) + (1,) * (x.ndim - 2)
    y = x64 * a.reshape(shape) + b.reshape(shape)
    m = op.attrs["momentum"]
    run_mean = params["mean"].astype(np.float64) * m + mean * (1 - m)
    run_var = params["var"].astype(np.float64) * m + var * (1 - m)
    return [t.astype(x.dtype) for t in (y, run_mean, run_var)]


register_op(
    OpDef(
        "BatchNormTrain",
        (1, 1),
        3,
        {"epsilon": AttrSpec("float", 1e-5), "momentum": AttrSpec("float", 0.9)},
        _infer_train,
        batchnorm_train_forward,
        params=_ROLES,
        fed_roles=_ROLES,
        doc="batch normalisation in training mode: the batch's statistics, and the running "
        "mean and variance updated by momentum (ONNX BatchNormalization, training_mode 1)",
    )
)


# -- LRN, LayerNorm, InstanceNorm --------------------------------------------------------------


def _infer_lrn(
    op: OpLike, ins: list[TensorType], params: Mapping[str, np.ndarray]
) -> list[TensorType]:
    x = ins[0]
    need_float(op, x)
    if x.ndim < 3:
        raise fail(op, f"input must have rank >= 3 (N, C, ...), got {list(x.shape)}")
    if op.attrs["size"] <= 0:
        raise fail(op, f"size must be > 0, got {op.attrs['size']}")
    return [x]


def lrn_forward(
    op: OpLike, inputs: list[np.ndarray], params: Mapping[str, np.ndarray]
) -> list[np.ndarray]:
    """``x / (bias + alpha / size * sum_{window over C} x**2) ** beta`` (ONNX LRN).

    The window of channel c is ``[c - floor((size-1)/2), c + ceil((size-1)/2)]``; the sums
    are differences of a cumulative sum over channels (float64), one pass for any size.
    """
    a = op.attrs
    x = inputs[0]
    size = a["size"]
    c = x.shape[1]
    lo, hi = (size - 1) // 2, -(-(size - 1) // 2)
    sq = x.astype(np.float64) ** 2
    csum = np.cumsum(sq, axis=1)
    csum = np.concatenate([np.zeros_like(csum[:, :1]), csum], axis=1)
    ch = np.arange(c)
    top = np.minimum(ch + hi + 1, c)
    bottom = np.maximum(ch - lo, 0)
    window = np.take(csum, top, axis=1) - np.take(csum, bottom, axis=1)
    denom = (a["bias"] + a["alpha"] / size * window) ** a["beta"]
    return [(x / denom).astype(x.dtype)]


def _infer_layernorm(
    op: OpLike, ins: list[TensorType], params: Mapping[str, np.ndarray]
) -> list[TensorType]:
    x = ins[0]
    need_float(op, x)
    axis = op.attrs["axis"]
    if not -x.ndim <= axis < x.ndim:
        raise fail(op, f"axis {axis} is out of range for rank {x.ndim}")
    axis %= x.ndim
    for role in ("scale", "bias"):
        p = params.get(role)
        if p is not None:
            try:
                np.broadcast_shapes(p.shape, x.shape[axis:])
            except ValueError:
                raise fail(
                    op, f"{role} shape {list(p.shape)} does not fit {list(x.shape[axis:])}"
                ) from None
    return [x]


def layernorm_forward(
    op: OpLike, inputs: list[np.ndarray], params: Mapping[str, np.ndarray]
) -> list[np.ndarray]:
    """Normalise over the axes from ``axis`` on (float64 statistics), then scale and bias."""
    x = inputs[0]
    axis = op.attrs["axis"] % x.ndim
    axes = tuple(range(axis, x.ndim))
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=axes, keepdims=True)
    var = ((x64 - mean) ** 2).mean(axis=axes, keepdims=True)
    y = (x64 - mean) / np.sqrt(var + op.attrs["epsilon"]) * params["scale"].astype(np.float64)
    if params.get("bias") is not None:
        y = y + params["bias"].astype(np.float64)
    return [y.astype(x.dtype)]


def _infer_instnorm(
    op: OpLike, ins: list[TensorType], params: Mapping[str, np.ndarray]
) -> list[TensorType]:
    x = ins[0]
    need_float(op, x)
    if x.ndim < 3:
        raise fail(op, f"input must have rank >= 3 (N, C, ...), got {list(x.shape)}")
    for role in ("scale", "bias"):
        if params[role].shape != (x.shape[1],):
            raise fail(op, f"{role} must have shape [{x.shape[1]}], got {list(params[role].shape)}")
    return [x]


def instnorm_forward(
    op: OpLike, inputs: list[np.ndarray], params: Mapping[str, np.ndarray]
) -> list[np.ndarray]:
    """Normalise each (sample, channel) over its spatial axes, then per-channel scale/bias."""
    x = inputs[0]
    axes = tuple(range(2, x.ndim))
    shape = (1, -1) + (1,) * (x.ndim - 2)
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=axes, keepdims=True)
    var = ((x64 - mean) ** 2).mean(axis=axes, keepdims=True)
    y = (x64 - mean) / np.sqrt(var + op.attrs["epsilon"])
    y = y * params["scale"].astype(np.float64).reshape(shape)
    y = y + params["bias"].astype(np.float64).reshape(shape)
    return [y.astype(x.dtype)]


register_op(
    OpDef(
        "LRN",
        (1, 1),
        1,
        {
            "size": AttrSpec("int", doc="channels in the window"),
            "alpha": AttrSpec("float", 1e-4),
            "beta": AttrSpec("float", 0.75),
            "bias": AttrSpec("float", 1.0),
        },
        _infer_lrn,
        lrn_forward,
        doc="local response normalisation across channels (AlexNet, GoogLeNet)",
    )
)
register_op(
    OpDef(
        "LayerNorm",
        (1, 1),
        1,
        {"axis": AttrSpec("int", -1), "epsilon": AttrSpec("float", 1e-5)},
        _infer_layernorm,
        layernorm_forward,
        params=("scale",),
        optional_params=("bias",),
        fed_roles=("scale", "bias"),
        doc="layer normalisation over the axes from axis on (ONNX LayerNormalization)",
    )
)
register_op(
    OpDef(
        "InstanceNorm",
        (1, 1),
        1,
        {"epsilon": AttrSpec("float", 1e-5)},
        _infer_instnorm,
        instnorm_forward,
        params=("scale", "bias"),
        fed_roles=("scale", "bias"),
        doc="instance normalisation per sample and channel",
    )
)
