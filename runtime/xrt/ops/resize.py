"""``Resize`` (ONNX Resize and old Upsample): nearest, linear and cubic interpolation.

Nearest is dtype-generic: on int8 it copies values and keeps the scale. Linear and cubic
are separable: one pass per resized axis gathering 2 (linear) or 4 (cubic) source
positions and blending them with per-position weights (float64, rounded once per pass).
The source coordinate of output position ``o`` along an axis of input length ``n`` and
scale ``r`` follows the ONNX coordinate transformation (and nearest rounding) modes.

``sizes`` and ``scales`` are both given by the importer for constant ones; when one of them
is fed at run time, the other is empty and derived as ONNX does: ``floor(n * r)`` from a
scale, ``size / n`` from a size (`resize_plan`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from xrt.dtypes import TensorType
from xrt.ops._common import fail
from xrt.ops._registry import AttrSpec, OpDef, OpLike, register_op

__all__ = [
    "ASPECT_POLICIES",
    "COORD_MODES",
    "MODES",
    "NEAREST_MODES",
    "keep_aspect",
    "nearest_indices",
    "resize_forward",
    "resize_plan",
]

COORD_MODES = (
    "half_pixel",
    "asymmetric",
    "align_corners",
    "pytorch_half_pixel",
    "tf_half_pixel_for_nn",
    "half_pixel_symmetric",
    "tf_crop_and_resize",
)
"""Supported ``coordinate_transformation_mode`` values."""
MODES = ("nearest", "linear", "cubic")
"""Supported interpolation modes."""
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
"""Supported ``nearest_mode`` values."""
ASPECT_POLICIES = ("stretch", "not_larger", "not_smaller")
"""``keep_aspect_ratio_policy`` values."""


def keep_aspect(
    shape: Sequence[int], sizes: Sequence[int], axes: Sequence[int], policy: str
) -> tuple[list[int], list[float]]:
    """ONNX ``keep_aspect_ratio_policy`` on requested `sizes` (one per axis of `shape`):
    one scale for all of `axes`, the smallest (``not_larger``) or largest (``not_smaller``)
    of ``size / n``, and sizes ``round_half_up(scale * n)`` there; other axes keep theirs."""
    ratios = [sizes[a] / shape[a] if shape[a] else 0.0 for a in axes]
    r = min(ratios) if policy == "not_larger" else max(ratios)
    out_sizes = [int(r * n + 0.5) if i in axes else n for i, n in enumerate(shape)]
    return out_sizes, [r if i in axes else 1.0 for i in range(len(shape))]


def source_coords(
    n_in: int, n_out: int, scale: float, coord_mode: str, roi: tuple[float, float] = (0.0, 1.0)
) -> np.ndarray:
    """Source coordinate of each output position along one axis (float64, not clamped);
    `roi` is the axis's normalised crop (start, end) of ``tf_crop_and_resize``."""
    o = np.arange(n_out, dtype=np.float64)
    if coord_mode == "tf_crop_and_resize":
        # Like align_corners over the crop, by the output length (as TF's CropAndResize).
        start, end = roi
        if n_out == 1:
            return np.full(1, (start + end) / 2 * (n_in - 1))
        return start * (n_in - 1) + o * (end - start) * (n_in - 1) / (n_out - 1)
    if coord_mode == "half_pixel":
        x = (o + 0.5) / scale - 0.5
    elif coord_mode == "pytorch_half_pixel":
        x = (o + 0.5) / scale - 0.5 if n_out > 1 else np.zeros_like(o)
    elif coord_mode == "asymmetric":
        x = o / scale
    elif coord_mode == "tf_half_pixel_for_nn":
        x = (o + 0.5) / scale
    elif coord_mode == "align_corners":
        # Divides by the rounded output length, as onnxruntime and PyTorch do (the ONNX
        # reference takes the unrounded scale * n_in; the two agree whenever sizes are given).
        x = o * (n_in - 1) / (n_out - 1) if n_out > 1 else np.zeros_like(o)
    elif coord_mode == "half_pixel_symmetric":
        offset = n_in / 2 * (1 - n_out / (scale * n_in))
        x = offset + (o + 0.5) / scale - 0.5
    else:
        raise ValueError(coord_mode)
    return x


def nearest_indices(
    n_in: int,
    n_out: int,
    scale: float,
    coord_mode: str,
    nearest_mode: str,
    roi: tuple[float, float] = (0.0, 1.0),
) -> np.ndarray:
    """Source index of each output position along one axis (int64, clamped to the input)."""
    x = source_coords(n_in, n_out, scale, coord_mode, roi)
    if nearest_mode == "round_prefer_floor":
        idx = np.where(x == np.floor(x) + 0.5, np.floor(x), np.round(x))
    elif nearest_mode == "round_prefer_ceil":
        idx = np.where(x == np.floor(x) + 0.5, np.ceil(x), np.round(x))
    elif nearest_mode == "floor":
        idx = np.floor(x)
    elif nearest_mode == "ceil":
        idx = np.ceil(x)
    else:
        raise ValueError(nearest_mode)
    return np.clip(idx, 0, n_in - 1).astype(np.int64)


def resize_plan(op: OpLike, shape: tuple[int, ...]) -> tuple[list[int], list[float]]:
    """The output sizes and the scales of `op` on an input of `shape`: the attributes, an
    empty one derived from the other (``floor(n * scale)``, ``size / n``, or by
    `keep_aspect` over ``axes`` for a ``keep_aspect_ratio_policy`` other than stretch)."""
    sizes, scales = list(op.attrs["sizes"]), [float(r) for r in op.attrs["scales"]]
    policy = op.attrs["keep_aspect_ratio_policy"]
    if policy != "stretch" and not scales and len(sizes) == len(shape):
        axes = op.attrs["axes"] or range(len(shape))
        return keep_aspect(shape, sizes, [a % len(shape) for a in axes], policy)
    if not sizes and len(scales) == len(shape):
        sizes = [
            math.floor(n * r) if math.isfinite(r) else 0 for n, r in zip(shape, scales, strict=True)
        ]
    elif not scales and len(sizes) == len(shape):
        scales = [s / n if n else 0.0 for s, n in zip(sizes, shape, strict=True)]
    return sizes, scales


def _rois(op: OpLike, ndim: int) -> list[tuple[float, float]]:
    """Each axis's crop (start, end) from ``roi`` (starts, then ends); (0, 1) without one."""
    roi = [float(v) for v in op.attrs["roi"]]
    if op.attrs["coordinate_transformation_mode"] != "tf_crop_and_resize":
        return [(0.0, 1.0)] * ndim
    if len(roi) != 2 * ndim or not all(math.isfinite(v) for v in roi):
        raise fail(op, f"tf_crop_and_resize needs a finite roi of {2 * ndim} values, got {roi}")
    return list(zip(roi[:ndim], roi[ndim:], strict=True))


def _check(op: OpLike, x: TensorType) -> tuple[int, ...]:
    a = op.attrs
    _rois(op, x.ndim)
    sizes, scales = resize_plan(op, x.shape)
    if len(sizes) != x.ndim or len(scales) != x.ndim:
        raise fail(op, f"sizes {sizes} and scales {scales} need one entry per axis ({x.ndim})")
    if any(s <= 0 for s in sizes) or any(not (r > 0 and math.isfinite(r)) for r in scales):
        raise fail(op, f"sizes {sizes} and scales {scales} must be > 0")
    if a["coordinate_transformation_mode"] not in COORD_MODES:
        raise fail(op, f"coordinate_transformation_mode must be one of {COORD_MODES}")
    if a["mode"] not in MODES:
        raise fail(op, f"mode must be one of {MODES}, got {a['mode']!r}")
    if a["mode"] != "nearest" and x.quant is not None:
        raise fail(op, f"{a['mode']} resize of a quantized tensor is not supported")
    if a["mode"] != "nearest" and not x.dtype.is_float:
        raise fail(op, f"{a['mode']} resize needs a float input, got {x.dtype.manual_name}")
    if a["nearest_mode"] not in NEAREST_MODES:
        raise fail(op, f"nearest_mode must be one of {NEAREST_MODES}")
    if a["keep_aspect_ratio_policy"] not in ASPECT_POLICIES:
        raise fail(op, f"keep_aspect_ratio_policy must be one of {ASPECT_POLICIES}")
    return tuple(sizes)


def _infer(op: OpLike, ins: list[TensorType], params: Mapping[str, np.ndarray]) -> list[TensorType]:
    x = ins[0]
    return [TensorType(x.dtype, _check(op, x), x.layout, x.quant)]


def _cubic_weights(t: np.ndarray, a: float) -> np.ndarray:
    """Keys' cubic convolution weights of the taps at offsets -1, 0, 1, 2 (shape (n, 4))."""
    d = np.stack([t + 1, t, 1 - t, 2 - t], axis=1)
    near = ((a + 2) * d - (a + 3)) * d * d + 1
    far = ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
    return np.where(d <= 1, near, far)


def _taps(
    op: OpLike, n_in: int, n_out: int, r: float, roi: tuple[float, float]
) -> tuple[np.ndarray, np.ndarray]:
    """Source indices and weights (each (n_out, taps)) of linear / cubic interpolation."""
    a = op.attrs
    x = source_coords(n_in, n_out, r, a["coordinate_transformation_mode"], roi)
    if a["antialias"] and r < 1.0:
        idx, weights = _antialias_taps(x, r, a["mode"], a["cubic_coeff_a"])
    elif a["mode"] == "linear":
        x = np.clip(x, 0, n_in - 1)
        i0 = np.floor(x)
        t = x - i0
        idx = np.stack([i0, i0 + 1], axis=1)
        weights = np.stack([1 - t, t], axis=1)
    else:
        i0 = np.floor(x)
        idx = i0[:, None] + np.arange(-1, 3)
        weights = _cubic_weights(x - i0, a["cubic_coeff_a"])
    if a["exclude_outside"]:  # (linear taps outside carry no weight unless antialiased)
        weights = np.where((idx < 0) | (idx > n_in - 1), 0.0, weights)
        total = weights.sum(axis=1, keepdims=True)
        weights = weights / np.where(total == 0, 1.0, total)
    return np.clip(idx, 0, n_in - 1).astype(np.int64), weights


def _antialias_taps(
    x: np.ndarray, scale: float, mode: str, cubic_a: float
) -> tuple[np.ndarray, np.ndarray]:
    """Downscaling with ``antialias``: the linear (triangle) or cubic kernel stretched by
    ``1 / scale``, so it spans ``2 / scale`` (``4 / scale``) source positions, its weights
    normalised to sum 1 (ONNX Resize's antialias filter; edge positions repeat)."""
    base = np.floor(x)
    t = x - base
    exact = t == 0  # an exact source position: taps around it from the left, as ONNX does
    base, t = np.where(exact, base - 1, base), np.where(exact, 1.0, t)
    half = 1 if mode == "linear" else 2
    start = math.floor(-half / scale) + 1
    offsets = np.arange(start, 2 - start, dtype=np.float64)
    d = np.abs(offsets[None, :] - t[:, None]) * scale
    if mode == "linear":
        weights = np.clip(1 - d, 0.0, 1.0)
    else:
        near = ((cubic_a + 2) * d - (cubic_a + 3)) * d * d + 1
        far = ((cubic_a * d - 5 * cubic_a) * d + 8 * cubic_a) * d - 4 * cubic_a
        weights = np.where(d <= 1, near, np.where(d < 2, far, 0.0))
    weights = weights / weights.sum(axis=1, keepdims=True)
    return base[:, None] + offsets[None, :], weights


def resize_forward(
    op: OpLike, inputs: list[np.ndarray], params: Mapping[str, np.ndarray]
) -> list[np.ndarray]:
    """One pass per resized axis: ``take`` (nearest) or a weighted sum of 2 / 4 taps; with
    ``tf_crop_and_resize``, positions sampled outside the input get ``extrapolation_value``."""
    a = op.attrs
    x = inputs[0]
    dtype = x.dtype
    sizes, scales = resize_plan(op, x.shape)
    ctm = a["coordinate_transformation_mode"]
    rois = _rois(op, x.ndim)
    for axis, (n_out, r) in enumerate(zip(sizes, scales, strict=True)):
        n_in = x.shape[axis]
        shape = [1] * x.ndim
        shape[axis] = n_out
        if n_out == n_in and r == 1.0 and rois[axis] == (0.0, 1.0):
            continue
        if a["mode"] == "nearest":
            idx = nearest_indices(n_in, n_out, r, ctm, a["nearest_mode"], rois[axis])
            x = np.take(x, idx, axis=axis)
        else:
            idx, weights = _taps(op, n_in, n_out, r, rois[axis])
            acc = np.zeros((*x.shape[:axis], n_out, *x.shape[axis + 1 :]), np.float64)
            for k in range(idx.shape[1]):
                acc += np.take(x, idx[:, k], axis=axis) * weights[:, k].reshape(shape)
            x = acc.astype(dtype)
        if ctm == "tf_crop_and_resize":
            src = source_coords(n_in, n_out, r, ctm, rois[axis])
            outside = ((src < 0) | (src > n_in - 1)).reshape(shape)
            x = np.where(outside, np.asarray(a["extrapolation_value"]).astype(dtype), x)
    return [x]


register_op(
    OpDef(
        "Resize",
        (1, 1),
        1,
        {
            "sizes": AttrSpec("ints", doc="output shape; empty: floor(input * scales)"),
            "scales": AttrSpec(
                "floats", doc="scale per axis of the coordinate transform; empty: sizes / input"
            ),
            "coordinate_transformation_mode": AttrSpec("str", "half_pixel"),
            "nearest_mode": AttrSpec("str", "round_prefer_floor"),
            "mode": AttrSpec("str", "nearest", None, "nearest, linear or cubic"),
            "cubic_coeff_a": AttrSpec("float", -0.75),
            "exclude_outside": AttrSpec("bool", False),
            "antialias": AttrSpec("bool", False, None, "linear / cubic: filter when downscaling"),
            "keep_aspect_ratio_policy": AttrSpec(
                "str", "stretch", None, "with sizes and no scales: one scale over axes"
            ),
            "axes": AttrSpec("ints", [], None, "axes keep_aspect_ratio_policy spans; empty: all"),
            "roi": AttrSpec(
                "floats", [], None, "tf_crop_and_resize: normalised starts, then ends, per axis"
            ),
            "extrapolation_value": AttrSpec("float", 0.0, None, "tf_crop_and_resize: outside"),
        },
        _infer,
        resize_forward,
        fed_roles=("sizes", "scales", "roi"),
        shape_roles=("sizes", "scales"),
        doc="resize, nearest / (bi)linear / (bi)cubic (ONNX Resize, Upsample)",
    )
)
