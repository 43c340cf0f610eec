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
