"""Per-channel affine operators of a float network: recognised, chained and folded.

A batch normalisation in inference form, and a ``Mul``, ``Add``, ``Sub`` or ``Div`` of a
tensor by a constant that is the same over every pixel (per channel or per tensor), is
``y = a[c] * x + b[c]`` per channel ``c`` (axis 1). Networks exported from Caffe2 spell
their batch normalisations this way (``Mul`` then ``Add`` by per-channel constants, after a
convolution or, pre-activation, after a concatenation). The quantizer
(`xrt.quant.quantize_network`) uses these helpers to

* fold a chain of them that alone consumes a convolution or dense layer into its weights
  and bias before quantizing (``W' = a * W``, ``b' = a * bias + b``), as onnxruntime's
  graph optimizer folds a BatchNormalization into the convolution before it;
* turn any other chain over a rank-4 tensor into one depthwise 1x1 convolution
  (``QConv2d`` with ``groups = C``), whose per-channel weight, bias and requantization are
  the integer form of ``a`` and ``b`` (`affine_weights`).

Everything is computed in float64 from the network's float32 constants.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from xrt.network import Network, Operator
from xrt.ops import intmath
from xrt.ops.norm import batchnorm_scale_shift

__all__ = [
    "AFFINE_OPS",
    "AffineChain",
    "affine_chain",
    "affine_step",
    "affine_weights",
    "following_chain",
]

AFFINE_OPS = ("BatchNorm", "Mul", "Add", "Sub", "Div")
"""Operator types that can be a per-channel affine map (see `affine_step`)."""

_BIAS_BITS = 23
"""`affine_weights` keeps ``|b_q| <= 2**23``: far from the int32 accumulator's bound."""


@dataclass(frozen=True)
class AffineChain:
    """Consecutive affine operators from `source`: ``result = a[c] * source + b[c]``.

    Attributes:
        ops: The operators, in order (each the only consumer of the one before).
        source: The value the chain reads.
        result: The value of the last operator.
        a, b: Per-channel float64 factors and offsets (length C).
    """

    ops: tuple[Operator, ...]
    source: str
    result: str
    a: np.ndarray
    b: np.ndarray


def _constant(net: Network, value: str) -> np.ndarray | None:
    """The array of `value` when a Constant operator produces it, else None."""
    op = net.producer(value)
    if op is None or op.op_type != "Constant":
        return None
    arr = net.params[op.params["value"]]
    return np.asarray(arr, dtype=np.float64) if np.issubdtype(arr.dtype, np.floating) else None


def _per_channel(arr: np.ndarray, shape: tuple[int, ...]) -> np.ndarray | None:
    """`arr` as C values when it broadcasts against `shape` (N, C, ...) as one value per
    channel (axis 1) or one for all, without changing `shape`; else None."""
    if arr.ndim > len(shape) or len(shape) < 2:
        return None
    full = (1,) * (len(shape) - arr.ndim) + arr.shape
    c = shape[1]
    if any(d != 1 for i, d in enumerate(full) if i != 1) or full[1] not in (1, c):
        return None
    return np.broadcast_to(arr.reshape(-1), (c,)).astype(np.float64)


def affine_step(net: Network, op: Operator, x: str) -> tuple[np.ndarray, np.ndarray] | None:
    """``(a, b)`` with ``op(x) = a * x + b`` per channel, or None when `op` is not such a map
    of its input `x` (its other operand not a per-channel or per-tensor constant)."""
    t = net.values[x]
    if not t.dtype.is_float or not net.values[op.outputs[0]].dtype.is_float:
        return None
    if net.values[op.outputs[0]].shape != t.shape or len(t.shape) < 2:
        return None
    c = t.shape[1]
    if op.op_type == "BatchNorm":
        if op.inputs[0] != x:
            return None
        a, b = batchnorm_scale_shift(net.op_params(op), float(op.attrs["epsilon"]))
        return a, b
    if op.op_type not in ("Mul", "Add", "Sub", "Div") or len(op.inputs) != 2 or x not in op.inputs:
        return None
    k = 1 - op.inputs.index(x)
    if op.inputs[0] == op.inputs[1]:
        return None
    arr = _constant(net, op.inputs[k])
    vec = None if arr is None else _per_channel(arr, t.shape)
    if vec is None or not np.all(np.isfinite(vec)):
        return None
    one, zero = np.ones(c), np.zeros(c)
    if op.op_type == "Mul":
        return vec, zero
    if op.op_type == "Add":
        return one, vec
    if op.op_type == "Sub":
        return (one, -vec) if k == 1 else (-one, vec)
    if k == 1 and np.all(vec != 0):  # Div(x, c); Div(c, x) is not affine
        return 1.0 / vec, zero
    return None


def affine_chain(net: Network, first: Operator, x: str) -> AffineChain | None:
    """The longest chain of affine operators starting with `first` (reading `x`), each
    the only consumer of the previous one's output, which is not a network output; None
    when `first` is not affine."""
    step = affine_step(net, first, x)
    if step is None:
        return None
    a, b = step
    ops = [first]
    out = first.outputs[0]
    while out not in net.outputs:
        users = net.consumers(out)
        if len(users) != 1:
            break
        nxt = affine_step(net, users[0], out)
        if nxt is None:
            break
        a2, b2 = nxt
        a, b = a2 * a, a2 * b + b2
        ops.append(users[0])
        out = users[0].outputs[0]
    return AffineChain(tuple(ops), x, out, a, b)


def following_chain(net: Network, value: str) -> AffineChain | None:
    """The affine chain that alone consumes `value` (a convolution's output), or None."""
    if value in net.outputs:
        return None
    users = net.consumers(value)
    if len(users) != 1 or users[0].op_type not in AFFINE_OPS:
        return None
    return affine_chain(net, users[0], value)


def affine_weights(
    a: np.ndarray, b: np.ndarray, s_in: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The depthwise 1x1 convolution of ``a * x + b`` for an input at scale `s_in`:
    ``(w_q (C, 1, 1, 1) int8, b_q (C,) int32, s_w (C,))``.

    Per channel ``s_w = max(|a| / 127, |b| / (s_in * 2**23))`` (1.0 when both are 0), so
    ``w_q = rint(a / s_w)`` is ``+-127`` unless the offset dominates, and the bias
    ``b_q = rint(b / (s_in * s_w))`` stays within ``2**23``: the accumulator
    ``b_q + 128 * |w_q|`` can never leave int32, and the NPU can prove it.
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    s_w = np.maximum(np.abs(a) / intmath.WEIGHT_QMAX, np.abs(b) / (s_in * 2.0**_BIAS_BITS))
    s_w = np.where(s_w > 0, s_w, 1.0)
    w_q = np.clip(np.rint(a / s_w), -intmath.WEIGHT_QMAX, intmath.WEIGHT_QMAX).astype(np.int8)
    b_q = intmath.quantize_bias(b, s_in * s_w)
    return w_q.reshape(-1, 1, 1, 1), b_q, s_w
