"""What the quantizer produces: op choices, fusion, parameters, names, fallbacks, errors."""

from __future__ import annotations

import numpy as np
import pytest
from netutil import make_model, ort_run, rand, random_feeds
from onnx import helper
from onnx_zoo import COMPOSITES

from xrt.dtypes import DataType
from xrt.errors import ErrorCode, XrtError
from xrt.network import Network, run_network_reference
from xrt.ops import intmath
from xrt.quant import INT_SUFFIX, calibrate, quantize_network, quantize_weight_per_channel

N = helper.make_node


def _conv_relu6_model() -> object:
    return make_model(
        [N("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]), N("Clip", ["c", "lo", "hi"], ["y"])],
        {"x": (1, 3, 6, 6)},
        ["y"],
        {
            "w": rand(5, 3, 3, 3),
            "b": rand(5),
            "lo": np.array(0.0, np.float32),
            "hi": np.array(6.0, np.float32),
        },
    )


def test_conv_relu6_becomes_one_qconv_with_folded_bounds() -> None:
    model = _conv_relu6_model()
    net = Network.from_onnx(model)
    samples = [random_feeds(model, seed=s) for s in range(4)]
    ranges = calibrate(net, samples)
    q = quantize_network(net, ranges=ranges)
    assert [op.op_type for op in q.ops] == ["Input", "Cast", "QConv2d", "Cast", "Output"]
    conv = q.ops[2]
    s_out = ranges["y"].scale
    assert conv.attrs["lo"] == 0
    assert conv.attrs["hi"] == min(127, intmath.quantize_scalar(6.0, s_out))
    assert conv.attrs["out_scale"] == s_out
    p = q.op_params(conv)
    assert p["weight"].dtype == np.int8 and np.abs(p["weight"].astype(int)).max() == 127
    assert p["bias"].dtype == np.int32 and p["multiplier"].dtype == np.int32
    assert np.all((p["multiplier"] >= 2**14) & (p["multiplier"] < 2**15))
    w_q, s_w = quantize_weight_per_channel(
        Network.from_onnx(model).params[net.ops[1].params["weight"]]
    )
    np.testing.assert_array_equal(p["weight"], w_q)
    s_in = ranges["x"].scale
    want = [intmath.quantize_multiplier(s_in * sw / s_out) for sw in s_w]
    assert p["multiplier"].tolist() == [m for m, _ in want] and p["shift"].tolist() == [
        s for _, s in want
    ]
    # Names: float inputs/outputs keep theirs, int8 values get the suffix.
    assert q.inputs == ("x",) and q.outputs == ("y",)
    assert q.values["y"].dtype is DataType.FP32
    assert q.values["y" + INT_SUFFIX].dtype is DataType.SINT8
    assert q.values["y" + INT_SUFFIX].quant.scale == (s_out,)


def test_integer_outputs_on_request() -> None:
    model = _conv_relu6_model()
    net = Network.from_onnx(model)
    q = quantize_network(net, [random_feeds(model)], dequantize_outputs=False)
    assert q.outputs == ("y" + INT_SUFFIX,)
    (y,) = run_network_reference(q, random_feeds(model))
    assert y.dtype == np.int8 and y.min() >= 0


def test_unfused_activations_and_no_fusion_option() -> None:
    model = _conv_relu6_model()
    net = Network.from_onnx(model)
    q = quantize_network(net, [random_feeds(model)], fuse_activations=False)
    assert [op.op_type for op in q.ops] == ["Input", "Cast", "QConv2d", "QClip", "Cast", "Output"]
    clip = q.ops[3]
    s = q.values[clip.inputs[0]].quant.scale[0]
    assert (clip.attrs["lo"], clip.attrs["hi"]) == (0, min(127, intmath.quantize_scalar(6.0, s)))


def test_residual_add_relu_fuses_into_qadd() -> None:
    net = Network.from_onnx(COMPOSITES["residual"]())
    q = quantize_network(net, [random_feeds(COMPOSITES["residual"]())])
    adds = [op for op in q.ops if op.op_type == "QAdd"]
    assert len(adds) == 2 and all(op.attrs["lo"] == 0 for op in adds)
    assert "Relu" not in {op.op_type for op in q.ops}


def test_fallback_ops_run_in_float() -> None:
    g = {"w": rand(4, 3, 3, 3)}
    model = make_model(
        [
            N("Conv", ["x", "w"], ["c"]),
            N("Relu", ["c"], ["r"]),
            N("LRN", ["r"], ["bn"], size=3),
            N("Relu", ["bn"], ["r2"]),
            N("Flatten", ["r2"], ["f"]),
            N("Softmax", ["f"], ["y"]),
        ],
        {"x": (1, 3, 5, 5)},
        ["y"],
        g,
    )
    net = Network.from_onnx(model)
    samples = [random_feeds(model, seed=s) for s in range(4)]
    q = quantize_network(net, samples)
    types = [op.op_type for op in q.ops]
    assert types == [
        "Input",
        "Cast",
        "QConv2d",
        "Cast",
        "LRN",
        "Cast",
        "Relu",
        "Flatten",
        "Cast",
        "Softmax",
        "Output",
    ]
    ranges = calibrate(net, samples)
    for feed in samples:
        err = np.abs(run_network_reference(q, feed)[0] - ort_run(model, feed)[0])
        assert err.max() <= 10 * ranges["y"].scale


def test_constant_operands_are_quantized_constants() -> None:
    model = make_model(
        [N("Mul", ["x", "c"], ["y"])],
        {"x": (1, 4)},
        ["y"],
        {"c": np.array([[0.5, -2.0, 1.0, 4.0]], np.float32)},
    )
    q = quantize_network(Network.from_onnx(model), [random_feeds(model)])
    const = next(op for op in q.ops if op.op_type == "Constant")
    arr = q.op_params(const)["value"]
    assert arr.dtype == np.int8 and const.attrs["scale"] == 4.0 / 127
    assert arr.tolist() == [[16, -64, 32, 127]]


def test_quantizer_errors() -> None:
    model = _conv_relu6_model()
    net = Network.from_onnx(model)
    with pytest.raises(XrtError) as err:
        quantize_network(net)
    assert err.value.code == ErrorCode.OUT_OF_RANGE
    with pytest.raises(XrtError) as err:
        quantize_network(net, [])
    assert err.value.code == ErrorCode.OUT_OF_RANGE
    with pytest.raises(XrtError) as err:
        quantize_network(net, [[np.zeros((1, 3, 5, 5), np.float32)]])
    assert err.value.code == ErrorCode.OUT_OF_RANGE
    with pytest.raises(XrtError) as err:
        quantize_network(net, [{"x": np.zeros((1, 3, 6, 6), np.float64)}])
    assert err.value.code == ErrorCode.WRONG_TYPE
    q = quantize_network(net, [random_feeds(model)])
    with pytest.raises(XrtError) as err:
        quantize_network(q, [random_feeds(model)])
    assert err.value.code == ErrorCode.WRONG_TYPE and "already quantized" in err.value.message
