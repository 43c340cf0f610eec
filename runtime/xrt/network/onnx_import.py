"""Import ONNX models as `Network` objects.

Models of any default-domain opset up to the newest the installed ``onnx`` knows are
accepted; those older than `MIN_OPSET` (11, the importer's native opset) are first
upgraded with ``onnx.version_converter`` (opset 7 and newer are the promise; the
PyTorch-converted opset-6 tests of the onnx wheel upgrade too). The importer runs ONNX shape
inference (strict), fixes symbolic input dimensions (batch = 1 unless `input_shapes` says
otherwise), folds every node whose inputs are all constant (with the ONNX reference
evaluator: Shape/Gather/Concat chains that feed a Reshape, ConstantOfShape, Range,
Constant nodes...), maps each remaining node to xrt op types, turns initializers into
parameters (a graph input with an initializer is a constant: ONNX's default value, the
form of old exporters), removes Identity and inference-mode Dropout, and folds
BatchNormalization into the preceding convolution when that convolution's output feeds
nothing else.

A weight, shape, pad, scale, size or bound that is a graph input without an initializer
is a run-time parameter: the operator's role is bound to that input and the host reads
it at each forward (`xrt.network._fed`; `ONNX_FED_INPUTS` lists which ONNX inputs may be
fed). Output shapes that depend on such data are declared from ONNX shape inference
(-1 where it does not know them) and resolved at each forward. A zero-size graph input
holds no data, so its one possible value is a constant (an empty axes list, say): the
importer folds it as one, and the input stays declared (fed an empty array).

Node handlers live in `_onnx_nn` (layers) and `_onnx_tensor` (math, shapes, indexing);
`SUPPORTED_ONNX_OPS` lists what they map, and docs/onnx-operators.md (generated) their
opset ranges and limits. Anything else is XrtError 11011 naming the operator and its node.
`import_onnx` is also `Network.from_onnx`, attached at the end of this module (see the note
in `Network`).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from xrt.dtypes import TensorType
from xrt.errors import ErrorCode, XrtError
from xrt.network._graph import Network
from xrt.network._onnx_conv import CONV_HANDLERS
from xrt.network._onnx_ctx import ONNX_DTYPES, Ctx, onnx_dtype, require_onnx
from xrt.network._onnx_nn import NN_HANDLERS
from xrt.network._onnx_tensor import TENSOR_HANDLERS
from xrt.network.framework import Framework

__all__ = ["MIN_OPSET", "OLDEST_OPSET", "PROMISED_OPSET", "SUPPORTED_ONNX_OPS", "import_onnx"]

MIN_OPSET = 11
"""The importer's native opset: older models are upgraded to it with onnx.version_converter."""
PROMISED_OPSET = 7
"""Oldest opset the importer promises (the light networks of the onnx wheel are opset 9)."""
OLDEST_OPSET = 1
"""Oldest default-domain opset the importer tries: anything below `MIN_OPSET` goes through
onnx.version_converter (tested on opset 6 and 9 models; the converter's own limits apply)."""

HANDLERS: dict[str, Callable[[Ctx], None]] = {**TENSOR_HANDLERS, **CONV_HANDLERS, **NN_HANDLERS}

SUPPORTED_ONNX_OPS: tuple[str, ...] = tuple(sorted(HANDLERS))
"""ONNX operator types the importer maps (constant-foldable nodes of any type also work)."""


# -- driver -----------------------------------------------------------------------------


def _load_model(onnx: Any, model: Any) -> Any:
    if isinstance(model, onnx.ModelProto):
        return model
    if isinstance(model, (bytes, bytearray)):
        try:
            return onnx.load_model_from_string(bytes(model))
        except Exception as exc:  # protobuf raises its own DecodeError
            raise XrtError(ErrorCode.LOAD_FAILED, f"not an ONNX model: {exc}") from None
    if isinstance(model, (str, os.PathLike)):
        path = Path(model)
        if not path.is_file():
            raise XrtError(ErrorCode.FILE_NOT_FOUND, f"ONNX file {str(path)!r} does not exist")
        try:
            return onnx.load(str(path))
        except Exception as exc:  # protobuf raises its own DecodeError
            raise XrtError(
                ErrorCode.LOAD_FAILED, f"ONNX file {str(path)!r} is not a valid model: {exc}"
            ) from None
    raise XrtError(
        ErrorCode.WRONG_TYPE,
        f"expected an ONNX path, bytes or ModelProto, got {type(model).__name__}",
    )


def _opset(model: Any) -> int:
    for imp in model.opset_import:
        if imp.domain in ("", "ai.onnx"):
            return int(imp.version)
    raise XrtError(ErrorCode.LOAD_FAILED, "the model imports no default-domain (ai.onnx) opset")


_DETACH_MIN_ELEMENTS = 4096
_DATA_FIELDS = (
    "raw_data",
    "float_data",
    "int32_data",
    "int64_data",
    "double_data",
    "uint64_data",
)


def _initializer_array(onnx: Any, init: Any) -> np.ndarray:
    """The value of an initializer; a malformed one (dims its data does not fill, data in
    an external file the model cannot name) is XrtError 11011 naming it."""
    if init.data_location == onnx.TensorProto.EXTERNAL:
        raise XrtError(
            ErrorCode.LOAD_FAILED,
            f"initializer {init.name!r} keeps its data in an external file, which this "
            "model cannot name (give the .onnx file's path, with its data beside it)",
        )
    try:
        return onnx.numpy_helper.to_array(init)
    except Exception as exc:  # numpy's ValueError, onnx's ValidationError, MemoryError...
        raise XrtError(
            ErrorCode.LOAD_FAILED,
            f"initializer {init.name!r} (dims {list(init.dims)}) cannot be read: {exc}",
        ) from None


def _detach_weights(onnx: Any, proto: Any) -> dict[str, np.ndarray]:
    """Take the data of large initializers out of `proto` (dims and type stay).

    The version converter and shape inference serialise the whole model, which costs
    seconds for VGG-sized weights; neither needs weight values (shape-like tensors are
    small and stay). Returns name -> array for the detached ones.
    """
    out: dict[str, np.ndarray] = {}
    for init in proto.graph.initializer:
        if init.data_location == onnx.TensorProto.EXTERNAL:
            continue
        if math.prod(init.dims) < _DETACH_MIN_ELEMENTS:
            continue
        out[init.name] = _initializer_array(onnx, init)
        for field in _DATA_FIELDS:
            init.ClearField(field)
    return out


def _bind_input_values(onnx: Any, proto: Any, values: Mapping[str, np.ndarray]) -> None:
    """Turn the graph inputs named in `values` into initializers holding those values."""
    declared = {i.name: i for i in proto.graph.input}
    unknown = sorted(set(values) - set(declared))
    if unknown:
        raise XrtError(
            ErrorCode.OUT_OF_RANGE,
            f"input_values names unknown input(s) {unknown} (inputs: {sorted(declared)})",
        )
    for key, raw in values.items():
        arr = np.asarray(raw)
        tt = declared[key].type.tensor_type
        want = onnx_dtype(onnx, tt.elem_type, f"ONNX input {key!r}").numpy
        if arr.dtype != want:
            raise XrtError(
                ErrorCode.WRONG_TYPE,
                f"input_values[{key!r}] is {arr.dtype}, the model declares {want}",
            )
        if tt.HasField("shape"):
            dims = [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim]
            if len(dims) != arr.ndim or any(
                d is not None and d != n for d, n in zip(dims, arr.shape, strict=False)
            ):
                raise XrtError(
                    ErrorCode.OUT_OF_RANGE,
                    f"input_values[{key!r}] has shape {list(arr.shape)}, the model "
                    f"declares {[d if d is not None else '?' for d in dims]}",
                )
    kept = [i for i in proto.graph.input if i.name not in values]
    del proto.graph.input[:]
    proto.graph.input.extend(kept)
    inits = [i for i in proto.graph.initializer if i.name not in values]
    del proto.graph.initializer[:]
    proto.graph.initializer.extend(inits)
    for key, raw in values.items():
        proto.graph.initializer.append(onnx.numpy_helper.from_array(np.asarray(raw), key))


def _upgrade(onnx: Any, proto: Any, opset: int) -> Any:
    """`proto` converted from `opset` to `MIN_OPSET` by onnx.version_converter."""
    from onnx import version_converter

    try:
        return version_converter.convert_version(proto, MIN_OPSET)
    except Exception as exc:  # the converter raises RuntimeError and others
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise XrtError(
            ErrorCode.LOAD_FAILED,
            f"ONNX opset {opset} is older than the importer's opset {MIN_OPSET}, and "
            f"onnx.version_converter could not upgrade the model: {first}",
        ) from None


def _fix_inputs(
    onnx: Any,
    model: Any,
    input_shapes: Mapping[str, Sequence[int]] | None,
    empty: set[str],
) -> list[tuple[str, TensorType]]:
    inits = {i.name for i in model.graph.initializer}
    wanted = dict(input_shapes or {})
    real = {inp.name for inp in model.graph.input if inp.name not in inits}
    unknown = sorted(set(wanted) - real)
    if unknown:
        raise XrtError(
            ErrorCode.OUT_OF_RANGE,
            f"input_shapes names unknown input(s) {unknown} (inputs: {sorted(real)})",
        )
    found = []
    for inp in model.graph.input:
        if inp.name in inits:
            continue
        ttype = inp.type.tensor_type
        if not inp.type.HasField("tensor_type"):
            raise XrtError(ErrorCode.LOAD_FAILED, f"ONNX input {inp.name!r} is not a tensor")
        dtype = onnx_dtype(onnx, ttype.elem_type, f"ONNX input {inp.name!r}")
        if inp.name in wanted:
            shape = [int(d) for d in wanted.pop(inp.name)]
            if ttype.HasField("shape") and len(ttype.shape.dim) != len(shape):
                raise XrtError(
                    ErrorCode.OUT_OF_RANGE,
                    f"input_shapes[{inp.name!r}] has rank {len(shape)}, the model "
                    f"{len(ttype.shape.dim)}",
                )
        else:
            if not ttype.HasField("shape"):
                raise XrtError(
                    ErrorCode.LOAD_FAILED,
                    f"ONNX input {inp.name!r} has no shape; pass input_shapes",
                )
            shape = []
            for axis, d in enumerate(ttype.shape.dim):
                if d.HasField("dim_value") and d.dim_value > 0:
                    shape.append(int(d.dim_value))
                elif d.HasField("dim_value") and d.dim_value == 0:
                    empty.add(inp.name)  # no data: its one possible value is a constant
                    shape.append(0)
                elif d.HasField("dim_value"):
                    raise XrtError(
                        ErrorCode.LOAD_FAILED,
                        f"ONNX input {inp.name!r} has a negative dimension at axis {axis} "
                        f"(dim_value {d.dim_value})",
                    )
                elif axis == 0:
                    shape.append(1)  # symbolic batch
                else:
                    raise XrtError(
                        ErrorCode.LOAD_FAILED,
                        f"ONNX input {inp.name!r} has a symbolic dimension "
                        f"{d.dim_param or '?'} at axis {axis}; "
                        "pass input_shapes",
                    )
        if any(d < 0 for d in shape):
            raise XrtError(ErrorCode.OUT_OF_RANGE, f"input {inp.name!r} shape {shape} must be >= 0")
        if 0 in shape:
            empty.add(inp.name)
        del ttype.shape.dim[:]
        for d in shape:
            ttype.shape.dim.add().dim_value = d
        found.append((inp.name, TensorType(dtype, shape)))
    if wanted:
        raise XrtError(
            ErrorCode.OUT_OF_RANGE, f"input_shapes names unknown input(s) {sorted(wanted)}"
        )
    return found


def _fold(ctx: Ctx, node: Any) -> bool:
    """Evaluate `node` at import time when all its inputs are known. True when folded."""
    onnx = ctx.onnx
    if node.op_type in ("Shape", "Size") and node.input[0] not in ctx.consts:
        # Shapes are static: the shape of a run-time value is a constant.
        name = ctx.alias.get(node.input[0], node.input[0])
        if name not in ctx.b.values:
            return False
        shape = np.array(ctx.b.values[name].shape, dtype=np.int64)
        if node.op_type != "Size":
            a = ctx.attrs()
            shape = shape[a.get("start", 0) : a.get("end", len(shape))]
        if np.any(shape < 0):
            raise ctx.fail(
                f"{node.input[0]!r} has a shape known only at run time "
                f"{list(ctx.b.values[name].shape)} (it depends on data fed at run time): "
                f"{node.op_type} of it is not supported"
            )
        if node.op_type == "Size":
            ctx.consts[node.output[0]] = np.array(int(np.prod(shape)), dtype=np.int64)
            return True
        ctx.consts[node.output[0]] = shape
        return True
    if node.op_type in ("Identity", "Dropout") or node.domain not in ("", "ai.onnx"):
        return False
    if not all((not v) or v in ctx.consts for v in node.input):
        return False
    if node.op_type == "ConstantOfShape":
        # Old exporters make every weight this way: np.full, not a round trip through the
        # reference evaluator's protobuf tensors (seconds for VGG-sized weights).
        value = ctx.attrs().get("value")
        fill = onnx.numpy_helper.to_array(value).reshape(-1)[:1] if value is not None else None
        if fill is None or fill.size == 0:
            fill = np.zeros(1, np.float32)
        shape = [int(d) for d in ctx.consts[node.input[0]].reshape(-1)]
        if any(d < 0 for d in shape):
            raise ctx.fail(f"ConstantOfShape shape {shape} has a negative dimension")
        ctx.consts[node.output[0]] = np.full(shape, fill[0], dtype=fill.dtype)
        return True
    from onnx import reference  # the ONNX package's own evaluator

    inputs = [v for v in node.input if v]
    graph = onnx.helper.make_graph(
        [node],
        "fold",
        [],
        [onnx.helper.make_empty_tensor_value_info(o) for o in node.output if o],
        initializer=[onnx.numpy_helper.from_array(ctx.consts[v], v) for v in dict.fromkeys(inputs)],
    )
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", ctx.opset)])
    try:
        results = reference.ReferenceEvaluator(model).run(None, {})
    except Exception as exc:  # the evaluator raises many types
        raise ctx.fail(f"cannot evaluate this constant node: {exc}") from None
    for o, r in zip([o for o in node.output if o], results, strict=True):
        ctx.consts[o] = np.asarray(r)
    return True


def import_onnx(
    model: Any,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    *,
    name: str | None = None,
    fold_batchnorm: bool = True,
    input_values: Mapping[str, np.ndarray] | None = None,
) -> Network:
    """Import an ONNX model (opset 7 or newer; older ones as far as the converter goes).

    Args:
        model: A path to an ``.onnx`` file, its bytes, or an ``onnx.ModelProto``.
        input_shapes: Shapes for inputs with symbolic dimensions. Without it, a symbolic
            first (batch) dimension becomes 1 and any other symbolic dimension is an error.
        name: Network name; default: the ONNX graph name.
        fold_batchnorm: Fold BatchNormalization into a preceding Conv whose output feeds
            nothing else (else BatchNorm stays a standalone op).
        input_values: Values for graph inputs, fixed at import: such an input becomes a
            constant (replacing its default initializer, if it has one) and is folded into
            whatever reads it. Without it, a weight, shape, pad, scale or bound that is a
            graph input is fed at run time (host only, see `ONNX_FED_INPUTS`); fixing it
            makes it a constant (static shapes, NPU-capable). A graph input with an
            initializer and no value here keeps the initializer as its constant value.

    Returns:
        The validated `Network`; network input and output names are the ONNX ones.

    Raises:
        XrtError: 11002 for a missing file; 11011 for an unreadable model, an opset the
            version converter cannot upgrade, failed shape inference, an
            unsupported element type or operator (naming it and its node);
            11003 for bad `input_shapes` or `input_values` (unknown name, wrong shape),
            11010 for an `input_values` entry of the wrong element type.
    """
    try:
        return _import(model, input_shapes, name, fold_batchnorm, input_values)
    except XrtError:
        raise
    except Exception as exc:  # malformed input must never escape as numpy or onnx errors
        raise XrtError(
            ErrorCode.LOAD_FAILED, f"ONNX model cannot be imported: {type(exc).__name__}: {exc}"
        ) from None


def _import(
    model: Any,
    input_shapes: Mapping[str, Sequence[int]] | None,
    name: str | None,
    fold_batchnorm: bool,
    input_values: Mapping[str, np.ndarray] | None,
) -> Network:
    onnx = require_onnx()
    proto = onnx.ModelProto()
    proto.CopyFrom(_load_model(onnx, model))
    if input_values:
        _bind_input_values(onnx, proto, input_values)
    weights = _detach_weights(onnx, proto)
    opset = _opset(proto)
    if opset < OLDEST_OPSET:
        raise XrtError(
            ErrorCode.LOAD_FAILED,
            f"ONNX opset {opset} is too old: opset {OLDEST_OPSET} or newer is required",
        )
    if opset < MIN_OPSET:
        proto = _upgrade(onnx, proto, opset)
        opset = MIN_OPSET
    empty: set[str] = set()
    inputs = _fix_inputs(onnx, proto, input_shapes, empty)
    try:
        inferred = onnx.shape_inference.infer_shapes(proto, strict_mode=True)
    except Exception as exc:  # onnx raises InferenceError and others
        raise XrtError(ErrorCode.LOAD_FAILED, f"ONNX shape inference failed: {exc}") from None
    known: dict[str, tuple[int, ...]] = {}
    ctx = Ctx(onnx, inferred, opset, name or inferred.graph.name or "network", fold_batchnorm)
    for vi in list(inferred.graph.value_info) + list(inferred.graph.output):
        tt = vi.type.tensor_type
        if tt.HasField("shape") and all(d.HasField("dim_value") for d in tt.shape.dim):
            known[vi.name] = tuple(int(d.dim_value) for d in tt.shape.dim)
        dtype = ONNX_DTYPES.get(int(tt.elem_type))
        if tt.HasField("shape") and dtype is not None:
            dims = [int(d.dim_value) if d.HasField("dim_value") else -1 for d in tt.shape.dim]
            ctx.onnx_types[vi.name] = TensorType(dtype, dims)
    ctx.empty = empty  # zero-size inputs: constants as parameters (Ctx.const), not as data
    for init in inferred.graph.initializer:
        arr = weights.get(init.name)
        ctx.consts[init.name] = arr if arr is not None else _initializer_array(onnx, init)
    for in_name, ttype in inputs:
        ctx.b.input(in_name, ttype)
    for node in inferred.graph.node:
        ctx.node = node
        if node.output and node.output[0] in ctx.done:
            continue  # imported together with an earlier node (a folded BatchNormalization)
        try:
            if _fold(ctx, node):
                continue
            handler = HANDLERS.get(node.op_type) if node.domain in ("", "ai.onnx") else None
            if handler is None:
                kind = (
                    node.op_type
                    if node.domain in ("", "ai.onnx")
                    else f"{node.domain}::{node.op_type}"
                )
                raise XrtError(
                    ErrorCode.LOAD_FAILED,
                    f"unsupported ONNX operator {kind!r} (node {node.name!r})",
                )
            handler(ctx)
        except XrtError as exc:
            if exc.code in (ErrorCode.LOAD_FAILED, ErrorCode.FILE_NOT_FOUND):
                raise
            raise ctx.fail(exc.message) from None
        except Exception as exc:  # a malformed node (numpy, onnx's evaluator): say which
            raise ctx.fail(f"{type(exc).__name__}: {exc}") from None
        for out in node.output:
            mine = ctx.alias.get(out, out)
            if (
                out in known
                and mine in ctx.b.values
                and ctx.b.values[mine].is_static
                and ctx.b.values[mine].shape != known[out]
            ):
                if node.op_type in ("MaxPool", "AveragePool") and ctx.attrs().get("ceil_mode", 0):
                    # ONNX shape inference keeps a ceil-mode window that starts in the end
                    # padding; onnxruntime (and xrt) drop it. Shapes after this point differ
                    # legitimately, so stop comparing.
                    known.clear()
                    break
                raise ctx.fail(
                    f"output {out!r}: xrt computes shape {list(ctx.b.values[mine].shape)}, "
                    f"ONNX shape inference {list(known[out])}"
                )
    ctx.node = None
    outputs = []
    for o in inferred.graph.output:
        v = ctx.value(o.name)
        if v != o.name:
            (v,) = ctx.b.add(
                "Identity",
                [v],
                outputs=[o.name] if o.name not in ctx.b.values else None,
                name=o.name,
            )
        outputs.append(v)
    try:
        network = ctx.b.build(outputs)
    except XrtError as exc:
        raise XrtError(ErrorCode.LOAD_FAILED, f"ONNX model: {exc.message}") from None
    network.framework = Framework.ONNX
    network.framework_version = f"opset {opset}"
    return network


def _network_from_onnx(
    cls: type[Network],
    model: Any,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    *,
    name: str | None = None,
    fold_batchnorm: bool = True,
    input_values: Mapping[str, np.ndarray] | None = None,
) -> Network:
    """Import an ONNX model (opset >= 7); see `import_onnx`."""
    return import_onnx(
        model,
        input_shapes,
        name=name,
        fold_batchnorm=fold_batchnorm,
        input_values=input_values,
    )


Network.from_onnx = classmethod(_network_from_onnx)  # type: ignore[method-assign,assignment]
