"""ONNX importer handlers for the neural-network layers other than convolutions and
pooling (`xrt.network._onnx_conv`): dense layers, normalisations, softmax, resizing,
padding and clipping.

Weights, biases, normalisation statistics, Clip bounds, Pad pads and values and Resize
scales and sizes may be fed at run time (graph inputs without initializers): the op's
role is bound to the value (`Ctx.fed_param`). Where ONNX gives such an input for some axes
only (Resize and Pad ``axes``), a Gather spreads it over every axis first.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from xrt.network._onnx_ctx import Ctx
from xrt.ops.activation import FLOAT32_MAX
from xrt.ops.norm import batchnorm_scale_shift
from xrt.ops.resize import ASPECT_POLICIES, keep_aspect

__all__ = ["NN_HANDLERS"]


def _clip(ctx: Ctx) -> None:
    node, a = ctx.node, ctx.attrs()
    attrs: dict[str, float] = {}
    if "min" in a:
        attrs["min"] = float(a["min"])
    if "max" in a:
        attrs["max"] = float(a["max"])
    fed: dict[str, str] = {}
    for i, key in ((1, "min"), (2, "max")):
        bound = ctx.fed_or_const(i)
        if isinstance(bound, str):
            fed[key] = bound
        elif bound is not None:
            attrs[key] = float(bound.reshape(-1)[0])
    for key, default in (("min", -FLOAT32_MAX), ("max", FLOAT32_MAX)):
        if key not in fed:
            attrs[key] = min(max(attrs.get(key, default), -FLOAT32_MAX), FLOAT32_MAX)
    ctx.emit("Clip", [ctx.value(node.input[0])], attrs, output=node.output[0], fed=fed)


def _spread(ctx: Ctx, value: str, positions: Sequence[int | None], fill: np.ndarray) -> str:
    """A fed per-axis list `value` laid out over every axis: entry i is ``value[p]`` for
    ``p = positions[i]``, or ``fill[i]`` where `positions` has None (an axis ONNX's
    ``axes`` leaves out). A Concat and a Gather on the host; `value` itself when it
    already covers every axis in order."""
    if list(positions) == list(range(len(positions))):
        return value
    dtype = ctx.b.values[value].dtype.numpy
    base = ctx.const_value(fill.astype(dtype), "fill")
    cat = ctx.emit("Concat", [base, value], {"axis": 0})
    index = [i if p is None else len(fill) + p for i, p in enumerate(positions)]
    return ctx.emit("Gather", [cat, ctx.const_value(np.array(index, np.int64), "index")])


def _scatter_pads(ctx: Ctx, pads: str, axes: str, nd: int) -> str:
    """ONNX Pad's ``pads`` over ``axes`` fed at run time, as pads over all `nd` axes: a
    one-hot (k, nd) of the axes (negative ones counted from the end) weights the begin and
    end halves, summed over the k listed axes (host ops on int64)."""
    k = ctx.fed_length(axes)
    i64 = ctx.b.values[axes].dtype
    norm = ctx.emit("Mod", [axes, ctx.const_value(np.array(nd, i64.numpy), "rank")])
    col = ctx.emit("Reshape", [norm], {"shape": [k, 1]})
    grid = ctx.const_value(np.arange(nd, dtype=i64.numpy).reshape(1, nd), "axes_grid")
    hot = ctx.emit("Cast", [ctx.emit("Equal", [col, grid])], {"to": "SInt64"})
    halves = ctx.emit("Reshape", [pads], {"shape": [2, k, 1]})
    spread = ctx.emit("Mul", [halves, hot])
    per_axis = ctx.emit("ReduceSum", [spread], {"axes": [1], "keepdims": False})
    return ctx.emit("Reshape", [per_axis], {"shape": [2 * nd]})


def _gemm(ctx: Ctx) -> None:
    node, a = ctx.node, ctx.attrs()
    alpha, beta = float(a.get("alpha", 1.0)), float(a.get("beta", 1.0))
    trans_a, trans_b = int(a.get("transA", 0)), int(a.get("transB", 0))
    x = ctx.value(node.input[0])
    if trans_a:
        x = ctx.emit("Transpose", [x], {"perm": [1, 0]})
    b_const = ctx.const(node.input[1])
    c_name = ctx.input(2)
    c_const = ctx.const(c_name) if c_name else None
    if b_const is not None and b_const.ndim == 2:
        # A dense layer: alpha, beta and transB fold into the parameters.
        weight = b_const if trans_b else b_const.T
        if alpha != 1.0:  # (float64 copies of VGG-sized weights cost seconds: only if needed)
            weight = weight.astype(np.float64) * alpha
        n = weight.shape[0]
        params = {"weight": weight.astype(np.float32, copy=False)}
        if (
            c_const is not None
            and c_const.size in (1, n)
            and (c_const.ndim < 2 or c_const.shape[0] == 1)
        ):
            bias = np.broadcast_to(c_const.reshape(-1), (n,)).astype(np.float64) * beta
            params["bias"] = bias.astype(np.float32)
            c_name = ""
        y = ctx.emit("Gemm", [x], {}, params)
    else:
        bv = ctx.value(node.input[1])
        if trans_b:
            bv = ctx.emit("Transpose", [bv], {"perm": [1, 0]})
        y = ctx.emit("MatMul", [x, bv])
        if alpha != 1.0:
            y = ctx.emit("Mul", [y, ctx.const_value(np.array(alpha, np.float32), "alpha")])
    if c_name:
        if c_const is not None:
            c_val = ctx.const_value((c_const.astype(np.float64) * beta).astype(np.float32), "C")
        else:
            c_val = ctx.value(c_name)
            if beta != 1.0:
                c_val = ctx.emit(
                    "Mul", [c_val, ctx.const_value(np.array(beta, np.float32), "beta")]
                )
        y = ctx.emit("Add", [y, c_val])
    ctx.finish(y)


def _matmul(ctx: Ctx) -> None:
    node = ctx.node
    b_const = ctx.const(node.input[1])
    a_type = ctx.type(node.input[0])
    if b_const is not None and b_const.ndim == 2 and a_type.ndim == 2 and a_type.dtype.is_float:
        ctx.emit(
            "Gemm",
            [ctx.value(node.input[0])],
            {},
            {"weight": b_const.T.astype(np.float32)},
            output=node.output[0],
        )
        return
    ctx.emit("MatMul", [ctx.value(node.input[0]), ctx.value(node.input[1])], output=node.output[0])


def _batchnorm(ctx: Ctx) -> None:
    node, a = ctx.node, ctx.attrs()
    training = bool(a.get("training_mode", 0))
    if any(o for o in node.output[1:]) and not training:
        raise ctx.fail("BatchNormalization's running-statistics outputs need training_mode 1")
    roles = ("scale", "bias", "mean", "var")
    params: dict[str, np.ndarray] = {}
    fed: dict[str, str] = {}
    for i, r in enumerate(roles):
        ctx.fed_param(i + 1, r, params, fed, lambda arr: arr.astype(np.float32))
    eps = float(a.get("epsilon", 1e-5))
    x = ctx.value(node.input[0])
    if training:
        outs = [o or ctx.b.unique(f"{node.output[0]}:stat") for o in node.output]
        outs += [ctx.b.unique(f"{node.output[0]}:stat") for _ in range(3 - len(outs))]
        attrs = {"epsilon": eps, "momentum": float(a.get("momentum", 0.9))}
        ctx.emit("BatchNormTrain", [x], attrs, params, outputs=outs, fed=fed)
        return
    prod = ctx.b.producer(x)
    if (
        ctx.fold_bn
        and not fed
        and prod is not None
        and prod.op_type == "Conv2d"
        and not prod.fed
        and ctx.uses.get(node.input[0], 0) == 1
        and node.input[0] not in ctx.alias
    ):
        mult, shift = batchnorm_scale_shift(params, eps)
        weight = ctx.b.params[prod.params["weight"]].astype(np.float64)
        if weight.shape[0] != mult.shape[0]:
            raise ctx.fail(
                f"BatchNormalization has {mult.shape[0]} channels, the convolution "
                f"{weight.shape[0]}"
            )
        bias = (
            ctx.b.params[prod.params["bias"]].astype(np.float64) if "bias" in prod.params else 0.0
        )
        w_name = ctx.b.param(
            f"{prod.name or x}.weight_bn",
            (weight * mult[:, None, None, None]).astype(np.float32),
            unique=True,
        )
        b_name = ctx.b.param(
            f"{prod.name or x}.bias_bn", (bias * mult + shift).astype(np.float32), unique=True
        )
        ctx.b.rewrite(
            prod.op_id, outputs=(node.output[0],), params={"weight": w_name, "bias": b_name}
        )
        return
    ctx.emit("BatchNorm", [x], {"epsilon": eps}, params, output=node.output[0], fed=fed)


def _softmax(ctx: Ctx) -> None:
    node, a = ctx.node, ctx.attrs()
    x = ctx.value(node.input[0])
    t = ctx.b.values[x]
    axis = int(a.get("axis", 1 if ctx.opset < 13 else -1))
    axis = axis + t.ndim if axis < 0 else axis
    if not 0 <= axis < t.ndim:
        raise ctx.fail(f"axis {a.get('axis')} is out of range for rank {t.ndim}")
    kind = "Softmax" if node.op_type == "Softmax" else "LogSoftmax"
    if ctx.opset >= 13 or axis == t.ndim - 1:
        ctx.emit(kind, [x], {"axis": axis}, output=node.output[0])
        return
    # Opset < 13: softmax over the flattened trailing axes [axis:].
    ctx.static_shape(x)
    flat = ctx.emit("Reshape", [x], {"shape": [math.prod(t.shape[:axis]), -1]})
    sm = ctx.emit(kind, [flat], {"axis": 1})
    ctx.emit("Reshape", [sm], {"shape": list(t.shape)}, output=node.output[0])


def _resize(ctx: Ctx) -> None:
    node, a = ctx.node, ctx.attrs()
    mode = a.get("mode", "nearest")
    if mode not in ("nearest", "linear", "cubic"):
        raise ctx.fail(f"Resize mode {mode!r} is not supported")
    policy = a.get("keep_aspect_ratio_policy", "stretch")
    if policy not in ASPECT_POLICIES:
        raise ctx.fail(
            f"Resize keep_aspect_ratio_policy {policy!r} is not one of {ASPECT_POLICIES}"
        )
    ctm = a.get("coordinate_transformation_mode", "half_pixel")
    x = ctx.value(node.input[0])
    shape = ctx.static_shape(x)
    nd = len(shape)
    axes = [int(v) % nd for v in a.get("axes", range(nd))]
    scales_in, sizes_in = ctx.fed_or_const(2), ctx.fed_or_const(3)
    attrs: dict[str, Any] = {
        "coordinate_transformation_mode": ctm,
        "nearest_mode": a.get("nearest_mode", "round_prefer_floor"),
        "mode": mode,
        "cubic_coeff_a": float(a.get("cubic_coeff_a", -0.75)),
        "exclude_outside": bool(a.get("exclude_outside", 0)),
        "antialias": bool(a.get("antialias", 0)) and mode != "nearest",
    }
    roi_fed: dict[str, str] = {}
    if ctm == "tf_crop_and_resize":
        attrs["extrapolation_value"] = float(a.get("extrapolation_value", 0.0))
        roi = ctx.fed_or_const(1)
        # ONNX's roi is starts then ends over `axes`; ours over every axis (others: 0, 1).
        k = len(axes)
        where = [axes.index(i) if i in axes else None for i in range(nd)]
        where += [k + p if p is not None else None for p in where]
        fill = np.array([0.0] * nd + [1.0] * nd)
        if isinstance(roi, str):
            ctx.fed_length(roi, 2 * k, "Resize roi")
            roi_fed["roi"] = _spread(ctx, roi, where, fill)
        elif roi is None or roi.size != 2 * k:
            raise ctx.fail(f"tf_crop_and_resize needs a roi of {2 * k} values")
        else:
            flat = roi.reshape(-1).astype(np.float64)
            attrs["roi"] = [
                float(flat[p]) if p is not None else float(f)
                for p, f in zip(where, fill, strict=True)
            ]
    fed_sizes = isinstance(sizes_in, str)
    if fed_sizes or (isinstance(scales_in, str) and (sizes_in is None or not sizes_in.size)):
        # Run-time scales or sizes: the other is derived at each forward (xrt.ops.resize).
        kind, value = ("sizes", sizes_in) if fed_sizes else ("scales", scales_in)
        assert isinstance(value, str)
        ctx.fed_length(value, len(axes), f"Resize {kind}")
        fill = np.array(shape, np.int64) if fed_sizes else np.ones(nd, np.float32)
        where = [axes.index(i) if i in axes else None for i in range(nd)]
        attrs["sizes" if not fed_sizes else "scales"] = []
        if fed_sizes and policy != "stretch":
            attrs |= {"keep_aspect_ratio_policy": policy, "axes": axes}
        dims = [-1 if i in axes else d for i, d in enumerate(shape)]
        out_t = ctx.dyn_type(node.output[0], ctx.b.values[x].dtype, dims)
        fed = {kind: _spread(ctx, value, where, fill), **roi_fed}
        ctx.emit("Resize", [x], attrs, output=node.output[0], fed=fed, types=[out_t])
        return
    sizes, scales = list(shape), [1.0] * nd
    if sizes_in is not None and sizes_in.size:
        for ax, s in zip(axes, sizes_in.reshape(-1), strict=True):
            sizes[ax] = int(s)
            scales[ax] = int(s) / shape[ax]
        if policy != "stretch":
            sizes, scales = keep_aspect(shape, sizes, axes, policy)
    elif scales_in is not None and scales_in.size:
        for ax, r in zip(axes, scales_in.reshape(-1), strict=True):
            scales[ax] = float(r)
            sizes[ax] = math.floor(shape[ax] * float(r))
    else:
        raise ctx.fail("Resize needs scales or sizes")
    attrs = {"sizes": sizes, "scales": scales, **attrs}
    ctx.emit("Resize", [x], attrs, output=node.output[0], fed=roi_fed)


def _upsample(ctx: Ctx) -> None:
    node, a = ctx.node, ctx.attrs()
    mode = a.get("mode", "nearest")
    if mode not in ("nearest", "linear", "bilinear"):
        raise ctx.fail(f"Upsample mode {mode!r} is not supported")
    x = ctx.value(node.input[0])
    shape = ctx.static_shape(x)
    attrs: dict[str, Any] = {
        "coordinate_transformation_mode": "asymmetric",
        "nearest_mode": "floor",
        "mode": "nearest" if mode == "nearest" else "linear",
    }
    got = ctx.fed_or_const(1)
    if isinstance(got, str):  # scales fed at run time: sizes derived at each forward
        ctx.fed_length(got, len(shape), "Upsample scales")
        out_t = ctx.dyn_type(node.output[0], ctx.b.values[x].dtype, [-1] * len(shape))
        attrs["sizes"] = []
        ctx.emit("Resize", [x], attrs, output=node.output[0], fed={"scales": got}, types=[out_t])
        return
    scales = [float(r) for r in ctx.need_const(node.input[1], "Upsample scales").reshape(-1)]
    sizes = [math.floor(d * r) for d, r in zip(shape, scales, strict=True)]
    attrs = {"sizes": sizes, "scales": scales, **attrs}
    ctx.emit("Resize", [x], attrs, output=node.output[0])


def _pad(ctx: Ctx) -> None:
    node, a = ctx.node, ctx.attrs()
    mode = a.get("mode", "constant")
    if mode not in ("constant", "reflect", "edge", "wrap"):
        raise ctx.fail(f"Pad mode {mode!r} is not supported")
    x = ctx.value(node.input[0])
    xt = ctx.b.values[x]
    nd = xt.ndim
    axes = list(range(nd))
    axes_in = ctx.fed_or_const(3)
    if axes_in is not None and not isinstance(axes_in, str):
        axes = [int(v) % nd for v in axes_in.reshape(-1)]
    attrs: dict[str, Any] = {"mode": mode}
    fed: dict[str, str] = {}
    const = ctx.fed_or_const(2)
    if isinstance(const, str):
        fed["value"] = const
    else:
        attrs["value"] = float(const.reshape(-1)[0]) if const is not None and const.size else 0.0
    got = ctx.fed_or_const(1)
    if isinstance(axes_in, str):  # axes fed at run time: pads spread over them then
        pads_v = got if isinstance(got, str) else ctx.const_value(got.astype(np.int64), "pads")
        ctx.fed_length(pads_v, 2 * ctx.fed_length(axes_in), "Pad pads")
        fed["pads"] = _scatter_pads(ctx, pads_v, axes_in, nd)
        dims = [-1] * nd
        out_t = ctx.dyn_type(node.output[0], xt.dtype, dims)
        ctx.emit("Pad", [x], attrs, output=node.output[0], fed=fed, types=[out_t])
        return
    if isinstance(got, str):  # pads fed at run time: the output shape follows them
        n = len(axes)
        ctx.fed_length(got, 2 * n, "Pad pads")
        where = [axes.index(i) if i in axes else None for i in range(nd)]
        where += [None if p is None else p + n for p in where]
        fed["pads"] = _spread(ctx, got, where, np.zeros(2 * nd, np.int64))
        dims = [-1 if i in axes else d for i, d in enumerate(xt.shape)]
        out_t = ctx.dyn_type(node.output[0], xt.dtype, dims)
        ctx.emit("Pad", [x], attrs, output=node.output[0], fed=fed, types=[out_t])
        return
    if got is None:
        raise ctx.fail("Pad needs pads")
    raw = [int(p) for p in got.reshape(-1)]
    if len(raw) != 2 * len(axes):
        raise ctx.fail(f"pads {raw} need two entries per padded axis")
    pads = [0] * (2 * nd)
    for i, ax in enumerate(axes):
        pads[ax] = raw[i]
        pads[ax + nd] = raw[i + len(axes)]
    attrs["pads"] = pads
    ctx.emit("Pad", [x], attrs, output=node.output[0], fed=fed)


def _lrn(ctx: Ctx) -> None:
    a = ctx.attrs()
    attrs = {"size": int(a["size"])}
    for key in ("alpha", "beta", "bias"):
        if key in a:
            attrs[key] = float(a[key])
    ctx.emit("LRN", [ctx.value(ctx.node.input[0])], attrs, output=ctx.node.output[0])


def _layernorm(ctx: Ctx) -> None:
    node, a = ctx.node, ctx.attrs()
    if int(a.get("stash_type", 1)) != 1:
        raise ctx.fail("LayerNormalization stash_type other than float is not supported")
    params: dict[str, np.ndarray] = {}
    fed: dict[str, str] = {}
    ctx.fed_param(1, "scale", params, fed)
    ctx.fed_param(2, "bias", params, fed)
    eps = float(a.get("epsilon", 1e-5))
    attrs = {"axis": int(a.get("axis", -1)), "epsilon": eps}
    x = ctx.value(node.input[0])
    ctx.emit("LayerNorm", [x], attrs, params, output=node.output[0], fed=fed)
    outs = [*list(node.output), "", ""]
    if not (outs[1] or outs[2]):
        return
    # The optional statistics outputs, when asked for: mean and 1 / sqrt(var + epsilon)
    # over the normalised axes, with those axes kept as length 1.
    t = ctx.b.values[x]
    axes = list(range(attrs["axis"] % t.ndim, t.ndim))
    mean = ctx.emit("ReduceMean", [x], {"axes": axes}, output=outs[1] or None)
    if outs[2]:
        diff = ctx.emit("Sub", [x, mean])
        var = ctx.emit("ReduceMean", [ctx.emit("Mul", [diff, diff])], {"axes": axes})
        eps_v = ctx.const_value(np.array(eps, t.dtype.numpy), "epsilon")
        std = ctx.emit("Sqrt", [ctx.emit("Add", [var, eps_v])])
        ctx.emit("Reciprocal", [std], output=outs[2])


def _instnorm(ctx: Ctx) -> None:
    node, a = ctx.node, ctx.attrs()
    params: dict[str, np.ndarray] = {}
    fed: dict[str, str] = {}
    ctx.fed_param(1, "scale", params, fed)
    ctx.fed_param(2, "bias", params, fed)
    attrs = {"epsilon": float(a.get("epsilon", 1e-5))}
    x = ctx.value(node.input[0])
    ctx.emit("InstanceNorm", [x], attrs, params, output=node.output[0], fed=fed)


NN_HANDLERS: dict[str, Callable[[Ctx], None]] = {
    "Clip": _clip,
    "Gemm": _gemm,
    "MatMul": _matmul,
    "BatchNormalization": _batchnorm,
    "Softmax": _softmax,
    "LogSoftmax": _softmax,
    "Resize": _resize,
    "Upsample": _upsample,
    "Pad": _pad,
    "LRN": _lrn,
    "LayerNormalization": _layernorm,
    "InstanceNormalization": _instnorm,
}
"""ONNX op type -> handler, for the layers above."""
