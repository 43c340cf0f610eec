"""ONNX importer handlers for the neural-network layers: convolutions, pooling, dense
layers, normalisations, softmax, resizing, padding and clipping.

1-D convolutions and pools (audio, text) run as 2-D ones over a height of 1: a Reshape
before and after, so one kernel serves both.

Weights, biases, normalisation statistics, Clip bounds, Pad pads and values and Resize
scales and sizes may be fed at run time (graph inputs without initializers): the op's
role is bound to the value (`Ctx.fed_param`). Where ONNX gives such an input for some axes
only (Resize and Pad ``axes``), a Gather spreads it over every axis first.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from xrt.network._onnx_ctx import Ctx
from xrt.ops.activation import FLOAT32_MAX
from xrt.ops.norm import batchnorm_scale_shift

__all__ = ["NN_HANDLERS"]


def _spatial_pads(
    ctx: Ctx,
    a: Mapping[str, Any],
    in_hw: Sequence[int],
    kernel: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
) -> list[int]:
    auto = a.get("auto_pad", "NOTSET")
    nd = len(kernel)
    if not all(d >= 0 for d in in_hw) and auto in ("SAME_UPPER", "SAME_LOWER"):
        raise ctx.fail(f"auto_pad {auto} needs a static input shape, got {list(in_hw)}")
    if auto in ("NOTSET", ""):
        pads = list(a.get("pads", [0] * (2 * nd)))
        if len(pads) != 2 * nd:
            raise ctx.fail(f"pads {pads} must have {2 * nd} entries for {nd}-D")
        return pads
    if auto == "VALID":
        return [0] * (2 * nd)
    if auto not in ("SAME_UPPER", "SAME_LOWER"):
        raise ctx.fail(f"auto_pad {auto!r} is not supported")
    begin, end = [], []
    for size, k, s, d in zip(in_hw, kernel, strides, dilations, strict=True):
        out = -(-size // s)
        total = max(0, (out - 1) * s + (k - 1) * d + 1 - size)
        small, big = total // 2, total - total // 2
        begin.append(small if auto == "SAME_UPPER" else big)
        end.append(big if auto == "SAME_UPPER" else small)
    return begin + end


def _spatial(ctx: Ctx, a: Mapping[str, Any], key: str, nd: int, default: int) -> list[int]:
    v = list(a.get(key, [default] * nd))
    if len(v) != nd:
        raise ctx.fail(f"{key} {v} must have {nd} entries")
    return v


def _lift_1d(ctx: Ctx, x: str) -> tuple[str, int]:
    """A 3-D (N, C, L) value as 4-D (N, C, 1, L); returns (value, spatial rank)."""
    t = ctx.b.values[x]
    if t.ndim == 3:
        ctx.static_shape(x)
        want = (t.shape[0], t.shape[1], 1, t.shape[2])
        prod = ctx.b.producer(x)
        if prod is not None and prod.op_type == "Reshape":
            # Back-to-back 1-D layers: reuse the 4-D value the previous one lowered.
            src = prod.inputs[0]
            if ctx.b.values[src].shape == want and ctx.b.values[src].dtype is t.dtype:
                return src, 1
        return ctx.emit("Reshape", [x], {"shape": list(want)}), 1
    if t.ndim != 4:
        raise ctx.fail(f"only 1-D and 2-D operators are supported (input shape {list(t.shape)})")
    return x, 2


def _to_2d(values: list[int], nd: int, fill: int) -> list[int]:
    """1-D attribute lists (length 1 or 2 for pads) as their 2-D form over a height of 1."""
    if nd == 2:
        return values
    if len(values) == 2:  # pads [begin, end]
        return [0, values[0], 0, values[1]]
    return [fill, values[0]]


def _lower_1d(ctx: Ctx, y: str, nd: int) -> None:
    """Reshape a lifted result back to 3-D under the node's output name (or just rename)."""
    t = ctx.b.values[y]
    if nd == 1:
        ctx.emit(
            "Reshape",
            [y],
            {"shape": [t.shape[0], t.shape[1], t.shape[3]]},
            output=ctx.node.output[0],
        )
    else:
        ctx.finish(y)


def _weight(ctx: Ctx, nd: int) -> tuple[dict[str, np.ndarray], dict[str, str], list[int]]:
    """A convolution's weight and bias: (constant params, fed roles, kernel shape). A fed
    1-D weight (O, I, k) is reshaped to (O, I, 1, k) on the way."""
    params: dict[str, np.ndarray] = {}
    fed: dict[str, str] = {}
    ctx.fed_param(1, "weight", params, fed, lambda w: w.astype(np.float32))
    shape = list(
        params["weight"].shape if "weight" in params else ctx.b.values[fed["weight"]].shape
    )
    if len(shape) != nd + 2:
        raise ctx.fail(f"weight shape {shape} does not fit a {nd}-D convolution")
    if nd == 1 and "weight" in fed:
        lifted = [shape[0], shape[1], 1, shape[2]]
        fed["weight"] = ctx.emit("Reshape", [fed["weight"]], {"shape": lifted})
    ctx.fed_param(2, "bias", params, fed, lambda b: b.astype(np.float32))
    return params, fed, shape[2:]


def _conv(ctx: Ctx) -> None:
    node, a = ctx.node, ctx.attrs()
    x, nd = _lift_1d(ctx, ctx.value(node.input[0]))
    params, fed, kernel = _weight(ctx, nd)
    strides = _spatial(ctx, a, "strides", nd, 1)
    dil = _spatial(ctx, a, "dilations", nd, 1)
    in_sizes = ctx.b.values[x].shape[4 - nd :]
    pads = _spatial_pads(ctx, a, in_sizes, kernel, strides, dil)
    if nd == 1 and "weight" in params:
        params["weight"] = params["weight"][:, :, None, :]
    attrs = {
        "strides": _to_2d(strides, nd, 1),
        "pads": _to_2d(pads, nd, 0),
        "dilations": _to_2d(dil, nd, 1),
        "groups": int(a.get("group", 1)),
    }
    if nd == 2:
        ctx.emit("Conv2d", [x], attrs, params, output=node.output[0], fed=fed)
        return
    bn = _foldable_bn_after(ctx, node.output[0]) if not fed else None
    if bn is None:
        _lower_1d(ctx, ctx.emit("Conv2d", [x], attrs, params, fed=fed), nd)
        return
    # A 1-D convolution runs as Conv2d + Reshape, so the usual fold (BatchNormalization
    # right after a Conv2d) cannot see it: fold the following BatchNormalization here.
    bn_params, eps = bn[1], bn[2]
    mult, shift = batchnorm_scale_shift(bn_params, eps)
    weight = params["weight"].astype(np.float64) * mult[:, None, None, None]
    b0 = params["bias"].astype(np.float64) if "bias" in params else 0.0
    params = {"weight": weight.astype(np.float32), "bias": (b0 * mult + shift).astype(np.float32)}
    y = ctx.emit("Conv2d", [x], attrs, params)
    t = ctx.b.values[y]
    ctx.emit(
        "Reshape", [y], {"shape": [t.shape[0], t.shape[1], t.shape[3]]}, output=bn[0].output[0]
    )
    ctx.done.add(bn[0].output[0])


def _foldable_bn_after(ctx: Ctx, value: str) -> tuple[Any, dict[str, np.ndarray], float] | None:
    """The BatchNormalization node that alone consumes `value`, with its constant
    parameters and epsilon, when it can fold into the convolution producing `value`."""
    users = ctx.consumers.get(value, [])
    if not ctx.fold_bn or ctx.uses.get(value, 0) != 1 or len(users) != 1:
        return None
    bn = users[0]
    if bn.op_type != "BatchNormalization" or bn.domain not in ("", "ai.onnx"):
        return None
    if bn.input[0] != value or any(o for o in bn.output[1:]) or len(bn.input) != 5:
        return None
    a = {at.name: ctx.onnx.helper.get_attribute_value(at) for at in bn.attribute}
    if a.get("training_mode", 0):
        return None
    arrays = [ctx.const(v) for v in bn.input[1:]]
    if any(arr is None for arr in arrays):
        return None
    roles = ("scale", "bias", "mean", "var")
    params = {r: arr.astype(np.float32) for r, arr in zip(roles, arrays, strict=True)}
    return bn, params, float(a.get("epsilon", 1e-5))


def _conv_transpose(ctx: Ctx) -> None:
    node, a = ctx.node, ctx.attrs()
    x, nd = _lift_1d(ctx, ctx.value(node.input[0]))
    params, fed, kernel = _weight(ctx, nd)
    strides = _spatial(ctx, a, "strides", nd, 1)
    dil = _spatial(ctx, a, "dilations", nd, 1)
    out_pad = _spatial(ctx, a, "output_padding", nd, 0)
    auto = a.get("auto_pad", "NOTSET")
    needs_sizes = "output_shape" in a or auto in ("SAME_UPPER", "SAME_LOWER")
    sizes = ctx.static_shape(x)[4 - nd :] if needs_sizes else ctx.b.values[x].shape[4 - nd :]
    full = [
        s * (n - 1) + op + d * (k - 1) + 1
        for n, k, s, d, op in zip(sizes, kernel, strides, dil, out_pad, strict=True)
    ]
    if "output_shape" in a:
        want = list(a["output_shape"])[-nd:]
        total = [f - o for f, o in zip(full, want, strict=True)]
        # An output larger than the full result grows at the end, as output_padding does.
        out_pad = [p + max(0, -t) for p, t in zip(out_pad, total, strict=True)]
        total = [max(0, t) for t in total]
        upper = auto != "SAME_LOWER"
        begin = [t // 2 if upper else t - t // 2 for t in total]
        pads = begin + [t - b for t, b in zip(total, begin, strict=True)]
    elif auto in ("SAME_UPPER", "SAME_LOWER"):
        total = [f - n * s for f, n, s in zip(full, sizes, strides, strict=True)]
        upper = auto == "SAME_UPPER"
        begin = [t // 2 if upper else t - t // 2 for t in total]
        pads = begin + [t - b for t, b in zip(total, begin, strict=True)]
    elif auto in ("NOTSET", "", "VALID"):
        pads = list(a.get("pads", [0] * (2 * nd))) if auto != "VALID" else [0] * (2 * nd)
    else:
        raise ctx.fail(f"auto_pad {auto!r} is not supported")
    if nd == 1 and "weight" in params:
        params["weight"] = params["weight"][:, :, None, :]
    attrs = {
        "strides": _to_2d(strides, nd, 1),
        "pads": _to_2d(pads, nd, 0),
        "dilations": _to_2d(dil, nd, 1),
        "output_padding": _to_2d(out_pad, nd, 0),
        "groups": int(a.get("group", 1)),
    }
    _lower_1d(ctx, ctx.emit("ConvTranspose2d", [x], attrs, params, fed=fed), nd)


def _pool(ctx: Ctx) -> None:
    node, a = ctx.node, ctx.attrs()
    if len(node.output) > 1 and node.output[1]:
        raise ctx.fail("the Indices output of MaxPool is not supported")
    if node.op_type == "MaxPool" and a.get("storage_order", 0):
        raise ctx.fail("MaxPool storage_order=1 is not supported")
    x, nd = _lift_1d(ctx, ctx.value(node.input[0]))
    kernel = _spatial(ctx, a, "kernel_shape", nd, 1)
    strides = _spatial(ctx, a, "strides", nd, 1)
    dil = _spatial(ctx, a, "dilations", nd, 1)
    pads = _spatial_pads(ctx, a, ctx.b.values[x].shape[4 - nd :], kernel, strides, dil)
    attrs = {
        "kernel": _to_2d(kernel, nd, 1),
        "strides": _to_2d(strides, nd, 1),
        "pads": _to_2d(pads, nd, 0),
        "dilations": _to_2d(dil, nd, 1),
        "ceil_mode": bool(a.get("ceil_mode", 0)),
    }
    if node.op_type == "MaxPool":
        y = ctx.emit("MaxPool2d", [x], attrs)
    else:
        attrs["count_include_pad"] = bool(a.get("count_include_pad", 0))
        y = ctx.emit("AvgPool2d", [x], attrs)
    _lower_1d(ctx, y, nd)


def _global_pool(ctx: Ctx) -> None:
    node = ctx.node
    x = ctx.value(node.input[0])
    t = ctx.b.values[x]
    if node.op_type == "GlobalAveragePool" and t.ndim == 4:
        ctx.emit("GlobalAvgPool", [x], output=node.output[0])
        return
    if t.ndim < 3:
        raise ctx.fail(f"input must have rank >= 3 (N, C, ...), got {list(t.shape)}")
    kind = "ReduceMean" if node.op_type == "GlobalAveragePool" else "ReduceMax"
    ctx.emit(kind, [x], {"axes": list(range(2, t.ndim)), "keepdims": True}, output=node.output[0])


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
    if a.get("training_mode", 0):
        raise ctx.fail("BatchNormalization in training mode is not supported")
    if any(o for o in node.output[1:]):
        raise ctx.fail("BatchNormalization's running-statistics outputs are not supported")
    roles = ("scale", "bias", "mean", "var")
    params: dict[str, np.ndarray] = {}
    fed: dict[str, str] = {}
    for i, r in enumerate(roles):
        ctx.fed_param(i + 1, r, params, fed, lambda arr: arr.astype(np.float32))
    eps = float(a.get("epsilon", 1e-5))
    x = ctx.value(node.input[0])
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
    if a.get("antialias", 0):
        raise ctx.fail("Resize with antialias is not supported")
    if a.get("keep_aspect_ratio_policy", "stretch") != "stretch":
        raise ctx.fail("Resize keep_aspect_ratio_policy other than stretch is not supported")
    ctm = a.get("coordinate_transformation_mode", "half_pixel")
    if ctm == "tf_crop_and_resize":
        raise ctx.fail("Resize coordinate_transformation_mode tf_crop_and_resize is not supported")
    x = ctx.value(node.input[0])
    shape = ctx.static_shape(x)
    nd = len(shape)
    axes = [int(v) % nd for v in a.get("axes", range(nd))]
    scales_in, sizes_in = ctx.fed_or_const(2), ctx.fed_or_const(3)
    attrs = {
        "coordinate_transformation_mode": ctm,
        "nearest_mode": a.get("nearest_mode", "round_prefer_floor"),
        "mode": mode,
        "cubic_coeff_a": float(a.get("cubic_coeff_a", -0.75)),
        "exclude_outside": bool(a.get("exclude_outside", 0)),
    }
    fed_sizes = isinstance(sizes_in, str)
    if fed_sizes or (isinstance(scales_in, str) and (sizes_in is None or not sizes_in.size)):
        # Run-time scales or sizes: the other is derived at each forward (xrt.ops.resize).
        kind, value = ("sizes", sizes_in) if fed_sizes else ("scales", scales_in)
        assert isinstance(value, str)
        ctx.fed_length(value, len(axes), f"Resize {kind}")
        fill = np.array(shape, np.int64) if fed_sizes else np.ones(nd, np.float32)
        where = [axes.index(i) if i in axes else None for i in range(nd)]
        attrs["sizes" if not fed_sizes else "scales"] = []
        dims = [-1 if i in axes else d for i, d in enumerate(shape)]
        out_t = ctx.dyn_type(node.output[0], ctx.b.values[x].dtype, dims)
        fed = {kind: _spread(ctx, value, where, fill)}
        ctx.emit("Resize", [x], attrs, output=node.output[0], fed=fed, types=[out_t])
        return
    sizes, scales = list(shape), [1.0] * nd
    if sizes_in is not None and sizes_in.size:
        for ax, s in zip(axes, sizes_in.reshape(-1), strict=True):
            sizes[ax] = int(s)
            scales[ax] = int(s) / shape[ax]
    elif scales_in is not None and scales_in.size:
        for ax, r in zip(axes, scales_in.reshape(-1), strict=True):
            scales[ax] = float(r)
            sizes[ax] = math.floor(shape[ax] * float(r))
    else:
        raise ctx.fail("Resize needs scales or sizes")
    attrs = {"sizes": sizes, "scales": scales, **attrs}
    ctx.emit("Resize", [x], attrs, output=node.output[0])


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
    if mode not in ("constant", "reflect", "edge"):
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
    "Conv": _conv,
    "ConvTranspose": _conv_transpose,
    "MaxPool": _pool,
    "AveragePool": _pool,
    "GlobalAveragePool": _global_pool,
    "GlobalMaxPool": _global_pool,
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
