"""The classic networks shipped in the onnx wheel (`onnx/backend/test/data/light/`).

Each is opset 9 and holds its weights as ConstantOfShape nodes (constant values), so the
stored output is nearly uniform; `with_random_weights` replaces every such weight with
random values of the shape it had, scaled by its role, so that the network computes
something worth comparing against onnxruntime.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

LIGHT_DIR = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
LIGHT_MODELS = sorted(p.stem.removeprefix("light_") for p in LIGHT_DIR.glob("light_*.onnx"))
"""Model names: bvlc_alexnet, densenet121, inception_v1, ... (nine in onnx 1.23)."""


def light_path(name: str) -> Path:
    return LIGHT_DIR / f"light_{name}.onnx"


def stored_output(name: str) -> np.ndarray:
    return numpy_helper.to_array(onnx.load_tensor(str(LIGHT_DIR / f"light_{name}_output_0.pb")))


def data_inputs(model: onnx.ModelProto) -> list[onnx.ValueInfoProto]:
    """Graph inputs that are real inputs (not weights given a default initializer)."""
    inits = {i.name for i in model.graph.initializer}
    made = {o for n in model.graph.node for o in n.output}
    return [i for i in model.graph.input if i.name not in inits and i.name not in made]


def random_feeds(model: onnx.ModelProto, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        i.name: rng.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim]).astype(
            np.float32
        )
        for i in data_inputs(model)
    }


def _role(model: onnx.ModelProto, value: str) -> str:
    """How a weight is used: "conv" / "gemm" / "gemm_t" (a weight, gemm_t stored (N, K)),
    "positive" (scales, variances) or "small" (biases, means)."""
    users = [(n, list(n.input).index(value)) for n in model.graph.node if value in n.input]
    for node, k in users:
        if node.op_type == "Conv" and k == 1:
            return "conv"
        if node.op_type == "Gemm" and k == 1:
            trans_b = any(a.name == "transB" and a.i for a in node.attribute)
            return "gemm_t" if trans_b else "gemm"
        if node.op_type == "BatchNormalization" and k in (1, 4):
            return "positive"
        if node.op_type == "Unsqueeze":
            return _role(model, node.output[0])
        if node.op_type == "Mul":
            return "positive"
    return "small"


def with_random_weights(name: str, seed: int = 0) -> onnx.ModelProto:
    """The light model with each ConstantOfShape weight replaced by a random initializer."""
    model = onnx.load(str(light_path(name)))
    rng = np.random.default_rng(seed)
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    keep = []
    new_inits = []
    for node in model.graph.node:
        if node.op_type != "ConstantOfShape":
            keep.append(node)
            continue
        shape = [int(d) for d in inits[node.input[0]].reshape(-1)]
        role = _role(model, node.output[0])
        if role in ("conv", "gemm", "gemm_t"):
            fan_in = {"conv": int(np.prod(shape[1:])), "gemm": shape[0], "gemm_t": shape[-1]}
            arr = rng.standard_normal(shape) * np.sqrt(2.0 / max(fan_in[role], 1))
        elif role == "positive":
            arr = rng.uniform(0.5, 1.5, shape)
        else:
            arr = rng.standard_normal(shape) * 0.1
        new_inits.append(numpy_helper.from_array(arr.astype(np.float32), node.output[0]))
        # IR version 3: an initializer must also be declared as a graph input.
        model.graph.input.append(
            onnx.helper.make_tensor_value_info(node.output[0], onnx.TensorProto.FLOAT, shape)
        )
    del model.graph.node[:]
    model.graph.node.extend(keep)
    model.graph.initializer.extend(new_inits)
    return model


def _skeleton(model: onnx.ModelProto) -> onnx.ModelProto:
    """`model` without its large initializers, for shape inference: IR version 3 declares
    every initializer as a graph input with its shape, so only the small ones (Reshape's
    shapes) matter, and VGG-19's 400 MB of weights need not be serialized for it."""
    g = model.graph
    small = [i for i in g.initializer if np.prod(i.dims) <= 64]
    graph = onnx.helper.make_graph(g.node, g.name, g.input, g.output, small)
    return onnx.helper.make_model(
        graph, ir_version=model.ir_version, opset_imports=model.opset_import
    )


def _shapes(model: onnx.ModelProto) -> dict[str, tuple[int, ...]]:
    """Every value's shape by ONNX shape inference (inputs, intermediates, outputs)."""
    inferred = onnx.shape_inference.infer_shapes(_skeleton(model))
    out = {}
    for vi in [*inferred.graph.input, *inferred.graph.value_info, *inferred.graph.output]:
        dims = vi.type.tensor_type.shape.dim
        if dims and all(d.HasField("dim_value") for d in dims):
            out[vi.name] = tuple(int(d.dim_value) for d in dims)
    return out


def reduced(model: onnx.ModelProto, hw: int) -> onnx.ModelProto:
    """`model` (one of these networks, already with its weights) for ``hw x hw`` inputs.

    The networks were made for 224 x 224; what depends on that is adjusted so the same
    layers run on smaller feature maps: an average pool whose output was one pixel becomes
    a global average pool, a Reshape to a fixed shape gets its spatial sizes (or, flattening,
    its feature count) from the new input, and the dense layer after a flatten keeps the
    first columns of its weight (as many as features remain). Everything else (weights,
    channels, strides, operators) is unchanged, so every lowering still runs.
    """
    before = _shapes(model)
    model = onnx.ModelProto.FromString(model.SerializeToString())
    g = model.graph
    for i in data_inputs(model):
        dims = i.type.tensor_type.shape.dim
        dims[2].dim_value = dims[3].dim_value = hw
    inits = {i.name: i for i in g.initializer}
    changed = True
    while changed:  # each pass fixes what the previous one's shapes reveal
        changed = False
        after = _shapes(model)
        for k, node in enumerate(g.node):
            src = node.input[0] if node.input else ""
            if src not in before or src not in after:
                continue
            old, new = before[src], after[src]
            if node.op_type == "AveragePool" and before.get(node.output[0], ())[2:] == (1, 1):
                g.node[k].CopyFrom(
                    onnx.helper.make_node("GlobalAveragePool", [src], list(node.output), node.name)
                )
                changed = True
            elif node.op_type == "Reshape" and node.input[1] in inits:
                was = numpy_helper.to_array(inits[node.input[1]]).astype(np.int64)
                shape = was.copy()
                # A flatten (of the current shape) keeps the batch axis: Inception v1's
                # (1, 1, 1000, 1024) -> (1000, 1024) reshape of its classifier weight is none.
                if len(shape) == 2 and len(new) == 4 and shape[0] in (0, old[0]):
                    shape = np.array([new[0], int(np.prod(new[1:]))], np.int64)
                elif old != new and tuple(shape[-2:]) == old[-2:]:
                    shape[-2:] = new[-2:]
                if np.array_equal(shape, was):
                    continue
                inits[node.input[1]].CopyFrom(numpy_helper.from_array(shape, node.input[1]))
                changed = True
            elif node.op_type == "Gemm" and node.input[1] in inits and len(new) == 2:
                w = numpy_helper.to_array(inits[node.input[1]])
                trans_b = any(a.name == "transB" and a.i for a in node.attribute)
                cut = w[:, : new[1]] if trans_b else w[: new[1]]
                if cut.shape != w.shape:
                    inits[node.input[1]].CopyFrom(numpy_helper.from_array(cut, node.input[1]))
                    _declare(model, node.input[1], cut.shape)
                    changed = True
    del g.value_info[:]
    for o in g.output:
        o.type.tensor_type.ClearField("shape")
    inferred = onnx.shape_inference.infer_shapes(_skeleton(model), strict_mode=True).graph
    g.value_info.extend(inferred.value_info)
    for o, io in zip(g.output, inferred.output, strict=True):
        o.CopyFrom(io)
    return model


def _declare(model: onnx.ModelProto, name: str, shape: tuple[int, ...]) -> None:
    """Update the graph input declaring initializer `name` (IR version 3 declares them)."""
    for i in model.graph.input:
        if i.name == name:
            i.CopyFrom(onnx.helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, shape))


def with_near_dead_channels(model: onnx.ModelProto, factor: float = 1e-7) -> onnx.ModelProto:
    """A copy of `model` whose every Conv / Gemm weight initializer has its first output
    channel scaled by `factor`: a channel whose weights are all near zero, whose bias
    (quantized at ``s_in * max|w| / 127``) then needs more than 31 bits (issue 45)."""
    model = onnx.ModelProto.FromString(model.SerializeToString())
    inits = {i.name: i for i in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type not in ("Conv", "Gemm") or node.input[1] not in inits:
            continue
        arr = numpy_helper.to_array(inits[node.input[1]]).copy()
        trans_b = any(a.name == "transB" and a.i for a in node.attribute)
        if node.op_type == "Gemm" and not trans_b:
            arr[:, 0] *= factor  # a (K, N) weight: output channel 0 is column 0
        else:
            arr[0] *= factor
        inits[node.input[1]].CopyFrom(numpy_helper.from_array(arr, node.input[1]))
    return model
