"""ONNX importer handlers for convolutions (Conv, ConvTranspose) and pooling (MaxPool,
AveragePool, GlobalAveragePool, GlobalMaxPool).

1-D convolutions and pools (audio, text) run as 2-D ones over a height of 1: a Reshape
before and after, so one kernel serves both. A BatchNormalization that only a convolution
reads is folded into its weights and bias. Weights and biases may be fed at run time
(graph inputs without initializers): the op's role is bound to the value (`Ctx.fed_param`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from xrt.network._onnx_ctx import Ctx
from xrt.ops.norm import batchnorm_scale_shift

__all__ = ["CONV_HANDLERS"]


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
    x = ctx.value(node.input[0])
    x, nd = (x, 3) if ctx.b.values[x].ndim == 5 else _lift_1d(ctx, x)
    params, fed, kernel = _weight(ctx, nd)
    strides = _spatial(ctx, a, "strides", nd, 1)
    dil = _spatial(ctx, a, "dilations", nd, 1)
    out_pad = _spatial(ctx, a, "output_padding", nd, 0)
    auto = a.get("auto_pad", "NOTSET")
    needs_sizes = "output_shape" in a or auto in ("SAME_UPPER", "SAME_LOWER")
    rank = ctx.b.values[x].ndim
    sizes = ctx.static_shape(x)[rank - nd :] if needs_sizes else ctx.b.values[x].shape[rank - nd :]
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
    if nd == 3:  # volumetric: ConvTranspose3d on the host
        attrs3: dict[str, Any] = {"strides": strides, "pads": pads, "dilations": dil}
        attrs3 |= {"output_padding": out_pad, "groups": int(a.get("group", 1))}
        ctx.emit("ConvTranspose3d", [x], attrs3, params, output=node.output[0], fed=fed)
        return
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


def _pool3d(ctx: Ctx, x: str) -> None:
    """A 5-D (volumetric) pool: MaxPool3d / AvgPool3d on the host."""
    node, a = ctx.node, ctx.attrs()
    if len(node.output) > 1 and node.output[1]:
        raise ctx.fail("the Indices output of a 3-D MaxPool is not supported")
    kernel = _spatial(ctx, a, "kernel_shape", 3, 1)
    strides = _spatial(ctx, a, "strides", 3, 1)
    dil = _spatial(ctx, a, "dilations", 3, 1)
    pads = _spatial_pads(ctx, a, ctx.b.values[x].shape[2:], kernel, strides, dil)
    attrs: dict[str, Any] = {
        "kernel": kernel,
        "strides": strides,
        "pads": pads,
        "dilations": dil,
        "ceil_mode": bool(a.get("ceil_mode", 0)),
    }
    if node.op_type == "MaxPool":
        ctx.emit("MaxPool3d", [x], attrs, output=node.output[0])
    else:
        attrs["count_include_pad"] = bool(a.get("count_include_pad", 0))
        ctx.emit("AvgPool3d", [x], attrs, output=node.output[0])


def _pool(ctx: Ctx) -> None:
    node, a = ctx.node, ctx.attrs()
    if ctx.b.values[ctx.value(node.input[0])].ndim == 5:
        _pool3d(ctx, ctx.value(node.input[0]))
        return
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
        if len(node.output) > 1 and node.output[1]:
            order = {"storage_order": int(a.get("storage_order", 0))}
            idx = ctx.emit("MaxPool2dIndices", [x], attrs | order)
            if nd == 1:  # flat indices of the lifted (N, C, 1, L) input are those of (N, C, L)
                t = ctx.b.values[idx]
                shape = [t.shape[0], t.shape[1], t.shape[3]]
                ctx.emit("Reshape", [idx], {"shape": shape}, output=node.output[1])
            else:
                ctx.alias[node.output[1]] = idx
        y = ctx.emit("MaxPool2d", [x], attrs)  # last: _lower_1d names it
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


CONV_HANDLERS: dict[str, Callable[[Ctx], None]] = {
    "Conv": _conv,
    "ConvTranspose": _conv_transpose,
    "MaxPool": _pool,
    "AveragePool": _pool,
    "GlobalAveragePool": _global_pool,
    "GlobalMaxPool": _global_pool,
}
"""ONNX op type -> handler, for the layers above."""
