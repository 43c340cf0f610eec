"""Indexing and data movement: ``Slice``, ``Split``, ``Gather``, ``Expand``, ``Tile``,
``DepthToSpace``, ``SpaceToDepth``.

All are dtype-generic and move values without arithmetic, so on int8 they keep the input's
scale and a quantized network runs them unchanged. Starts, ends, splits, shapes and
repeats are attributes: the importer reads them from constant ONNX inputs.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from xrt.dtypes import DataType, TensorType
from xrt.errors import ErrorCode
from xrt.ops._common import fail, norm_axis
from xrt.ops._registry import AttrSpec, OpDef, OpLike, register_op

__all__ = ["slice_bounds"]


# -- Slice ----------------------------------------------------------------------------------


def slice_bounds(op: OpLike, shape: tuple[int, ...]) -> tuple[slice, ...]:
    """One Python slice per axis, after ONNX's clamping rules for starts and ends."""
    a = op.attrs
    starts, ends = a["starts"], a["ends"]
    axes = a["axes"] or list(range(len(starts)))
    steps = a["steps"] or [1] * len(starts)
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise fail(op, "starts, ends, axes and steps need the same length")
    out = [slice(None)] * len(shape)
    seen = set()
    for start, end, axis, step in zip(starts, ends, axes, steps, strict=True):
        ax = norm_axis(op, axis, len(shape))
        if ax in seen:
            raise fail(op, f"axes {axes} repeat an axis")
        seen.add(ax)
        if step == 0:
            raise fail(op, "steps must not be 0")
        dim = shape[ax]
        start = start + dim if start < 0 else start
        end = end + dim if end < 0 else end
        if step > 0:
            start, end = min(max(start, 0), dim), min(max(end, 0), dim)
            out[ax] = slice(start, end, step)
        else:
            start, end = min(max(start, 0), dim - 1), min(max(end, -1), dim - 1)
            out[ax] = slice(start, None if end < 0 else end, step)
    return tuple(out)


def _infer_slice(
    op: OpLike, ins: list[TensorType], params: Mapping[str, np.ndarray]
) -> list[TensorType]:
    x = ins[0]
    sl = slice_bounds(op, x.shape)
    shape = tuple(len(range(*s.indices(d))) for s, d in zip(sl, x.shape, strict=True))
    return [TensorType(x.dtype, shape, x.layout, x.quant)]


def _slice_forward(
    op: OpLike, inputs: list[np.ndarray], params: Mapping[str, np.ndarray]
) -> list[np.ndarray]:
    """``x[starts:ends:steps]`` along ``axes`` (a copy)."""
    x = inputs[0]
    return [np.array(x[slice_bounds(op, x.shape)])]


# -- Split ----------------------------------------------------------------------------------


def _splits(op: OpLike, x: TensorType | np.ndarray, n_out: int) -> tuple[int, list[int]]:
    axis = norm_axis(op, op.attrs["axis"], len(x.shape))
    dim = x.shape[axis]
    split = list(op.attrs["split"])
    if not split:
        chunk = -(-dim // n_out)
        split = [min(chunk, max(0, dim - i * chunk)) for i in range(n_out)]
    if len(split) != n_out or any(s < 0 for s in split) or sum(split) != dim:
        raise fail(op, f"split {split} does not cut axis {axis} ({dim}) into {n_out} parts")
    return axis, split


def _infer_split(
    op: OpLike, ins: list[TensorType], params: Mapping[str, np.ndarray]
) -> list[TensorType]:
    x = ins[0]
    axis, split = _splits(op, x, len(op.outputs))
    out = []
    for s in split:
        shape = list(x.shape)
        shape[axis] = s
        out.append(TensorType(x.dtype, shape, x.layout, x.quant))
    return out


def _split_forward(
    op: OpLike, inputs: list[np.ndarray], params: Mapping[str, np.ndarray]
) -> list[np.ndarray]:
    """Cut along ``axis`` into parts of lengths ``split`` (equal parts when empty)."""
    x = inputs[0]
    axis, split = _splits(op, x, len(op.outputs))
    cuts = np.cumsum(split)[:-1]
    return [np.array(p) for p in np.split(x, cuts, axis=axis)]


# -- Gather ---------------------------------------------------------------------------------


def _infer_gather(
    op: OpLike, ins: list[TensorType], params: Mapping[str, np.ndarray]
) -> list[TensorType]:
    x, idx = ins
    if idx.dtype not in (DataType.SINT32, DataType.SINT64):
        raise fail(
            op,
            f"indices must be SInt32 or SInt64, got {idx.dtype.manual_name}",
            ErrorCode.WRONG_TYPE,
        )
    axis = norm_axis(op, op.attrs["axis"], x.ndim)
    shape = x.shape[:axis] + idx.shape + x.shape[axis + 1 :]
    return [TensorType(x.dtype, shape, "*", x.quant)]


def _gather_forward(
    op: OpLike, inputs: list[np.ndarray], params: Mapping[str, np.ndarray]
) -> list[np.ndarray]:
    """``take(x, indices, axis)``; negative indices count from the end."""
    x, idx = inputs
    axis = norm_axis(op, op.attrs["axis"], x.ndim)
    dim = x.shape[axis]
    idx = idx.astype(np.int64)
    bad = (idx < -dim) | (idx >= dim)
    if np.any(bad):
        raise fail(op, f"index {int(idx[bad].flat[0])} is out of range for axis {axis} ({dim})")
    return [np.take(x, np.where(idx < 0, idx + dim, idx), axis=axis)]


# -- Expand, Tile -----------------------------------------------------------------------------


def _expand_shape(op: OpLike, shape: tuple[int, ...]) -> tuple[int, ...]:
    try:
        return tuple(np.broadcast_shapes(shape, tuple(op.attrs["shape"])))
    except ValueError:
        raise fail(op, f"shape {list(shape)} does not expand to {op.attrs['shape']}") from None


def _infer_expand(
    op: OpLike, ins: list[TensorType], params: Mapping[str, np.ndarray]
) -> list[TensorType]:
    x = ins[0]
    return [TensorType(x.dtype, _expand_shape(op, x.shape), "*", x.quant)]


def _expand_forward(
    op: OpLike, inputs: list[np.ndarray], params: Mapping[str, np.ndarray]
) -> list[np.ndarray]:
    """Broadcast to ``shape`` (bidirectional, as ONNX Expand)."""
    x = inputs[0]
    return [np.broadcast_to(x, _expand_shape(op, x.shape)).copy()]


def _infer_tile(
    op: OpLike, ins: list[TensorType], params: Mapping[str, np.ndarray]
) -> list[TensorType]:
    x = ins[0]
    reps = op.attrs["repeats"]
    if len(reps) != x.ndim or any(r < 0 for r in reps):
        raise fail(op, f"repeats {reps} need one value >= 0 per axis ({x.ndim})")
    return [
        TensorType(x.dtype, [d * r for d, r in zip(x.shape, reps, strict=True)], x.layout, x.quant)
    ]


def _tile_forward(
    op: OpLike, inputs: list[np.ndarray], params: Mapping[str, np.ndarray]
) -> list[np.ndarray]:
    """Repeat the whole tensor ``repeats[i]`` times along axis i."""
    return [np.tile(inputs[0], op.attrs["repeats"])]


# -- DepthToSpace, SpaceToDepth -----------------------------------------------------------------


def _infer_d2s(
    op: OpLike, ins: list[TensorType], params: Mapping[str, np.ndarray]
) -> list[TensorType]:
    x = ins[0]
    b = op.attrs["blocksize"]
    if x.ndim != 4 or b <= 0:
        raise fail(op, f"needs an NCHW input and blocksize > 0, got {list(x.shape)}, {b}")
    n, c, h, w = x.shape
    if op.attrs["mode"] not in ("DCR", "CRD"):
        raise fail(op, f"mode must be DCR or CRD, got {op.attrs['mode']!r}")
    if op.op_type == "DepthToSpace":
        if c % (b * b):
            raise fail(op, f"channels {c} are not a multiple of blocksize**2 ({b * b})")
        shape = (n, c // (b * b), h * b, w * b)
    else:
        if h % b or w % b:
            raise fail(op, f"height {h} and width {w} must be multiples of blocksize {b}")
        shape = (n, c * b * b, h // b, w // b)
    return [TensorType(x.dtype, shape, x.layout, x.quant)]


def _d2s_forward(
    op: OpLike, inputs: list[np.ndarray], params: Mapping[str, np.ndarray]
) -> list[np.ndarray]:
    """Rearrange channel blocks into spatial blocks (DepthToSpace) or back (SpaceToDepth)."""
    x = inputs[0]
    b = op.attrs["blocksize"]
    n, c, h, w = x.shape
    if op.op_type == "SpaceToDepth":
        y = x.reshape(n, c, h // b, b, w // b, b)
        perm = (0, 3, 5, 1, 2, 4) if op.attrs["mode"] == "DCR" else (0, 1, 3, 5, 2, 4)
        y = y.transpose(perm)
        return [np.ascontiguousarray(y).reshape(n, c * b * b, h // b, w // b)]
    if op.attrs["mode"] == "DCR":
        y = x.reshape(n, b, b, c // (b * b), h, w).transpose(0, 3, 4, 1, 5, 2)
    else:
        y = x.reshape(n, c // (b * b), b, b, h, w).transpose(0, 1, 4, 2, 5, 3)
    return [np.ascontiguousarray(y).reshape(n, c // (b * b), h * b, w * b)]


register_op(
    OpDef(
        "Slice",
        (1, 1),
        1,
        {
            "starts": AttrSpec("ints"),
            "ends": AttrSpec("ints"),
            "axes": AttrSpec("ints", [], None, "default: 0..len(starts)-1"),
            "steps": AttrSpec("ints", [], None, "default: all 1"),
        },
        _infer_slice,
        _slice_forward,
        fed_roles=("starts", "ends", "axes", "steps"),
        shape_roles=("starts", "ends", "axes", "steps"),
        doc="x[starts:ends:steps] along axes (ONNX clamping)",
    )
)
register_op(
    OpDef(
        "Split",
        (1, 1),
        None,
        {"axis": AttrSpec("int", 0), "split": AttrSpec("ints", [], None, "lengths; empty: equal")},
        _infer_split,
        _split_forward,
        fed_roles=("split",),
        shape_roles=("split",),
        doc="cut into parts along axis",
    )
)
register_op(
    OpDef(
        "Gather",
        (2, 2),
        1,
        {"axis": AttrSpec("int", 0)},
        _infer_gather,
        _gather_forward,
        doc="take(data, indices, axis); indices SInt32/SInt64",
    )
)
register_op(
    OpDef(
        "Expand",
        (1, 1),
        1,
        {"shape": AttrSpec("ints")},
        _infer_expand,
        _expand_forward,
        fed_roles=("shape",),
        shape_roles=("shape",),
        doc="broadcast to shape",
    )
)
register_op(
    OpDef(
        "Tile",
        (1, 1),
        1,
        {"repeats": AttrSpec("ints")},
        _infer_tile,
        _tile_forward,
        fed_roles=("repeats",),
        shape_roles=("repeats",),
        doc="repeat along each axis",
    )
)
register_op(
    OpDef(
        "DepthToSpace",
        (1, 1),
        1,
        {"blocksize": AttrSpec("int"), "mode": AttrSpec("str", "DCR")},
        _infer_d2s,
        _d2s_forward,
        doc="channels to spatial blocks (pixel shuffle), DCR or CRD order",
    )
)
register_op(
    OpDef(
        "SpaceToDepth",
        (1, 1),
        1,
        {"blocksize": AttrSpec("int"), "mode": AttrSpec("str", "DCR")},
        _infer_d2s,
        _d2s_forward,
        doc="spatial blocks to channels",
    )
)
