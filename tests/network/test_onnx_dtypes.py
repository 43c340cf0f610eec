"""Element types beyond float32, 0-d tensors, and the edge cases of the importer, each
checked against onnxruntime where it has an answer."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import onnx
import pytest
from netutil import ort_run
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from xrt.backend import HostBackend
from xrt.dtypes import DataType
from xrt.errors import ErrorCode, XrtError
from xrt.network import Network
from xrt.session import Session

N = helper.make_node


def _model(
    nodes: Sequence[onnx.NodeProto],
    inputs: Mapping[str, tuple[int, Sequence[int]]],
    outputs: Sequence[str],
    inits: Mapping[str, np.ndarray] | None = None,
    opset: int = 17,
    declare_inits_as_inputs: bool = False,
) -> onnx.ModelProto:
    graph_inputs = [helper.make_tensor_value_info(n, t, list(s)) for n, (t, s) in inputs.items()]
    initializers = [numpy_helper.from_array(np.asarray(a), n) for n, a in (inits or {}).items()]
    if declare_inits_as_inputs:
        graph_inputs += [
            helper.make_tensor_value_info(i.name, i.data_type, list(numpy_helper.to_array(i).shape))
            for i in initializers
        ]
    graph = helper.make_graph(
        list(nodes),
        "g",
        graph_inputs,
        [helper.make_tensor_value_info(n, TensorProto.UNDEFINED, None) for n in outputs],
        initializer=initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = min(model.ir_version, 10)
    return onnx.shape_inference.infer_shapes(model, strict_mode=True)


def _host(net: Network, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    with Session.create([HostBackend], net) as sess:
        sess.apply()
        return [t.numpy() for t in sess.forward(dict(feeds))]


def _check(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray]) -> Network:
    net = Network.from_onnx(model)
    ours = _host(net, feeds)
    ref = ort_run(model, feeds)
    for a, e in zip(ours, ref, strict=True):
        assert a.shape == e.shape and a.dtype == e.dtype, (a.shape, a.dtype, e.shape, e.dtype)
        if e.dtype.kind == "f":
            big = np.abs(e[np.isfinite(e)]).max(initial=1.0)
            np.testing.assert_allclose(a, e, rtol=1e-3, atol=1e-5 * big)
        else:
            np.testing.assert_array_equal(a, e)
    return net


RNG = np.random.default_rng(0)


def test_uint8_image_is_cast_normalised_and_convolved() -> None:
    w = RNG.standard_normal((4, 3, 3, 3)).astype(np.float32)
    model = _model(
        [
            N("Cast", ["img"], ["f"], to=TensorProto.FLOAT),
            N("Div", ["f", "k255"], ["n"]),
            N("Sub", ["n", "mean"], ["c"]),
            N("Conv", ["c", "w"], ["y"], pads=[1, 1, 1, 1]),
        ],
        {"img": (TensorProto.UINT8, [1, 3, 8, 8])},
        ["y"],
        {
            "k255": np.array(255, np.float32),
            "mean": np.array([0.485, 0.456, 0.406], np.float32).reshape(1, 3, 1, 1),
            "w": w,
        },
    )
    img = RNG.integers(0, 256, (1, 3, 8, 8), dtype=np.uint8)
    net = _check(model, {"img": img})
    assert net.values["img"].dtype.manual_name == "UInt8"


def test_int8_image_input() -> None:
    model = _model(
        [N("Cast", ["x"], ["f"], to=TensorProto.FLOAT), N("Relu", ["f"], ["y"])],
        {"x": (TensorProto.INT8, [1, 2, 3])},
        ["y"],
    )
    _check(model, {"x": RNG.integers(-128, 128, (1, 2, 3), dtype=np.int8)})


@pytest.mark.parametrize("itype", [TensorProto.INT64, TensorProto.INT32])
def test_runtime_indices_gather_embeddings(itype: int) -> None:
    table = RNG.standard_normal((50, 8)).astype(np.float32)
    model = _model(
        [N("Gather", ["table", "ids"], ["emb"], axis=0), N("ReduceMean", ["emb", "ax"], ["y"])],
        {"ids": (itype, [2, 5])},
        ["y", "emb"],
        {"table": table, "ax": np.array([1], np.int64)},
        opset=18,
    )
    ids = RNG.integers(-50, 50, (2, 5)).astype(helper.tensor_dtype_to_np_dtype(itype))
    _check(model, {"ids": ids})


def test_bool_mask_where_and_comparisons() -> None:
    model = _model(
        [
            N("Greater", ["x", "zero"], ["pos"]),
            N("And", ["pos", "mask"], ["keep"]),
            N("Where", ["keep", "x", "fill"], ["y"]),
            N("Not", ["keep"], ["dropped"]),
        ],
        {"x": (TensorProto.FLOAT, [3, 4]), "mask": (TensorProto.BOOL, [3, 4])},
        ["y", "dropped"],
        {"zero": np.array(0, np.float32), "fill": np.array(-1e4, np.float32)},
    )
    _check(
        model,
        {
            "x": RNG.standard_normal((3, 4)).astype(np.float32),
            "mask": RNG.integers(0, 2, (3, 4)).astype(bool),
        },
    )


def test_float16_values_and_casts() -> None:
    model = _model(
        [
            N("Relu", ["x"], ["r"]),
            N("Add", ["r", "x"], ["a"]),
            N("Cast", ["a"], ["f"], to=TensorProto.FLOAT),
            N("Sigmoid", ["f"], ["s"]),
            N("Cast", ["s"], ["y"], to=TensorProto.FLOAT16),
        ],
        {"x": (TensorProto.FLOAT16, [2, 6])},
        ["y"],
    )
    net = _check(model, {"x": RNG.standard_normal((2, 6)).astype(np.float16)})
    assert net.values["y"].dtype.manual_name == "FP16"


def test_cast_between_types_follows_onnx() -> None:
    model = _model(
        [
            N("Cast", ["x"], ["i"], to=TensorProto.INT32),  # truncates towards zero
            N("Cast", ["x"], ["b"], to=TensorProto.BOOL),
            N("Cast", ["b"], ["bf"], to=TensorProto.FLOAT),
            N("Cast", ["i"], ["i8"], to=TensorProto.INT8),
            N("Cast", ["i"], ["i64"], to=TensorProto.INT64),
        ],
        {"x": (TensorProto.FLOAT, [8])},
        ["i", "b", "bf", "i8", "i64"],
    )
    x = np.array([-2.7, -1.5, -0.5, 0.0, 0.5, 1.5, 2.7, 100.2], np.float32)
    _check(model, {"x": x})


def test_scalar_tensors_keep_shape_empty_end_to_end(tmp_path: Path) -> None:
    model = _model(
        [
            N("Mul", ["s", "k"], ["m"]),
            N("Add", ["m", "x"], ["y"]),
            N("ReduceSum", ["x"], ["t"], keepdims=0),
        ],
        {"s": (TensorProto.FLOAT, []), "x": (TensorProto.FLOAT, [3])},
        ["m", "y", "t"],
        {"k": np.array(2.5, np.float32)},
        opset=13,
    )
    net = _check(model, {"s": np.array(1.5, np.float32), "x": np.arange(3, dtype=np.float32)})
    assert net.values["s"].shape == () and net.values["m"].shape == ()
    assert net.values["t"].shape == ()
    const = next(op for op in net.ops if op.op_type == "Constant")
    assert net.params[const.params["value"]].shape == ()
    m, _, t = _host(net, {"s": np.array(1.5, np.float32), "x": np.ones(3, np.float32)})
    assert m.shape == () and t.shape == () and float(m) == 3.75 and float(t) == 3.0
    net.save(tmp_path / "scalar.json")
    loaded = Network.load(tmp_path / "scalar.json")
    assert loaded.values["m"].shape == ()
    assert loaded.params[const.params["value"]].shape == ()


def test_float64_and_uint64_run_on_the_host() -> None:
    # Host-only element types: a DOUBLE initializer stays float64 (no silent float32), and
    # UINT64 arithmetic keeps values past 2**63.
    c = np.array([1e-12, 3.0, -2.5], np.float64)
    dbl = _model(
        [N("Mul", ["x", "c"], ["m"]), N("ReduceSum", ["m"], ["y"], keepdims=0)],
        {"x": (TensorProto.DOUBLE, [2, 3])},
        ["y", "m"],
        {"c": c},
    )
    x = RNG.standard_normal((2, 3)) * 1e6
    net = _check(dbl, {"x": x})
    assert net.values["m"].dtype is DataType.FP64
    (m,) = _host(net, {"x": x})[1:]
    np.testing.assert_array_equal(m, x * c)  # exact in float64, not rounded to float32
    u64 = _model(
        [N("Add", ["a", "b"], ["s"]), N("Greater", ["s", "b"], ["g"])],
        {"a": (TensorProto.UINT64, [3]), "b": (TensorProto.UINT64, [3])},
        ["s", "g"],
    )
    a = np.array([1, 2**63, 5], np.uint64)
    b = np.array([2**63 + 7, 2**62, 2**64 - 6], np.uint64)
    _check(u64, {"a": a, "b": b})


def test_zero_size_tensors_flow_end_to_end() -> None:
    # A zero-size input has one possible value, so the importer folds it as a constant;
    # what ops make of it (empty outputs, the identity of a reduction) reaches the user.
    model = _model(
        [
            N("Relu", ["x"], ["r"]),
            N("ReduceSum", ["x", "ax"], ["s"]),
            N("ReduceMax", ["x", "ax"], ["mx"]),
            N("ReduceSum", ["x", "last"], ["e"]),
        ],
        {"x": (TensorProto.FLOAT, [2, 0, 4])},
        ["r", "s", "mx", "e"],
        {"ax": np.array([1], np.int64), "last": np.array([2], np.int64)},
        opset=18,
    )
    x = np.zeros((2, 0, 4), np.float32)
    r, s, mx, e = _host(_check(model, {"x": x}), {"x": x})
    assert r.shape == (2, 0, 4) and e.shape == (2, 0, 1)
    assert np.array_equal(s, np.zeros((2, 1, 4), np.float32))
    assert np.array_equal(mx, np.full((2, 1, 4), -np.inf, np.float32))


def test_dropout_in_training_mode_drops_and_scales() -> None:
    def model(flag: bool, seed: int | None) -> onnx.ModelProto:
        extra = {} if seed is None else {"seed": seed}
        return _model(
            [N("Dropout", ["x", "ratio", "train"], ["y", "mask"], name="drop", **extra)],
            {"x": (TensorProto.FLOAT, [40, 50])},
            ["y", "mask"],
            {"ratio": np.array(0.25, np.float32), "train": np.array(flag)},
        )

    x = RNG.standard_normal((40, 50)).astype(np.float32)
    y, mask = _host(Network.from_onnx(model(True, 7)), {"x": x})
    assert mask.dtype == np.bool_ and 0.7 < mask.mean() < 0.8  # kept with probability 0.75
    np.testing.assert_array_equal(y, np.where(mask, x * np.float32(1 / 0.75), 0))
    # A seed gives the same mask at every forward (the ONNX reference's generator), no seed
    # a fresh one.
    again, mask2 = _host(Network.from_onnx(model(True, 7)), {"x": x})
    assert np.array_equal(mask, mask2) and np.array_equal(y, again)
    ref = ReferenceEvaluator(model(True, 7)).run(None, {"x": x})
    np.testing.assert_array_equal(mask, ref[1])
    net = Network.from_onnx(model(True, None))
    with Session.create([HostBackend], net) as sess:
        sess.apply()
        masks = [sess.forward({"x": x})[1].numpy() for _ in range(2)]
    assert not np.array_equal(*masks)
    # Inference mode is the identity: the importer removes it.
    _check(model(False, 7), {"x": x})


def test_clip_with_min_above_max_gives_max() -> None:
    model = _model(
        [N("Clip", ["x", "lo", "hi"], ["y"])],
        {"x": (TensorProto.FLOAT, [10])},
        ["y"],
        {"lo": np.array(1.0, np.float32), "hi": np.array(-1.0, np.float32)},
    )
    x = np.linspace(-3, 3, 10).astype(np.float32)
    _check(model, {"x": x})
    (y,) = _host(Network.from_onnx(model), {"x": x})
    assert np.all(y == -1.0)


def test_parameters_given_as_graph_inputs_with_default_initializers() -> None:
    """Weights, shapes and clip bounds declared as graph inputs with initializers (old
    exporters, IR version 3): constants, not inputs the caller must feed."""
    w = RNG.standard_normal((2, 3, 1, 1)).astype(np.float32)
    model = _model(
        [
            N("Conv", ["x", "w"], ["c"]),
            N("Clip", ["c", "lo", "hi"], ["k"]),
            N("Reshape", ["k", "shape"], ["y"]),
        ],
        {"x": (TensorProto.FLOAT, [1, 3, 4, 4])},
        ["y"],
        {
            "w": w,
            "lo": np.array(-0.5, np.float32),
            "hi": np.array(0.5, np.float32),
            "shape": np.array([1, -1], np.int64),
        },
        declare_inits_as_inputs=True,
    )
    net = _check(model, {"x": RNG.standard_normal((1, 3, 4, 4)).astype(np.float32)})
    assert list(net.inputs) == ["x"]
    assert [op.op_type for op in net.ops] == ["Input", "Conv2d", "Clip", "Reshape", "Output"]


def test_input_values_fix_parameter_inputs_at_import() -> None:
    """A model taking its weight and clip bounds as inputs: without values the weight is
    fed at run time; values given at import make them constants; one with a default
    initializer can be given another value."""
    w = RNG.standard_normal((2, 3, 1, 1)).astype(np.float32)
    model = _model(
        [N("Conv", ["x", "w"], ["c"]), N("Clip", ["c", "lo", "hi"], ["y"])],
        {"x": (TensorProto.FLOAT, [1, 3, 4, 4]), "w": (TensorProto.FLOAT, [2, 3, 1, 1])},
        ["y"],
        {"lo": np.array(-0.5, np.float32), "hi": np.array(0.5, np.float32)},
        declare_inits_as_inputs=True,
    )
    x = RNG.standard_normal((1, 3, 4, 4)).astype(np.float32)
    fed = Network.from_onnx(model)
    assert list(fed.inputs) == ["x", "w"] and not fed.params.keys() & {"w"}
    (y0,) = _host(fed, {"x": x, "w": w})
    np.testing.assert_allclose(y0, ort_run(model, {"x": x, "w": w})[0], rtol=1e-5, atol=1e-6)
    net = Network.from_onnx(model, input_values={"w": w})
    (y,) = _host(net, {"x": x})
    (ref,) = ort_run(model, {"x": x, "w": w})
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-6)
    assert list(net.inputs) == ["x"]
    wide = Network.from_onnx(model, input_values={"w": w, "hi": np.array(9.0, np.float32)})
    (y2,) = _host(wide, {"x": x})
    (ref2,) = ort_run(model, {"x": x, "w": w, "hi": np.array(9.0, np.float32)})
    np.testing.assert_allclose(y2, ref2, rtol=1e-5, atol=1e-6)
    assert float(y2.max()) > 0.5 >= float(y.max())
    for bad, code in (
        ({"nope": w}, ErrorCode.OUT_OF_RANGE),
        ({"w": w.astype(np.float16)}, ErrorCode.WRONG_TYPE),
        ({"w": w[:1]}, ErrorCode.OUT_OF_RANGE),
    ):
        with pytest.raises(XrtError) as err:
            Network.from_onnx(model, input_values=bad)
        assert err.value.code == code
