"""Layout ops: ``Reshape``, ``Squeeze``, ``Unsqueeze``, ``Flatten``, ``Transpose``,
``Identity`` and ``Constant``.

All are dtype-generic and keep a quantized input's scale, so quantized networks use them
unchanged. The importer writes ONNX Squeeze and Unsqueeze with constant axes as a
``Reshape``; ``Squeeze`` and ``Unsqueeze`` are for axes fed at run time.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from xrt.dtypes import DataType, QuantParams, TensorType
from xrt.errors import ErrorCode
from xrt.ops._common import fail, norm_axis, prod
from xrt.ops._registry import AttrSpec, OpDef, OpLike, register_op

__all__ = [
    "constant_forward",
    "flatten_forward",
    "identity_forward",
    "reshape_forward",
    "resolve_reshape",
    "squeeze_shape",
    "transpose_forward",
]


def resolve_reshape(op: OpLike, in_shape: tuple[int, ...], spec: list[int]) -> tuple[int, ...]:
    """ONNX Reshape target: 0 copies the input dimension (a literal 0 with ``allowzero``),
    one -1 takes what is left."""
    allowzero = bool(op.attrs.get("allowzero", False))
    if allowzero and 0 in spec and -1 in spec:
        raise fail(op, f"shape {spec}: allowzero forbids a 0 beside a -1")
    out: list[int] = []
    for i, d in enumerate(spec):
        if d == 0 and not allowzero:
            if i >= len(in_shape):
                raise fail(op, f"shape {spec}: 0 at position {i} has no input dimension to copy")
            out.append(in_shape[i])
        elif d < -1:
            raise fail(op, f"shape {spec} has a negative dimension {d}")
        else:
            out.append(d)
    total = prod(in_shape)
    if out.count(-1) > 1:
        raise fail(op, f"shape {spec} has more than one -1")
    if -1 in out:
        known = prod([d for d in out if d != -1])
        if known == 0 or total % known:
            raise fail(op, f"cannot reshape {list(in_shape)} to {spec}")
        out[out.index(-1)] = total // known
    if prod(out) != total:
        raise fail(op, f"cannot reshape {list(in_shape)} ({total} elements) to {out}")
    return tuple(out)


def _infer_reshape(
    op: OpLike, ins: list[TensorType], params: Mapping[str, np.ndarray]
) -> list[TensorType]:
    x = ins[0]
    return [TensorType(x.dtype, resolve_reshape(op, x.shape, op.attrs["shape"]), "*", x.quant)]


def reshape_forward(
    op: OpLike, inputs: list[np.ndarray], params: Mapping[str, np.ndarray]
) -> list[np.ndarray]:
    """Reshape to the resolved ``shape`` attribute (a view when possible)."""
    x = inputs[0]
    return [x.reshape(resolve_reshape(op, x.shape, op.attrs["shape"]))]


def squeeze_shape(op: OpLike, shape: tuple[int, ...]) -> tuple[int, ...]:
    """The output shape of ``Squeeze`` (drop the length-1 ``axes``) or ``Unsqueeze``
    (insert length-1 ``axes`` of the output) on an input of `shape`."""
    axes = op.attrs["axes"]
    rank = len(shape) + (len(axes) if op.op_type == "Unsqueeze" else 0)
    norm = [norm_axis(op, a, rank) for a in axes]
    if len(set(norm)) != len(norm):
        raise fail(op, f"axes {axes} repeat an axis")
    if op.op_type == "Squeeze":
        bad = [a for a in norm if shape[a] != 1]
        if bad:
            raise fail(op, f"cannot squeeze axes {bad} of shape {list(shape)}: not of length 1")
        return tuple(d for i, d in enumerate(shape) if i not in norm)
    dims = iter(shape)
    return tuple(1 if i in norm else next(dims) for i in range(rank))


def _infer_squeeze(
    op: OpLike, ins: list[TensorType], params: Mapping[str, np.ndarray]
) -> list[TensorType]:
    x = ins[0]
    return [TensorType(x.dtype, squeeze_shape(op, x.shape), "*", x.quant)]


def _squeeze_forward(
    op: OpLike, inputs: list[np.ndarray], params: Mapping[str, np.ndarray]
) -> list[np.ndarray]:
    """Drop (Squeeze) or insert (Unsqueeze) length-1 axes (a view)."""
    x = inputs[0]
    return [x.reshape(squeeze_shape(op, x.shape))]


def _infer_flatten(
    op: OpLike, ins: list[TensorType], params: Mapping[str, np.ndarray]
) -> list[TensorType]:
    x = ins[0]
    axis = norm_axis(op, op.attrs["axis"], x.ndim, allow_end=True)
    return [TensorType(x.dtype, (prod(x.shape[:axis]), prod(x.shape[axis:])), "*", x.quant)]


def flatten_forward(
    op: OpLike, inputs: list[np.ndarray], params: Mapping[str, np.ndarray]
) -> list[np.ndarray]:
    """2-D view: ``(prod(shape[:axis]), prod(shape[axis:]))``."""
    x = inputs[0]
    axis = norm_axis(op, op.attrs["axis"], x.ndim, allow_end=True)
    return [x.reshape(prod(x.shape[:axis]), prod(x.shape[axis:]))]


def _perm(op: OpLike, ndim: int) -> list[int]:
    perm = op.attrs["perm"]
    if not perm:
        return list(range(ndim))[::-1]
    if sorted(perm) != list(range(ndim)):
        raise fail(op, f"perm {perm} is not a permutation of {ndim} axes")
    return list(perm)


def _infer_transpose(
    op: OpLike, ins: list[TensorType], params: Mapping[str, np.ndarray]
) -> list[TensorType]:
    x = ins[0]
    perm = _perm(op, x.ndim)
    layout = "".join(x.layout[p] for p in perm) if x.layout != "*" else "*"
    return [TensorType(x.dtype, tuple(x.shape[p] for p in perm), layout, x.quant)]


def transpose_forward(
    op: OpLike, inputs: list[np.ndarray], params: Mapping[str, np.ndarray]
) -> list[np.ndarray]:
    """Permute the axes (empty ``perm`` reverses them, as in ONNX)."""
    x = inputs[0]
    return [np.ascontiguousarray(np.transpose(x, _perm(op, x.ndim)))]


def _infer_identity(
    op: OpLike, ins: list[TensorType], params: Mapping[str, np.ndarray]
) -> list[TensorType]:
    return [ins[0]]


def identity_forward(
    op: OpLike, inputs: list[np.ndarray], params: Mapping[str, np.ndarray]
) -> list[np.ndarray]:
    """The input itself."""
    return [inputs[0]]


def _infer_constant(
    op: OpLike, ins: list[TensorType], params: Mapping[str, np.ndarray]
) -> list[TensorType]:
    value = params["value"]
    dtype = DataType.from_numpy(value.dtype)
    scale = op.attrs["scale"]
    quant = None
    if scale is not None:
        if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not scale > 0:
            raise fail(
                op, f"scale must be a positive number or null, got {scale!r}", ErrorCode.WRONG_TYPE
            )
        if dtype is not DataType.SINT8:
            raise fail(op, "a quantized constant must be int8", ErrorCode.WRONG_TYPE)
        quant = QuantParams(float(scale))
    return [TensorType(dtype, value.shape, "*", quant)]


def constant_forward(
    op: OpLike, inputs: list[np.ndarray], params: Mapping[str, np.ndarray]
) -> list[np.ndarray]:
    """The ``value`` parameter."""
    return [params["value"]]


register_op(
    OpDef(
        "Reshape",
        (1, 1),
        1,
        {
            "shape": AttrSpec("ints", doc="target shape; 0 copies a dimension, one -1 is inferred"),
            "allowzero": AttrSpec("bool", False, None, "a 0 in shape is a zero-size dimension"),
        },
        _infer_reshape,
        reshape_forward,
        fed_roles=("shape",),
        shape_roles=("shape",),
        doc="reshape (ONNX semantics, with its allowzero)",
    )
)
for _name, _doc in (
    ("Squeeze", "drop length-1 axes (ONNX Squeeze with axes fed at run time)"),
    ("Unsqueeze", "insert length-1 axes (ONNX Unsqueeze with axes fed at run time)"),
):
    register_op(
        OpDef(
            _name,
            (1, 1),
            1,
            {
                "axes": AttrSpec(
                    "ints", doc="axes (of the output for Unsqueeze); negative from the end"
                )
            },
            _infer_squeeze,
            _squeeze_forward,
            fed_roles=("axes",),
            shape_roles=("axes",),
            doc=_doc,
        )
    )
register_op(
    OpDef(
        "Flatten",
        (1, 1),
        1,
        {"axis": AttrSpec("int", 1, None, "first axis of the second output dimension")},
        _infer_flatten,
        flatten_forward,
        doc="flatten to 2-D at axis",
    )
)
register_op(
    OpDef(
        "Transpose",
        (1, 1),
        1,
        {"perm": AttrSpec("ints", [], None, "axis order; empty reverses")},
        _infer_transpose,
        transpose_forward,
        doc="permute axes",
    )
)
register_op(OpDef("Identity", (1, 1), 1, {}, _infer_identity, identity_forward, doc="copy"))
register_op(
    OpDef(
        "Constant",
        (0, 0),
        1,
        {"scale": AttrSpec("json", None, None, "int8 scale of a quantized constant, else null")},
        _infer_constant,
        constant_forward,
        params=("value",),
        doc="a parameter as a value (e.g. the constant operand of an Add)",
    )
)
