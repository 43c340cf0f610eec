"""Helpers for the network tests: build ONNX models with onnx.helper, run onnxruntime."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from xrt.network import Network, run_network_reference

RTOL = 1e-4
"""Relative tolerance against onnxruntime (the issue's requirement)."""
ATOL_FRAC = 1e-5
"""Absolute tolerance as a fraction of the output's largest magnitude.

Float32 sums in a different order differ by a few ulps of the *partial sums*, so an output
that is the small difference of large terms can have a large relative error while being
accurate relative to the tensor's scale; 1e-5 of the largest |value| covers that and is
still far below any real bug (a wrong tap or channel moves values by O(1) of the scale).
"""


def make_model(
    nodes: Sequence[onnx.NodeProto],
    inputs: Mapping[str, Sequence[int]],
    outputs: Sequence[str],
    initializers: Mapping[str, np.ndarray] | None = None,
    opset: int = 17,
    name: str = "test",
) -> onnx.ModelProto:
    """A checked float32 model: `inputs` name -> shape, `initializers` name -> array."""
    graph = helper.make_graph(
        list(nodes),
        name,
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(s)) for n, s in inputs.items()],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs],
        initializer=[
            numpy_helper.from_array(np.asarray(a), n) for n, a in (initializers or {}).items()
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = min(model.ir_version, 10)
    # Graph outputs are declared without shapes; strict inference fills them in.
    model = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    onnx.checker.check_model(model)
    return model


def ort_run(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    """Run `model` in onnxruntime (graph optimisations off, one thread)."""
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return list(sess.run(None, dict(feeds)))


def assert_close(actual: np.ndarray, expected: np.ndarray, rtol: float = RTOL) -> None:
    atol = ATOL_FRAC * float(np.max(np.abs(expected))) if expected.size else 0.0
    assert actual.shape == expected.shape
    assert actual.dtype == expected.dtype
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol)


def random_feeds(model: onnx.ModelProto, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    inits = {i.name for i in model.graph.initializer}
    feeds = {}
    for inp in model.graph.input:
        if inp.name in inits:
            continue
        shape = [d.dim_value for d in inp.type.tensor_type.shape.dim]
        feeds[inp.name] = rng.standard_normal(shape).astype(np.float32)
    return feeds


def check_model(
    model: onnx.ModelProto, feeds: Mapping[str, np.ndarray] | None = None, **kw: object
) -> Network:
    """Import `model`, run it with the reference executor and onnxruntime, compare outputs."""
    feeds = dict(feeds) if feeds is not None else random_feeds(model)
    net = Network.from_onnx(model, **kw)  # type: ignore[arg-type]
    ours = run_network_reference(net, feeds)
    ref = ort_run(model, feeds)
    assert len(ours) == len(ref)
    for a, e in zip(ours, ref, strict=True):
        assert_close(a, e)
    return net


def rand(*shape: int, seed: int = 1, scale: float = 1.0) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)
