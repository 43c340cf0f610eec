"""ONNX importer handlers for elementwise math, shapes, indexing, reductions and casts.

Operands that ONNX passes as inputs but xrt keeps as attributes (axes, starts/ends,
split lengths, target shapes, repeats) are attributes when they are constant
(initializers, graph inputs with an initializer, or anything the importer folds); a graph
input without an initializer is fed at run time instead: the attribute is bound to it
(``Operator.fed``) and the output shapes it decides are resolved at each forward.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from xrt.network._onnx_ctx import Ctx, onnx_dtype
from xrt.ops.mathops import BINARY_OPS, COMPARE_OPS, UNARY_FLOAT_OPS, VARIADIC_OPS

__all__ = ["TENSOR_HANDLERS", "passthrough"]


def same(op_type: str, keep: Sequence[str] = ()) -> Callable[[Ctx], None]:
    """A handler for an ONNX op that maps to one xrt op with the same inputs."""

    def handler(ctx: Ctx) -> None:
        a = ctx.attrs()
        attrs = {k: a[k] for k in keep if k in a}
        ctx.emit(
            op_type, [ctx.value(v) for v in ctx.node.input if v], attrs, output=ctx.node.output[0]
        )

    return handler


def passthrough(ctx: Ctx) -> None:
    """Identity and inference-mode Dropout: the output is the input (training-mode Dropout,
    with training_mode True or fed at run time, is the Dropout op)."""
    node = ctx.node
    if node.op_type == "Dropout":
        flag = ctx.fed_or_const(2)
        if isinstance(flag, str) or (flag is not None and bool(np.asarray(flag).reshape(-1)[0])):
            _dropout(ctx, flag)
            return
    x = ctx.value(node.input[0])
    ctx.alias[node.output[0]] = x
    if node.op_type == "Dropout" and len(node.output) > 1 and node.output[1]:
        # Inference: nothing is dropped, the mask is all True.
        mask = ctx.const_value(np.ones(ctx.static_shape(x), np.bool_), "mask")
        ctx.alias[node.output[1]] = mask


def _dropout(ctx: Ctx, flag: np.ndarray | str) -> None:
    node = ctx.node
    x = ctx.value(node.input[0])
    attrs: dict[str, Any] = {"seed": ctx.attrs().get("seed")}
    fed: dict[str, str] = {}
    for index, role in ((1, "ratio"), (2, "training_mode")):
        got = flag if index == 2 else ctx.fed_or_const(index)
        if isinstance(got, str):
            fed[role] = got
        elif got is not None:
            value = np.asarray(got).reshape(-1)[0]
            attrs[role] = bool(value) if role == "training_mode" else float(value)
    mask = node.output[1] if len(node.output) > 1 and node.output[1] else None
    outputs = [node.output[0], mask or ctx.b.unique(f"{node.output[0]}:mask")]
    ctx.emit("Dropout", [x], attrs, outputs=outputs, fed=fed)


def _sum(ctx: Ctx) -> None:
    """Sum of one or more inputs; float sums become a chain of Add (QAdd when quantized)."""
    node = ctx.node
    ins = [ctx.value(v) for v in node.input]
    types = [ctx.b.values[v] for v in ins]
    if len(ins) == 1:
        ctx.alias[node.output[0]] = ins[0]
        return
    if not types[0].dtype.is_float:
        ctx.emit("Sum", ins, output=node.output[0])
        return
    acc = ins[0]
    for k, v in enumerate(ins[1:], 2):
        acc = ctx.emit("Add", [acc, v], output=node.output[0] if k == len(ins) else None)


def _cast(ctx: Ctx) -> None:
    node, a = ctx.node, ctx.attrs()
    x = ctx.value(node.input[0])
    src = ctx.b.values[x].dtype
    to = onnx_dtype(ctx.onnx, int(a["to"]), "Cast target")
    if a.get("saturate", 1) == 0 and not to.is_float:
        pass  # saturate only concerns float8 targets, which xrt does not have
    if to is src:
        ctx.alias[node.output[0]] = x
        return
    attrs = {"to": to.manual_name, "rounding": "truncate"}
    ctx.emit("Cast", [x], attrs, output=node.output[0])


def _int_list(ctx: Ctx, index: int, attr: str) -> list[int] | str | None:
    """An int list from the node's attribute `attr` or its constant input `index`; the
    value fed at run time when that input is a graph input without an initializer."""
    a = ctx.attrs()
    if attr in a:
        return [int(v) for v in a[attr]]
    got = ctx.fed_or_const(index)
    return got if got is None or isinstance(got, str) else [int(v) for v in got.reshape(-1)]


def _emit_fed(
    ctx: Ctx,
    op_type: str,
    x: str,
    attrs: dict[str, Any],
    fed: dict[str, str],
    dims: list[int],
) -> None:
    """Emit `op_type` on `x` with `fed` roles; its output is declared with `dims` (-1 where
    they depend on the fed data), refined by ONNX shape inference."""
    out_t = ctx.dyn_type(ctx.node.output[0], ctx.b.values[x].dtype, dims)
    ctx.emit(op_type, [x], attrs, output=ctx.node.output[0], fed=fed, types=[out_t])


def _reshape(ctx: Ctx) -> None:
    node, a = ctx.node, ctx.attrs()
    x = ctx.value(node.input[0])
    got = ctx.fed_or_const(1)
    attrs = {"allowzero": True} if a.get("allowzero", 0) else {}
    if isinstance(got, str):
        _emit_fed(ctx, "Reshape", x, attrs, {"shape": got}, [-1] * ctx.fed_length(got))
        return
    shape = [int(d) for d in ctx.need_const(node.input[1], "the target shape").reshape(-1)]
    ctx.emit("Reshape", [x], {"shape": shape, **attrs}, output=node.output[0])


def _squeeze(ctx: Ctx) -> None:
    node = ctx.node
    x = ctx.value(node.input[0])
    shape = list(ctx.b.values[x].shape)
    nd = len(shape)
    axes = _int_list(ctx, 1, "axes")
    if isinstance(axes, str) or (axes is not None and not ctx.b.values[x].is_static):
        # Axes fed at run time (or an input shape known only then): Squeeze / Unsqueeze ops.
        n = ctx.fed_length(axes) if isinstance(axes, str) else len(axes)
        rank = nd - n if node.op_type == "Squeeze" else nd + n
        fed = {"axes": axes} if isinstance(axes, str) else {}
        attrs = {} if fed else {"axes": axes}
        _emit_fed(ctx, node.op_type, x, attrs, fed, [-1] * rank)
        return
    ctx.static_shape(x)
    if node.op_type == "Squeeze":
        if axes is None:
            axes = [i for i, d in enumerate(shape) if d == 1]
        axes = [ax % nd if -nd <= ax < nd else ax for ax in axes]
        bad = [ax for ax in axes if not 0 <= ax < nd or shape[ax] != 1]
        if bad:
            raise ctx.fail(f"cannot squeeze axes {bad} of shape {shape}")
        out = [d for i, d in enumerate(shape) if i not in axes]
    else:
        if axes is None:
            raise ctx.fail("Unsqueeze needs axes")
        rank = nd + len(axes)
        norm = sorted(ax % rank if -rank <= ax < rank else rank for ax in axes)
        if norm and (norm[-1] >= rank or len(set(norm)) != len(norm)):
            raise ctx.fail(f"axes {axes} are invalid for output rank {rank}")
        out = list(shape)
        for ax in norm:
            out.insert(ax, 1)
    ctx.emit("Reshape", [x], {"shape": out}, output=node.output[0])


def _concat(ctx: Ctx) -> None:
    a = ctx.attrs()
    ctx.emit(
        "Concat",
        [ctx.value(v) for v in ctx.node.input],
        {"axis": int(a["axis"])},
        output=ctx.node.output[0],
    )


def _transpose(ctx: Ctx) -> None:
    a = ctx.attrs()
    ctx.emit(
        "Transpose",
        [ctx.value(ctx.node.input[0])],
        {"perm": list(a.get("perm", []))},
        output=ctx.node.output[0],
    )


def _slice(ctx: Ctx) -> None:
    node = ctx.node
    x = ctx.value(node.input[0])
    clamp = np.iinfo(np.int64)
    big = 2**62  # INT64_MAX / INT64_MIN mean "to the end"; keep them JSON-friendly
    attrs: dict[str, Any] = {}
    fed: dict[str, str] = {}
    for index, key in enumerate(("starts", "ends", "axes", "steps"), 1):
        got = _int_list(ctx, index, key)
        if isinstance(got, str):
            fed[key] = got
        elif got is not None:
            attrs[key] = [max(min(v, big), -big) if v in (clamp.max, clamp.min) else v for v in got]
        elif key in ("starts", "ends"):
            raise ctx.fail("Slice needs starts and ends")
    if fed:
        _emit_fed(ctx, "Slice", x, attrs, fed, [-1] * ctx.b.values[x].ndim)
        return
    ctx.emit("Slice", [x], attrs, output=node.output[0])


def _split(ctx: Ctx) -> None:
    node, a = ctx.node, ctx.attrs()
    split = _int_list(ctx, 1, "split")
    outs = list(node.output)
    if any(not o for o in outs):
        raise ctx.fail("Split with an unnamed output is not supported")
    x = ctx.value(node.input[0])
    if "num_outputs" in a and int(a["num_outputs"]) != len(outs):
        raise ctx.fail(f"num_outputs {a['num_outputs']} but {len(outs)} outputs")
    attrs: dict[str, Any] = {"axis": int(a.get("axis", 0))}
    if isinstance(split, str):  # lengths fed at run time: the split axis is resolved then
        t = ctx.b.values[x]
        axis = attrs["axis"] % t.ndim if -t.ndim <= attrs["axis"] < t.ndim else 0
        dims = [-1 if i == axis else d for i, d in enumerate(t.shape)]
        types = [ctx.dyn_type(o, t.dtype, dims) for o in outs]
        ctx.emit("Split", [x], attrs, outputs=outs, fed={"split": split}, types=types)
        return
    attrs["split"] = split or []
    ctx.emit("Split", [x], attrs, outputs=outs)


def _gather(ctx: Ctx) -> None:
    node, a = ctx.node, ctx.attrs()
    x, idx = ctx.value(node.input[0]), ctx.value(node.input[1])
    ctx.emit("Gather", [x, idx], {"axis": int(a.get("axis", 0))}, output=node.output[0])


def _expand(ctx: Ctx) -> None:
    node = ctx.node
    x = ctx.value(node.input[0])
    got = ctx.fed_or_const(1)
    if isinstance(got, str):
        rank = max(ctx.fed_length(got), ctx.b.values[x].ndim)
        _emit_fed(ctx, "Expand", x, {}, {"shape": got}, [-1] * rank)
        return
    shape = [int(v) for v in ctx.need_const(node.input[1], "Expand shape").reshape(-1)]
    ctx.emit("Expand", [x], {"shape": shape}, output=node.output[0])


def _tile(ctx: Ctx) -> None:
    node = ctx.node
    x = ctx.value(node.input[0])
    got = ctx.fed_or_const(1)
    if isinstance(got, str):
        _emit_fed(ctx, "Tile", x, {}, {"repeats": got}, [-1] * ctx.b.values[x].ndim)
        return
    reps = [int(v) for v in ctx.need_const(node.input[1], "Tile repeats").reshape(-1)]
    ctx.emit("Tile", [x], {"repeats": reps}, output=node.output[0])


def _reduce(ctx: Ctx) -> None:
    node, a = ctx.node, ctx.attrs()
    axes = _int_list(ctx, 1, "axes")
    x = ctx.value(node.input[0])
    attrs: dict[str, Any] = {
        "keepdims": bool(a.get("keepdims", 1)),
        "noop_with_empty_axes": bool(a.get("noop_with_empty_axes", 0)),
    }
    if isinstance(axes, str):  # axes fed at run time (a non-empty list: the value has data)
        nd = ctx.b.values[x].ndim
        rank = nd if attrs["keepdims"] else nd - ctx.fed_length(axes)
        _emit_fed(ctx, node.op_type, x, attrs, {"axes": axes}, [-1] * max(rank, 0))
        return
    attrs["axes"] = axes or []
    ctx.emit(node.op_type, [x], attrs, output=node.output[0])


def _prelu(ctx: Ctx) -> None:
    node = ctx.node
    x = ctx.value(node.input[0])
    slope = ctx.const(node.input[1])
    xt = ctx.b.values[x]
    if (
        slope is not None
        and slope.ndim == 1
        and xt.ndim > 2
        and slope.size == xt.shape[1]
        and slope.size != xt.shape[-1]
    ):
        # A per-channel slope written as [C] (old exporters): it broadcasts over axis 1.
        slope = slope.reshape((-1,) + (1,) * (xt.ndim - 2))
    s = (
        ctx.const_value(slope.astype(xt.dtype.numpy), "slope")
        if slope is not None
        else ctx.value(node.input[1])
    )
    ctx.emit("PRelu", [x, s], output=node.output[0])


def _elementwise_handlers() -> dict[str, Callable[[Ctx], None]]:
    out: dict[str, Callable[[Ctx], None]] = {}
    for name in UNARY_FLOAT_OPS:
        keep = {
            "Gelu": ("approximate",),
            "Elu": ("alpha",),
            "Selu": ("alpha", "gamma"),
            "ThresholdedRelu": ("alpha",),
        }.get(name, ())
        out[name] = same(name, keep)
    for name in ("Abs", "Neg", "Sign", "Not", "Where", *COMPARE_OPS, *BINARY_OPS):
        out[name] = same(name, ("fmod",) if name == "Mod" else ())
    for name in VARIADIC_OPS:
        out[name] = same(name)
    out["Sum"] = _sum
    out["PRelu"] = _prelu
    return out


TENSOR_HANDLERS: dict[str, Callable[[Ctx], None]] = {
    **_elementwise_handlers(),
    "Relu": same("Relu"),
    "LeakyRelu": same("LeakyRelu", ("alpha",)),
    "Sigmoid": same("Sigmoid"),
    "HardSwish": same("HardSwish"),
    "HardSigmoid": same("HardSigmoid", ("alpha", "beta")),
    "Add": same("Add"),
    "Mul": same("Mul"),
    "Concat": _concat,
    "Reshape": _reshape,
    "Flatten": same("Flatten", ("axis",)),
    "Transpose": _transpose,
    "Squeeze": _squeeze,
    "Unsqueeze": _squeeze,
    "Slice": _slice,
    "Split": _split,
    "Gather": _gather,
    "Expand": _expand,
    "Tile": _tile,
    "DepthToSpace": same("DepthToSpace", ("blocksize", "mode")),
    "SpaceToDepth": same("SpaceToDepth", ("blocksize", "mode")),
    "ArgMax": same("ArgMax", ("axis", "keepdims", "select_last_index")),
    "ArgMin": same("ArgMin", ("axis", "keepdims", "select_last_index")),
    **{
        name: _reduce
        for name in (
            "ReduceMean",
            "ReduceSum",
            "ReduceMax",
            "ReduceMin",
            "ReduceProd",
            "ReduceL1",
            "ReduceL2",
            "ReduceSumSquare",
            "ReduceLogSumExp",
        )
    },
    "Identity": passthrough,
    "Dropout": passthrough,
    "Cast": _cast,
}
"""ONNX op type -> handler, for the ops above."""
