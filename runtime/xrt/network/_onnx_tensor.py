"""ONNX importer handlers for elementwise math, shapes, indexing, reductions and casts.

Operands that ONNX passes as inputs but xrt keeps as attributes (axes, starts/ends,
split lengths, target shapes, repeats) must be constant: initializers, graph inputs with
an initializer, or anything the importer folds (shapes are static).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

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
    """Identity and inference-mode Dropout: the output is the input."""
    node = ctx.node
    if node.op_type == "Dropout":
        flag = ctx.const_input(2, "Dropout training_mode")
        if flag is not None and bool(np.asarray(flag).reshape(-1)[0]):
            raise ctx.fail("Dropout with training_mode=True is not supported (inference only)")
    x = ctx.value(node.input[0])
    ctx.alias[node.output[0]] = x
    if node.op_type == "Dropout" and len(node.output) > 1 and node.output[1]:
        # Inference: nothing is dropped, the mask is all True.
        t = ctx.b.values[x]
        mask = ctx.const_value(np.ones(t.shape, np.bool_), "mask")
        ctx.alias[node.output[1]] = mask


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


def _int_list(ctx: Ctx, index: int, attr: str, what: str) -> list[int] | None:
    """An int list from the node's attribute `attr` or its constant input `index`."""
    a = ctx.attrs()
    if attr in a:
        return [int(v) for v in a[attr]]
    arr = ctx.const_input(index, what)
    return None if arr is None else [int(v) for v in arr.reshape(-1)]


def _reshape(ctx: Ctx) -> None:
    node, a = ctx.node, ctx.attrs()
    shape = [int(d) for d in ctx.need_const(node.input[1], "the target shape").reshape(-1)]
    if a.get("allowzero", 0) and 0 in shape:
        raise ctx.fail("Reshape with allowzero=1 and a 0 in the shape is not supported")
    ctx.emit("Reshape", [ctx.value(node.input[0])], {"shape": shape}, output=node.output[0])


def _squeeze(ctx: Ctx) -> None:
    node = ctx.node
    x = ctx.value(node.input[0])
    shape = list(ctx.b.values[x].shape)
    nd = len(shape)
    axes = _int_list(ctx, 1, "axes", "Squeeze axes")
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
    starts = _int_list(ctx, 1, "starts", "Slice starts")
    ends = _int_list(ctx, 2, "ends", "Slice ends")
    if starts is None or ends is None:
        raise ctx.fail("Slice needs starts and ends")
    clamp = np.iinfo(np.int64)
    big = 2**62  # INT64_MAX / INT64_MIN mean "to the end"; keep them JSON-friendly
    starts = [max(min(v, big), -big) if v in (clamp.max, clamp.min) else v for v in starts]
    ends = [max(min(v, big), -big) if v in (clamp.max, clamp.min) else v for v in ends]
    attrs = {
        "starts": starts,
        "ends": ends,
        "axes": _int_list(ctx, 3, "axes", "Slice axes") or [],
        "steps": _int_list(ctx, 4, "steps", "Slice steps") or [],
    }
    ctx.emit("Slice", [ctx.value(node.input[0])], attrs, output=node.output[0])


def _split(ctx: Ctx) -> None:
    node, a = ctx.node, ctx.attrs()
    split = _int_list(ctx, 1, "split", "Split lengths") or []
    outs = list(node.output)
    if any(not o for o in outs):
        raise ctx.fail("Split with an unnamed output is not supported")
    x = ctx.value(node.input[0])
    if "num_outputs" in a and int(a["num_outputs"]) != len(outs):
        raise ctx.fail(f"num_outputs {a['num_outputs']} but {len(outs)} outputs")
    ctx.emit("Split", [x], {"axis": int(a.get("axis", 0)), "split": split}, outputs=outs)


def _gather(ctx: Ctx) -> None:
    node, a = ctx.node, ctx.attrs()
    x, idx = ctx.value(node.input[0]), ctx.value(node.input[1])
    ctx.emit("Gather", [x, idx], {"axis": int(a.get("axis", 0))}, output=node.output[0])


def _expand(ctx: Ctx) -> None:
    node = ctx.node
    shape = [int(v) for v in ctx.need_const(node.input[1], "Expand shape").reshape(-1)]
    ctx.emit("Expand", [ctx.value(node.input[0])], {"shape": shape}, output=node.output[0])


def _tile(ctx: Ctx) -> None:
    node = ctx.node
    reps = [int(v) for v in ctx.need_const(node.input[1], "Tile repeats").reshape(-1)]
    ctx.emit("Tile", [ctx.value(node.input[0])], {"repeats": reps}, output=node.output[0])


def _reduce(ctx: Ctx) -> None:
    node, a = ctx.node, ctx.attrs()
    axes = _int_list(ctx, 1, "axes", f"{node.op_type} axes") or []
    attrs = {
        "axes": axes,
        "keepdims": bool(a.get("keepdims", 1)),
        "noop_with_empty_axes": bool(a.get("noop_with_empty_axes", 0)),
    }
    ctx.emit(node.op_type, [ctx.value(node.input[0])], attrs, output=node.output[0])


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
