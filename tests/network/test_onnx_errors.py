"""The ONNX importer's errors: each is an XrtError with the right code, naming the problem."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from netutil import make_model, rand
from onnx import TensorProto, helper

from xrt.errors import ErrorCode, XrtError
from xrt.network import Network

N = helper.make_node


def _err(model: object, **kw: object) -> XrtError:
    with pytest.raises(XrtError) as err:
        Network.from_onnx(model, **kw)  # type: ignore[arg-type]
    return err.value


def test_unsupported_operator_names_type_and_node() -> None:
    model = make_model(
        [N("Relu", ["x"], ["a"]), N("Hardmax", ["a"], ["y"], name="my_hardmax")],
        {"x": (1, 4)},
        ["y"],
    )
    err = _err(model)
    assert err.code == ErrorCode.LOAD_FAILED
    assert "'Hardmax'" in err.message and "'my_hardmax'" in err.message


def test_custom_domain_operator_is_unsupported() -> None:
    graph = helper.make_graph(
        [N("Foo", ["x"], ["y"], domain="com.example", name="foo1")],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("com.example", 1)]
    )
    err = _err(model)
    assert err.code == ErrorCode.LOAD_FAILED and "com.example::Foo" in err.message


def _relu_model(opset: int) -> object:
    graph = helper.make_graph(
        [N("Relu", ["x"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def test_opsets_below_11_are_upgraded() -> None:
    for opset in (1, 6, 7, 8, 9, 10):
        net = Network.from_onnx(_relu_model(opset))
        assert [op.op_type for op in net.ops] == ["Input", "Relu", "Output"]


def test_version_converter_failure_is_reported() -> None:
    # Opset 8's Upsample has no adapter to opset 9 when its scales are an attribute that
    # the converter cannot read (here: missing), so the converter itself fails.
    graph = helper.make_graph(
        [N("Upsample", ["x"], ["y"], mode="nearest")],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 2, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 8)])
    err = _err(model)
    assert err.code == ErrorCode.LOAD_FAILED
    assert "version_converter" in err.message and "opset 8" in err.message


def test_missing_and_corrupt_files(tmp_path: Path) -> None:
    assert _err(tmp_path / "none.onnx").code == ErrorCode.FILE_NOT_FOUND
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x08\x07garbage\xff\xff\xff")
    assert _err(bad).code == ErrorCode.LOAD_FAILED
    assert _err(b"\xff\xff\xff\xff").code == ErrorCode.LOAD_FAILED
    assert _err(12345).code == ErrorCode.WRONG_TYPE


def test_model_file_round_trip(tmp_path: Path) -> None:
    import onnx

    model = make_model([N("Relu", ["x"], ["y"])], {"x": (1, 4)}, ["y"])
    onnx.save(model, tmp_path / "m.onnx")
    assert Network.from_onnx(tmp_path / "m.onnx").op_ids == [0, 1, 2]
    assert Network.from_onnx(str(tmp_path / "m.onnx")).op_ids == [0, 1, 2]
    assert Network.from_onnx(model.SerializeToString()).op_ids == [0, 1, 2]


def test_symbolic_non_batch_dimension_needs_input_shapes() -> None:
    graph = helper.make_graph(
        [N("Relu", ["x"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, "H", "W"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    err = _err(model)
    assert (
        err.code == ErrorCode.LOAD_FAILED and "'x'" in err.message and "input_shapes" in err.message
    )
    assert Network.from_onnx(model, {"x": [2, 3, 8, 8]}).values["y"].shape == (2, 3, 8, 8)
    assert _err(model, input_shapes={"z": [1]}).code == ErrorCode.OUT_OF_RANGE
    assert _err(model, input_shapes={"x": [1, 3, 8]}).code == ErrorCode.OUT_OF_RANGE


def test_unsupported_input_dtype_is_named() -> None:
    graph = helper.make_graph(
        [N("Relu", ["x"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.COMPLEX64, [2])],
        [helper.make_tensor_value_info("y", TensorProto.COMPLEX64, [2])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    err = _err(model)
    assert err.code == ErrorCode.LOAD_FAILED and "COMPLEX64" in err.message and "'x'" in err.message


def test_unsupported_variants_name_the_node() -> None:
    inits = {"roi": np.zeros(0, np.float32), "sc": np.array([1, 1, 2, 2], np.float32)}
    resize = make_model(
        [N("Resize", ["x", "roi", "sc"], ["y"], mode="area", name="up")],
        {"x": (1, 1, 2, 2)},
        ["y"],
        inits,
        opset=18,
    )
    err = _err(resize)
    assert "'up'" in err.message and "mode 'area'" in err.message
    conv3d = make_model(
        [N("Conv", ["x", "w"], ["y"], name="c3")],
        {"x": (1, 2, 4, 4, 4)},
        ["y"],
        {"w": rand(3, 2, 1, 1, 1)},
    )
    assert "2-D" in _err(conv3d).message and "'c3'" in _err(conv3d).message


def test_shape_inference_failure_is_11011() -> None:
    graph = helper.make_graph(
        [N("Add", ["a", "b"], ["y"])],
        "g",
        [
            helper.make_tensor_value_info("a", TensorProto.FLOAT, [2, 3]),
            helper.make_tensor_value_info("b", TensorProto.FLOAT, [4, 5]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    err = _err(model)
    assert err.code == ErrorCode.LOAD_FAILED and "shape inference" in err.message


def _one_initializer_model(init: TensorProto) -> bytes:
    graph = helper.make_graph(
        [N("Add", ["x", "w"], ["y"], name="add")],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [16])],
        [init],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    return model.SerializeToString()


def test_an_initializer_whose_data_does_not_fill_its_dims_is_11011() -> None:
    """Defect: an initializer declaring dims [2**40] with 64 bytes of data escaped as
    numpy's ValueError."""
    init = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[2**40], raw_data=bytes(64))
    err = _err(_one_initializer_model(init))
    assert err.code == ErrorCode.LOAD_FAILED and "'w'" in err.message, err.message


def test_external_data_in_a_model_given_as_bytes_is_11011() -> None:
    """Defect: a model given as bytes whose initializer keeps its data in an external file
    escaped as onnx's ValidationError."""
    init = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[16])
    init.data_location = TensorProto.EXTERNAL
    entry = init.external_data.add()
    entry.key, entry.value = "location", "weights.bin"
    err = _err(_one_initializer_model(init))
    assert err.code == ErrorCode.LOAD_FAILED and "external file" in err.message, err.message
