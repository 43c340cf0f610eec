"""The network model: building, validation, views and the reference executor's input checks."""

from __future__ import annotations

import numpy as np
import pytest
from netutil import rand

from xrt.dtypes import QuantParams, TensorType
from xrt.errors import ErrorCode, XrtError
from xrt.network import Network, NetworkBuilder, NetworkView, Operator, run_network_reference
from xrt.ops import get_op_def, op_types


def diamond() -> Network:
    """Input(0) -> conv(1) -> relu(2) -> {maxpool(3), sigmoid(4)} -> add(5) -> Output(6);
    relu is also an output."""
    b = NetworkBuilder("diamond")
    x = b.input("x", TensorType("FP32", [1, 2, 6, 6]))
    w = b.param("w", rand(4, 2, 3, 3))
    (c,) = b.add("Conv2d", [x], {"pads": [1, 1, 1, 1]}, {"weight": w}, outputs=["c"])
    (r,) = b.add("Relu", [c], outputs=["r"])
    (m,) = b.add("MaxPool2d", [r], {"kernel": [3, 3], "pads": [1, 1, 1, 1]}, outputs=["m"])
    (s,) = b.add("Sigmoid", [r], outputs=["s"])
    (y,) = b.add("Add", [m, s], outputs=["y"])
    return b.build([y, r])


def code(excinfo: pytest.ExceptionInfo[XrtError]) -> int:
    return int(excinfo.value.code)


def test_every_op_type_has_a_kernel_and_docs() -> None:
    types = op_types()
    for needed in (
        "Conv2d",
        "MaxPool2d",
        "AvgPool2d",
        "GlobalAvgPool",
        "Relu",
        "Clip",
        "LeakyRelu",
        "Sigmoid",
        "HardSwish",
        "Add",
        "Mul",
        "Concat",
        "Reshape",
        "Flatten",
        "Transpose",
        "Gemm",
        "MatMul",
        "BatchNorm",
        "Softmax",
        "Resize",
        "Pad",
        "Cast",
        "HardOp",
    ):
        assert needed in types
    for t in types:
        d = get_op_def(t)
        assert callable(d.forward) and callable(d.infer) and d.doc


def test_view_by_ids_range_and_start() -> None:
    net = diamond()
    v = net.view([4, 2])
    assert isinstance(v, NetworkView)
    assert v.op_ids == [2, 4]  # network order
    assert v.inputs == ("c",)
    assert v.outputs == ("r", "s")  # r: network output and read by maxpool outside; s: read by add
    tail = net.view(3)  # through the Output op, which yields the network's outputs
    assert tail.op_ids == [3, 4, 5, 6] and tail.inputs == ("r",) and tail.outputs == ("y", "r")
    mid = net.view(2, 4)
    assert mid.op_ids == [2, 3] and mid.outputs == ("r", "m")
    head = net.view(0, 2)  # the Input op is fed the network's inputs
    assert head.op_ids == [0, 1] and head.inputs == ("x",) and head.outputs == ("c",)
    assert net.view(0).op_ids == net.op_ids
    alone = net.view([0])  # the Input op alone yields the inputs that ops outside read
    assert alone.inputs == ("x",) and alone.outputs == ("x",)


def test_views_run_and_compose_to_the_whole_network() -> None:
    net = diamond()
    x = rand(1, 2, 6, 6)
    y, r = run_network_reference(net, [x])
    head = net.view(0, 3)
    (r1,) = run_network_reference(head, [x])
    np.testing.assert_array_equal(r1, r)
    (r0,) = run_network_reference(net.view(1, 3), [x])  # without the Input op: the same
    np.testing.assert_array_equal(r0, r)
    y2, r2 = run_network_reference(net.view(3), {"r": r1})
    np.testing.assert_array_equal(y2, y)
    np.testing.assert_array_equal(r2, r)


@pytest.mark.parametrize(
    ("args", "want"),
    [
        (([7],), ErrorCode.OUT_OF_RANGE),
        (([0, 0],), ErrorCode.OUT_OF_RANGE),
        (([],), ErrorCode.OUT_OF_RANGE),
        ((9,), ErrorCode.OUT_OF_RANGE),
        ((-1,), ErrorCode.OUT_OF_RANGE),
        ((2, 2), ErrorCode.OUT_OF_RANGE),
        ((2, 99), ErrorCode.OUT_OF_RANGE),
        ((3, 1), ErrorCode.OUT_OF_RANGE),
        ((["1"],), ErrorCode.WRONG_TYPE),
        (("12",), ErrorCode.WRONG_TYPE),
        ((1.5,), ErrorCode.WRONG_TYPE),
        ((1, 2.0), ErrorCode.WRONG_TYPE),
    ],
)
def test_bad_view_arguments(args: tuple[object, ...], want: ErrorCode) -> None:
    with pytest.raises(XrtError) as err:
        diamond().view(*args)  # type: ignore[arg-type]
    assert err.value.code == want
    if want == ErrorCode.OUT_OF_RANGE and isinstance(args[0], list) and args[0] == [7]:
        assert "7" in err.value.message


def test_unknown_op_id_lookup() -> None:
    with pytest.raises(XrtError) as err:
        diamond().op(42)
    assert code(err) == 11003 and "42" in err.value.message


def test_reference_rejects_bad_inputs() -> None:
    net = diamond()
    x = rand(1, 2, 6, 6)
    cases = [
        ([], 11003),
        ([x, x], 11003),
        ([x.astype(np.float64)], 11010),
        ([x[:, :1]], 11003),
        ([x.tolist()], 11010),
        ({"y": x}, 11003),
        ({}, 11003),
        (x, 11010),
    ]
    for inputs, want in cases:
        with pytest.raises(XrtError) as err:
            run_network_reference(net, inputs)  # type: ignore[arg-type]
        assert code(err) == want, (
            inputs if not isinstance(inputs, np.ndarray) else "array",
            err.value,
        )


def test_builder_errors_name_the_op() -> None:
    b = NetworkBuilder()
    x = b.input("x", TensorType("FP32", [1, 3, 4, 4]))
    w = b.param("w", rand(2, 5, 3, 3))
    with pytest.raises(XrtError) as err:
        b.add("Conv2d", [x], {}, {"weight": w}, name="bad")
    assert (
        code(err) == 11003
        and "'bad'" in err.value.message
        and "input channels" in err.value.message
    )
    with pytest.raises(XrtError) as err:
        b.add("Conv2d", [x], {"stride": [1, 1]}, {"weight": w})
    assert code(err) == 11010 and "stride" in err.value.message
    with pytest.raises(XrtError) as err:
        b.add("Frobnicate", [x])
    assert code(err) == 11010 and "Frobnicate" in err.value.message
    with pytest.raises(XrtError) as err:
        b.add("Relu", ["nope"])
    assert code(err) == 11003
    with pytest.raises(XrtError) as err:
        b.add("Add", [x])
    assert code(err) == 11003


def _ops_of(net: Network) -> list[Operator]:
    return list(net.ops)


def test_network_validation_catches_inconsistencies() -> None:
    net = diamond()
    ops, values, params = _ops_of(net), dict(net.values), dict(net.params)

    def build(
        ops=ops, values=values, inputs=net.inputs, outputs=net.outputs, params=params
    ) -> None:
        Network(ops, values, inputs, outputs, params)

    with pytest.raises(XrtError, match="increase"):
        build(ops=[ops[0], ops[1].replace(op_id=5), *ops[2:]])
    with pytest.raises(XrtError, match="not produced before"):
        build(ops=[*ops[:2], ops[3].replace(op_id=2), ops[2].replace(op_id=3), *ops[4:]])
    with pytest.raises(XrtError, match="declared"):
        build(values={**values, "m": TensorType("FP32", [1, 4, 5, 5])})
    with pytest.raises(XrtError, match="never produced"):
        build(outputs=["zzz"], ops=[*ops[:-1], ops[-1].replace(inputs=("zzz",))])
    with pytest.raises(XrtError, match="Output op reads the network outputs"):
        build(outputs=["y"])  # the Output op must read exactly the network's outputs
    with pytest.raises(XrtError, match="does not exist"):
        build(params={})
    with pytest.raises(XrtError, match="produced twice"):
        build(ops=[*ops[:-1], ops[2].replace(op_id=9), ops[-1].replace(op_id=10)])
    with pytest.raises(XrtError, match="never produced"):
        build(values={**values, "ghost": TensorType("FP32", [1])})
    with pytest.raises(XrtError, match="not static"):
        build(values={**values, "x": TensorType("FP32", [-1, 2, 6, 6])})


def test_quantized_values_carry_their_scale() -> None:
    b = NetworkBuilder()
    x = b.input("x", TensorType("FP32", [2, 3]))
    (q,) = b.add("Cast", [x], {"to": "SInt8", "scale": 0.5})
    (f,) = b.add("Cast", [q], {"to": "FP32", "scale": 0.5})
    net = b.build([f])
    assert net.values[q].quant == QuantParams(0.5)
    (out,) = run_network_reference(
        net, [np.array([[0.25, 0.75, -0.25], [100.0, -100.0, 1.0]], np.float32)]
    )
    np.testing.assert_array_equal(out, [[0.0, 1.0, -0.0], [63.5, -64.0, 1.0]])
    with pytest.raises(XrtError, match="differ"):
        b2 = NetworkBuilder()
        x2 = b2.input("x", TensorType("FP32", [2]))
        (q2,) = b2.add("Cast", [x2], {"to": "SInt8", "scale": 0.5})
        b2.add("Cast", [q2], {"to": "FP32", "scale": 0.25})


def test_hardop_declares_outputs_and_has_no_host_kernel() -> None:
    b = NetworkBuilder()
    x = b.input("x", TensorType("SInt8", [1, 8], quant=QuantParams(0.1)))
    types = [{"dtype": "SInt8", "shape": [1, 4], "scale": 0.2}, {"dtype": "FP32", "shape": [2]}]
    y, z = b.add(
        "HardOp", [x], {"target": "buyi", "output_types": types, "op_ids": [3, 4]}, n_outputs=2
    )
    net = b.build([y, z])
    assert net.values[y] == TensorType("SInt8", [1, 4], quant=QuantParams(0.2))
    with pytest.raises(XrtError) as err:
        run_network_reference(net, [np.zeros((1, 8), np.int8)])
    assert code(err) == 11013 and "buyi" in err.value.message


def test_unused_ops_are_pruned_by_the_builder() -> None:
    b = NetworkBuilder()
    x = b.input("x", TensorType("FP32", [3]))
    (a,) = b.add("Relu", [x])
    b.add("Sigmoid", [x])
    net = b.build([a])
    assert [op.op_type for op in net.ops] == ["Input", "Relu", "Output"]
    assert net.input_op().outputs == ("x",)  # a pruned network keeps every input
    assert "summary" not in net.summary()
    assert "Relu" in net.summary()


def test_runtime_packages_do_not_import_onnx() -> None:
    # A board install carries numpy and ml_dtypes only; ONNX is needed just to import models.
    import subprocess
    import sys

    code = "import sys, xrt.network, xrt.ops, xrt.quant; assert 'onnx' not in sys.modules, 'onnx'"
    subprocess.run([sys.executable, "-c", code], check=True)
