"""Elementwise math: unary functions, binary arithmetic and comparisons, variadic
reductions of several inputs, and ``Where``.

ONNX semantics throughout: numpy (multidirectional) broadcasting, inputs of one dtype
(``Pow``'s exponent may differ, ``Where``'s condition is Bool), comparisons produce Bool.
Integer ``Div`` truncates towards zero (C semantics, as onnxruntime). Kernels return
arrays of the declared dtype, 0-d included (numpy turns 0-d results into scalars; the
kernels wrap them back).

In a quantized network the unary float functions become ``QLut`` tables (docs/
quantization.md); the others run in float.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import numpy as np

from xrt.dtypes import DataType, TensorType
from xrt.errors import ErrorCode
from xrt.ops._common import fail
from xrt.ops._registry import AttrSpec, OpDef, OpLike, register_op

__all__ = ["BINARY_OPS", "COMPARE_OPS", "UNARY_FLOAT_OPS", "VARIADIC_OPS", "broadcast_types"]

_ERFC_COEFFS = (
    -1.26551223,
    1.00002368,
    0.37409196,
    0.09678418,
    -0.18628806,
    0.27886807,
    -1.13520398,
    1.48851587,
    -0.82215223,
    0.17087277,
)  # Numerical Recipes' erfcc: fractional error below 1.2e-7 everywhere


def _erf_array(x: np.ndarray) -> np.ndarray:
    """erf in float64, vectorised: a Taylor series for |x| < 0.5 (exact to float64), the
    Chebyshev fit of erfc beyond (relative error below 1.2e-7, float32's resolution)."""
    x = np.asarray(x, dtype=np.float64)
    z = np.abs(x)
    t = 1.0 / (1.0 + 0.5 * z)
    poly = np.zeros_like(z)
    for c in reversed(_ERFC_COEFFS[1:]):
        poly = (poly + c) * t
    erfc = t * np.exp(-z * z + _ERFC_COEFFS[0] + poly)
    far = np.sign(x) * (1.0 - erfc)
    x2 = x * x
    term = x.copy()
    series = x.copy()
    for n in range(1, 14):
        term = -term * x2 / n
        series = series + term / (2 * n + 1)
    near = series * (2.0 / math.sqrt(math.pi))
    return np.where(z < 0.5, near, far)


def _arr(y: object, dtype: np.dtype) -> np.ndarray:
    return np.asarray(y).astype(dtype, copy=False)


def _need_numeric(op: OpLike, t: TensorType, what: str) -> None:
    if t.dtype is DataType.BOOL:
        raise fail(op, f"{what} must be numeric, got Bool", ErrorCode.WRONG_TYPE)


def _same_dtype(op: OpLike, ins: list[TensorType]) -> None:
    for i, t in enumerate(ins[1:], 1):
        if t.dtype is not ins[0].dtype:
            raise fail(
                op,
                f"input {i} is {t.dtype.manual_name}, input 0 is {ins[0].dtype.manual_name}",
                ErrorCode.WRONG_TYPE,
            )


def broadcast_types(op: OpLike, ins: list[TensorType]) -> tuple[int, ...]:
    """The broadcast shape of `ins`; XrtError 11003 naming the shapes when they do not fit."""
    try:
        return tuple(np.broadcast_shapes(*(t.shape for t in ins)))
    except ValueError:
        shapes = [list(t.shape) for t in ins]
        raise fail(op, f"shapes {shapes} do not broadcast") from None


def _layout(ins: list[TensorType], shape: tuple[int, ...]) -> str:
    for t in ins:
        if t.shape == shape:
            return t.layout
    return "*"


# -- unary --------------------------------------------------------------------------------


def _gelu(x: np.ndarray, approximate: str) -> np.ndarray:
    x64 = x.astype(np.float64)
    if approximate == "tanh":
        inner = math.sqrt(2.0 / math.pi) * (x64 + 0.044715 * x64**3)
        return 0.5 * x64 * (1.0 + np.tanh(inner))
    return 0.5 * x64 * (1.0 + _erf_array(x64 / math.sqrt(2.0)))


def _softplus(x: np.ndarray) -> np.ndarray:
    return np.logaddexp(0, x)


UNARY_FLOAT_OPS: dict[str, tuple[Callable[[np.ndarray, Mapping], np.ndarray], dict, str]] = {
    "Sqrt": (lambda x, a: np.sqrt(x), {}, "square root"),
    "Exp": (lambda x, a: np.exp(x), {}, "e ** x"),
    "Log": (lambda x, a: np.log(x), {}, "natural logarithm"),
    "Tanh": (lambda x, a: np.tanh(x), {}, "hyperbolic tangent"),
    "Erf": (lambda x, a: _erf_array(x), {}, "error function"),
    "Reciprocal": (lambda x, a: 1 / x, {}, "1 / x"),
    "Sin": (lambda x, a: np.sin(x), {}, "sine"),
    "Cos": (lambda x, a: np.cos(x), {}, "cosine"),
    "Softplus": (lambda x, a: _softplus(x), {}, "log(1 + e ** x)"),
    "Softsign": (lambda x, a: x / (1 + np.abs(x)), {}, "x / (1 + |x|)"),
    "Mish": (lambda x, a: x * np.tanh(_softplus(x)), {}, "x * tanh(softplus(x))"),
    "Floor": (lambda x, a: np.floor(x), {}, "round down"),
    "Ceil": (lambda x, a: np.ceil(x), {}, "round up"),
    "Round": (lambda x, a: np.rint(x), {}, "round half to even"),
    "Gelu": (
        lambda x, a: _gelu(x, a["approximate"]),
        {"approximate": AttrSpec("str", "none", None, "'none' (erf) or 'tanh'")},
        "x * Phi(x) (Gaussian error linear unit)",
    ),
    "Elu": (
        lambda x, a: np.where(x >= 0, x, a["alpha"] * np.expm1(np.minimum(x, 0))),
        {"alpha": AttrSpec("float", 1.0)},
        "x if x >= 0 else alpha * (e ** x - 1)",
    ),
    "Selu": (
        lambda x, a: a["gamma"] * np.where(x > 0, x, a["alpha"] * np.expm1(np.minimum(x, 0))),
        {
            "alpha": AttrSpec("float", 1.67326319217681884765625),
            "gamma": AttrSpec("float", 1.05070102214813232421875),
        },
        "gamma * (x if x > 0 else alpha * (e ** x - 1))",
    ),
    "ThresholdedRelu": (
        lambda x, a: np.where(x > a["alpha"], x, 0),
        {"alpha": AttrSpec("float", 1.0)},
        "x if x > alpha else 0",
    ),
}
"""Float-only unary ops: op type -> (function(x, attrs), attribute schema, doc)."""

_UNARY_NUMERIC: dict[str, tuple[Callable[[np.ndarray], np.ndarray], str]] = {
    "Abs": (np.abs, "|x|"),
    "Neg": (np.negative, "-x"),
    "Sign": (np.sign, "-1, 0 or 1"),
}


def _infer_unary_float(
    op: OpLike, ins: list[TensorType], params: Mapping[str, np.ndarray]
) -> list[TensorType]:
    x = ins[0]
    if not x.dtype.is_float:
        raise fail(op, f"input must be float, got {x.dtype.manual_name}", ErrorCode.WRONG_TYPE)
    if op.op_type == "Gelu" and op.attrs["approximate"] not in ("none", "tanh"):
        raise fail(op, f"approximate must be 'none' or 'tanh', got {op.attrs['approximate']!r}")
    return [x]


def _unary_float_forward(
    op: OpLike, inputs: list[np.ndarray], params: Mapping[str, np.ndarray]
) -> list[np.ndarray]:
    """The function of `UNARY_FLOAT_OPS`, in the input's float dtype."""
    x = inputs[0]
    fn = UNARY_FLOAT_OPS[op.op_type][0]
    with np.errstate(all="ignore"):  # log(0), sqrt(-1)... give inf/NaN as in ONNX
        return [_arr(fn(x, op.attrs), x.dtype)]


def _infer_unary_numeric(
    op: OpLike, ins: list[TensorType], params: Mapping[str, np.ndarray]
) -> list[TensorType]:
    _need_numeric(op, ins[0], "input")
    return [TensorType(ins[0].dtype, ins[0].shape, ins[0].layout)]


def _unary_numeric_forward(
    op: OpLike, inputs: list[np.ndarray], params: Mapping[str, np.ndarray]
) -> list[np.ndarray]:
    """``Abs``, ``Neg``, ``Sign`` in the input's dtype (integers wrap as in C)."""
    x = inputs[0]
    with np.errstate(all="ignore"):
        return [_arr(_UNARY_NUMERIC[op.op_type][0](x), x.dtype)]


def _infer_not(
    op: OpLike, ins: list[TensorType], params: Mapping[str, np.ndarray]
) -> list[TensorType]:
    if ins[0].dtype is not DataType.BOOL:
        raise fail(op, f"input must be Bool, got {ins[0].dtype.manual_name}", ErrorCode.WRONG_TYPE)
    return [ins[0]]


def _not_forward(
    op: OpLike, inputs: list[np.ndarray], params: Mapping[str, np.ndarray]
) -> list[np.ndarray]:
    """Logical not."""
    return [np.asarray(np.logical_not(inputs[0]))]


# -- binary and variadic --------------------------------------------------------------------


def _int_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if np.any(b == 0):
        raise ZeroDivisionError("integer division by zero")
    q = np.abs(a) // np.abs(b)
    return np.where((a < 0) != (b < 0), -q, q)


def _div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype.kind in "iu":
        return _int_div(a.astype(np.int64), b.astype(np.int64))
    return a / b


def _mod(a: np.ndarray, b: np.ndarray, fmod: int) -> np.ndarray:
    if fmod:
        return np.fmod(a, b)
    if a.dtype.kind == "f":
        return np.mod(a, b)  # sign of the divisor, as Python
    if np.any(b == 0):
        raise ZeroDivisionError("integer modulo by zero")
    return np.mod(a, b)


BINARY_OPS: dict[str, tuple[Callable[..., np.ndarray], str]] = {
    "Sub": (lambda a, b, at: np.subtract(a, b), "a - b"),
    "Div": (lambda a, b, at: _div(a, b), "a / b (integers: truncated towards zero)"),
    "Pow": (lambda a, b, at: np.power(a.astype(np.float64), b), "a ** b"),
    "Mod": (lambda a, b, at: _mod(a, b, at["fmod"]), "remainder (fmod=1: sign of a)"),
    "PRelu": (lambda a, b, at: np.where(a < 0, a * b, a), "a if a >= 0 else slope * a"),
}
"""Binary arithmetic: op type -> (function(a, b, attrs), doc). Output dtype: input 0's."""

COMPARE_OPS: dict[str, tuple[Callable[[np.ndarray, np.ndarray], np.ndarray], str]] = {
    "Equal": (np.equal, "a == b"),
    "Less": (np.less, "a < b"),
    "LessOrEqual": (np.less_equal, "a <= b"),
    "Greater": (np.greater, "a > b"),
    "GreaterOrEqual": (np.greater_equal, "a >= b"),
    "And": (np.logical_and, "a and b (Bool)"),
    "Or": (np.logical_or, "a or b (Bool)"),
    "Xor": (np.logical_xor, "a xor b (Bool)"),
}
"""Comparisons and logic: op type -> (function, doc). Output dtype: Bool."""

VARIADIC_OPS: dict[str, tuple[Callable[[list[np.ndarray]], np.ndarray], str]] = {
    "Sum": (lambda xs: _fold(np.add, xs), "elementwise sum of all inputs"),
    "Max": (lambda xs: _fold(np.maximum, xs), "elementwise maximum of all inputs"),
    "Min": (lambda xs: _fold(np.minimum, xs), "elementwise minimum of all inputs"),
    "Mean": (
        lambda xs: _fold(np.add, xs) / np.asarray(len(xs), xs[0].dtype),
        "elementwise mean of all inputs",
    ),
}
"""Variadic ops (one or more inputs, broadcasting): op type -> (function, doc)."""


def _fold(fn: Callable[[np.ndarray, np.ndarray], np.ndarray], xs: list[np.ndarray]) -> np.ndarray:
    out = xs[0]
    for x in xs[1:]:
        out = fn(out, x)
    return out


def _infer_binary(
    op: OpLike, ins: list[TensorType], params: Mapping[str, np.ndarray]
) -> list[TensorType]:
    a, b = ins
    _need_numeric(op, a, "input 0")
    _need_numeric(op, b, "input 1")
    if op.op_type == "PRelu" or op.op_type != "Pow":
        _same_dtype(op, ins)
    if op.op_type in ("Pow", "Mod") and a.dtype is DataType.BF16:
        raise fail(op, "BF16 is not supported", ErrorCode.WRONG_TYPE)
    shape = broadcast_types(op, ins)
    if op.op_type == "PRelu" and shape != a.shape:
        raise fail(op, f"slope shape {list(b.shape)} must broadcast to {list(a.shape)}")
    return [TensorType(a.dtype, shape, _layout(ins, shape))]


def _binary_forward(
    op: OpLike, inputs: list[np.ndarray], params: Mapping[str, np.ndarray]
) -> list[np.ndarray]:
    """The function of `BINARY_OPS` with broadcasting, in input 0's dtype."""
    a, b = inputs
    with np.errstate(all="ignore"):
        try:
            y = BINARY_OPS[op.op_type][0](a, b, op.attrs)
        except ZeroDivisionError as exc:
            raise fail(op, str(exc)) from None
    return [_arr(y, a.dtype)]


def _infer_compare(
    op: OpLike, ins: list[TensorType], params: Mapping[str, np.ndarray]
) -> list[TensorType]:
    _same_dtype(op, ins)
    logic = op.op_type in ("And", "Or", "Xor")
    if logic and ins[0].dtype is not DataType.BOOL:
        raise fail(op, "inputs must be Bool", ErrorCode.WRONG_TYPE)
    shape = broadcast_types(op, ins)
    return [TensorType(DataType.BOOL, shape, _layout(ins, shape))]


def _compare_forward(
    op: OpLike, inputs: list[np.ndarray], params: Mapping[str, np.ndarray]
) -> list[np.ndarray]:
    """The comparison of `COMPARE_OPS` with broadcasting, as Bool."""
    return [np.asarray(COMPARE_OPS[op.op_type][0](inputs[0], inputs[1]), dtype=np.bool_)]


def _infer_variadic(
    op: OpLike, ins: list[TensorType], params: Mapping[str, np.ndarray]
) -> list[TensorType]:
    for i, t in enumerate(ins):
        _need_numeric(op, t, f"input {i}")
    _same_dtype(op, ins)
    if op.op_type == "Mean" and not ins[0].dtype.is_float:
        raise fail(op, "Mean needs float inputs", ErrorCode.WRONG_TYPE)
    shape = broadcast_types(op, ins)
    return [TensorType(ins[0].dtype, shape, _layout(ins, shape))]


def _variadic_forward(
    op: OpLike, inputs: list[np.ndarray], params: Mapping[str, np.ndarray]
) -> list[np.ndarray]:
    """``Sum`` / ``Max`` / ``Min`` / ``Mean`` over all inputs, with broadcasting."""
    y = VARIADIC_OPS[op.op_type][0](list(inputs))
    shape = np.broadcast_shapes(*(x.shape for x in inputs))
    return [np.broadcast_to(_arr(y, inputs[0].dtype), shape).copy()]


def _infer_where(
    op: OpLike, ins: list[TensorType], params: Mapping[str, np.ndarray]
) -> list[TensorType]:
    cond, a, b = ins
    if cond.dtype is not DataType.BOOL:
        raise fail(
            op, f"condition must be Bool, got {cond.dtype.manual_name}", ErrorCode.WRONG_TYPE
        )
    _same_dtype(op, [a, b])
    shape = broadcast_types(op, ins)
    return [TensorType(a.dtype, shape, _layout(ins, shape))]


def _where_forward(
    op: OpLike, inputs: list[np.ndarray], params: Mapping[str, np.ndarray]
) -> list[np.ndarray]:
    """``a`` where the condition holds, else ``b`` (broadcasting)."""
    cond, a, b = inputs
    return [_arr(np.where(cond, a, b), a.dtype)]


for _name, (_fn, _attrs, _doc) in UNARY_FLOAT_OPS.items():
    register_op(OpDef(_name, (1, 1), 1, _attrs, _infer_unary_float, _unary_float_forward, doc=_doc))
for _name, (_fn1, _doc) in _UNARY_NUMERIC.items():
    register_op(OpDef(_name, (1, 1), 1, {}, _infer_unary_numeric, _unary_numeric_forward, doc=_doc))
register_op(OpDef("Not", (1, 1), 1, {}, _infer_not, _not_forward, doc="logical not (Bool)"))
for _name, (_fn2, _doc) in BINARY_OPS.items():
    _battrs = (
        {"fmod": AttrSpec("int", 0, None, "1: C fmod, 0: Python-style mod")}
        if _name == "Mod"
        else {}
    )
    register_op(OpDef(_name, (2, 2), 1, _battrs, _infer_binary, _binary_forward, doc=_doc))
for _name, (_fn3, _doc) in COMPARE_OPS.items():
    register_op(OpDef(_name, (2, 2), 1, {}, _infer_compare, _compare_forward, doc=_doc))
for _name, (_fn4, _doc) in VARIADIC_OPS.items():
    register_op(OpDef(_name, (1, None), 1, {}, _infer_variadic, _variadic_forward, doc=_doc))
register_op(
    OpDef("Where", (3, 3), 1, {}, _infer_where, _where_forward, doc="select a or b by a Bool mask")
)
