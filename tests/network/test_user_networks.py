"""Networks of the kinds users bring, built with onnx.helper and random weights: a 1-D
keyword-spotting CNN, a YOLO-style detection head and a segmentation decoder. Float against
onnxruntime; quantized, every integer op bit-exact against its loop reference
(test_quant_exact.py) and the result close to onnxruntime's."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from netutil import ort_run
from onnx import TensorProto, helper, numpy_helper
from test_quant_exact import check_every_op

from xrt.backend import HostBackend
from xrt.network import Network
from xrt.quant import quantize_network
from xrt.session import Session

N = helper.make_node


def _model(nodes, inputs, outputs, inits, opset=17) -> onnx.ModelProto:  # type: ignore[no-untyped-def]
    graph = helper.make_graph(
        nodes,
        "user",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs.items()],
        [helper.make_tensor_value_info(n, TensorProto.UNDEFINED, None) for n in outputs],
        initializer=[numpy_helper.from_array(np.asarray(a), n) for n, a in inits.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = min(model.ir_version, 10)
    return onnx.shape_inference.infer_shapes(model, strict_mode=True)


def _w(rng: np.random.Generator, *shape: int) -> np.ndarray:
    fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 1
    return (rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)


def kws() -> onnx.ModelProto:
    """MFCC frames (1, 40, 98) -> 1-D convolutions -> mean over time -> 12 keywords."""
    r = np.random.default_rng(1)
    inits = {
        "w1": _w(r, 64, 40, 3),
        "b1": np.zeros(64, np.float32),
        "g": r.uniform(0.5, 1.5, 64).astype(np.float32),
        "be": (r.standard_normal(64) * 0.1).astype(np.float32),
        "mu": (r.standard_normal(64) * 0.1).astype(np.float32),
        "var": r.uniform(0.5, 1.5, 64).astype(np.float32),
        "w2": _w(r, 64, 64, 3),
        "w3": _w(r, 64, 1, 5),
        "axes": np.array([2], np.int64),
        "fc": _w(r, 12, 64),
        "fcb": np.zeros(12, np.float32),
    }
    nodes = [
        N("Conv", ["mfcc", "w1", "b1"], ["c1"], pads=[1, 1]),
        N("BatchNormalization", ["c1", "g", "be", "mu", "var"], ["n1"]),
        N("Relu", ["n1"], ["r1"]),
        N("MaxPool", ["r1"], ["p1"], kernel_shape=[2], strides=[2]),
        N("Conv", ["p1", "w2"], ["c2"], pads=[2, 2], dilations=[2]),
        N("Relu", ["c2"], ["r2"]),
        N("Conv", ["r2", "w3"], ["c3"], group=64, pads=[2, 2]),
        N("Add", ["c3", "p1"], ["res"]),
        N("ReduceMean", ["res", "axes"], ["pooled"], keepdims=0),
        N("Gemm", ["pooled", "fc", "fcb"], ["logits"], transB=1),
        N("Softmax", ["logits"], ["prob"]),
    ]
    return _model(nodes, {"mfcc": [1, 40, 98]}, ["prob"], inits, opset=18)


def yolo_head() -> onnx.ModelProto:
    """A YOLOv5-style head on an 8x8 grid: 3 anchors x (xy, wh, obj, 4 classes)."""
    r = np.random.default_rng(2)
    ny = nx = 8
    gy, gx = np.meshgrid(np.arange(ny), np.arange(nx), indexing="ij")
    grid = np.stack([gx, gy], -1).reshape(1, 1, ny, nx, 2).astype(np.float32)
    anchors = np.array([[10, 13], [16, 30], [33, 23]], np.float32).reshape(1, 3, 1, 1, 2)
    inits = {
        "w": _w(r, 27, 16, 1, 1),
        "b": (r.standard_normal(27) * 0.5).astype(np.float32),
        "shape5": np.array([1, 3, 9, ny, nx], np.int64),
        "split": np.array([2, 2, 5], np.int64),
        "two": np.array(2.0, np.float32),
        "half": np.array(0.5, np.float32),
        "grid": grid,
        "stride": np.array(8.0, np.float32),
        "anchors": anchors,
        "out_shape": np.array([1, -1, 9], np.int64),
    }
    nodes = [
        N("Conv", ["feat", "w", "b"], ["c"]),
        N("Reshape", ["c", "shape5"], ["r5"]),
        N("Transpose", ["r5"], ["t"], perm=[0, 1, 3, 4, 2]),
        N("Sigmoid", ["t"], ["s"]),
        N("Split", ["s", "split"], ["xy", "wh", "conf"], axis=4),
        N("Mul", ["xy", "two"], ["xy2"]),
        N("Sub", ["xy2", "half"], ["xy3"]),
        N("Add", ["xy3", "grid"], ["xy4"]),
        N("Mul", ["xy4", "stride"], ["xy5"]),
        N("Mul", ["wh", "two"], ["wh2"]),
        N("Pow", ["wh2", "two"], ["wh3"]),
        N("Mul", ["wh3", "anchors"], ["wh4"]),
        N("Concat", ["xy5", "wh4", "conf"], ["det"], axis=4),
        N("Reshape", ["det", "out_shape"], ["boxes"]),
    ]
    return _model(nodes, {"feat": [1, 16, ny, nx]}, ["boxes"], inits)


def seg_decoder() -> onnx.ModelProto:
    """U-Net style: transposed-conv upsampling, skip concat, conv, bilinear x2, classes."""
    r = np.random.default_rng(3)
    inits = {
        "wt": _w(r, 8, 4, 2, 2),
        "bt": np.zeros(4, np.float32),
        "w1": _w(r, 8, 8, 3, 3),
        "w2": _w(r, 5, 8, 1, 1),
        "scales": np.array([1, 1, 2, 2], np.float32),
    }
    nodes = [
        N("ConvTranspose", ["enc", "wt", "bt"], ["up"], strides=[2, 2]),
        N("Concat", ["up", "skip"], ["cat"], axis=1),
        N("Conv", ["cat", "w1"], ["c1"], pads=[1, 1, 1, 1]),
        N("Relu", ["c1"], ["r1"]),
        N("Resize", ["r1", "", "scales"], ["big"], mode="linear"),
        N("Conv", ["big", "w2"], ["logits"]),
        N("ArgMax", ["logits"], ["labels"], axis=1, keepdims=0),
    ]
    return _model(nodes, {"enc": [1, 8, 8, 8], "skip": [1, 4, 16, 16]}, ["logits", "labels"], inits)


NETWORKS = {"kws": kws, "yolo_head": yolo_head, "seg_decoder": seg_decoder}


def _feeds(model: onnx.ModelProto, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        i.name: rng.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim]).astype(
            np.float32
        )
        for i in model.graph.input
    }


@pytest.mark.parametrize("name", sorted(NETWORKS))
def test_float_matches_onnxruntime(name: str) -> None:
    model = NETWORKS[name]()
    feeds = _feeds(model, 0)
    net = Network.from_onnx(model)
    with Session.create([HostBackend], net) as sess:
        sess.apply()
        ours = [t.numpy() for t in sess.forward(feeds)]
    for a, e in zip(ours, ort_run(model, feeds), strict=True):
        assert a.shape == e.shape and a.dtype == e.dtype
        if e.dtype.kind == "f":
            np.testing.assert_allclose(a, e, rtol=1e-4, atol=1e-5 * float(np.abs(e).max()))
        else:
            # Labels may differ only where two class logits tie to float rounding.
            assert np.mean(a == e) > 0.99


@pytest.mark.parametrize("name", sorted(NETWORKS))
def test_quantized_is_exact_per_op_and_close(name: str) -> None:
    model = NETWORKS[name]()
    net = Network.from_onnx(model)
    qnet = quantize_network(net, [_feeds(model, s) for s in range(4)])
    feeds = _feeds(model, 9)
    assert check_every_op(qnet, feeds) >= 3
    with Session.create([HostBackend], qnet) as sess:
        sess.apply()
        ours = sess.forward(feeds)[0].numpy()
    (ref, *_) = ort_run(model, feeds)
    corr = np.corrcoef(ours.reshape(-1).astype(np.float64), ref.reshape(-1))[0, 1]
    assert corr > 0.98, f"int8 output correlates {corr:.3f} with onnxruntime's"
