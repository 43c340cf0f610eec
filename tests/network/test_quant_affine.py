"""Per-channel affine maps in the quantizer (`xrt.quant.affine`): BatchNorm and Mul / Add /
Sub / Div by constants that are the same over every pixel fold into the convolution or
dense layer they alone follow, or become one depthwise 1x1 QConv2d, and the int8 network
still agrees with onnxruntime's float result."""

from __future__ import annotations

import numpy as np
import pytest
from netutil import make_model, ort_run, rand, random_feeds
from onnx import helper

from xrt.network import Network, run_network_reference
from xrt.ops import intmath
from xrt.quant import calibrate, quantize_network, quantize_weight_per_channel
from xrt.quant.affine import affine_weights

N = helper.make_node


def _quantize(model, **kw):  # type: ignore[no-untyped-def]
    net = Network.from_onnx(model)
    samples = [random_feeds(model, seed=s) for s in range(4)]
    ranges = calibrate(net, samples)
    return net, quantize_network(net, ranges=ranges, **kw), ranges, samples


def _close(model, q, ranges, samples, out: str = "y", k: float = 6.0) -> None:  # type: ignore[no-untyped-def]
    for feed in samples:
        err = np.abs(run_network_reference(q, feed)[0] - ort_run(model, feed)[0])
        assert err.max() <= k * ranges[out].scale, err.max() / ranges[out].scale


def _caffe2_bn_after_conv(shape: tuple[int, ...] = (6, 1, 1)) -> object:
    """Conv -> Mul(per-channel) -> Add(per-channel) -> Relu, as Caffe2 exports batch norms."""
    return make_model(
        [
            N("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
            N("Mul", ["c", "s"], ["m"]),
            N("Add", ["m", "t"], ["a"]),
            N("Relu", ["a"], ["y"]),
        ],
        {"x": (1, 3, 7, 7)},
        ["y"],
        {
            "w": rand(6, 3, 3, 3),
            "b": rand(6),
            "s": (np.linspace(-1.5, 2.0, 6).reshape(shape)).astype(np.float32),
            "t": (rand(6) * 0.3).reshape(shape).astype(np.float32),
        },
    )


def test_mul_add_after_a_conv_fold_into_its_weights_and_bias() -> None:
    model = _caffe2_bn_after_conv()
    net, q, ranges, samples = _quantize(model)
    assert [op.op_type for op in q.ops] == ["Input", "Cast", "QConv2d", "Cast", "Output"]
    conv = q.ops[2]
    assert (conv.attrs["lo"], conv.attrs["hi"]) == (0, 127)
    assert conv.attrs["out_scale"] == ranges["y"].scale
    p = net.params

    def const(op_type: str) -> np.ndarray:
        user = next(op for op in net.ops if op.op_type == op_type)
        producer = net.producer(user.inputs[1])
        assert producer is not None
        return p[producer.params["value"]].reshape(-1).astype(np.float64)

    s, t = const("Mul"), const("Add")
    conv0 = next(op for op in net.ops if op.op_type == "Conv2d")
    w = p[conv0.params["weight"]].astype(np.float64) * s[:, None, None, None]
    b = p[conv0.params["bias"]].astype(np.float64) * s + t
    w_q, s_w = quantize_weight_per_channel(w)
    qp = q.op_params(conv)
    np.testing.assert_array_equal(qp["weight"], w_q)
    np.testing.assert_array_equal(qp["bias"], intmath.quantize_bias(b, ranges["x"].scale * s_w))
    _close(model, q, ranges, samples)


def test_without_folding_they_stay_separate_operators() -> None:
    model = _caffe2_bn_after_conv()
    _, q, _, _ = _quantize(model, fold_affine=False)
    assert [op.op_type for op in q.ops if op.op_type != "Constant"] == [
        "Input", "Cast", "QConv2d", "QMul", "QAdd", "Cast", "Output",
    ]  # fmt: skip


@pytest.mark.parametrize("shape", [(6, 1, 1), (1, 6, 1, 1), (1,), ()])
def test_constants_per_channel_or_per_tensor_fold(shape: tuple[int, ...]) -> None:
    model = _caffe2_bn_after_conv(shape if shape in ((6, 1, 1), (1, 6, 1, 1)) else (6, 1, 1))
    if shape in ((1,), ()):
        model = make_model(
            [
                N("Conv", ["x", "w"], ["c"]),
                N("Mul", ["s", "c"], ["m"]),  # constant first
                N("Sub", ["m", "t"], ["y"]),
            ],
            {"x": (1, 3, 5, 5)},
            ["y"],
            {"w": rand(4, 3, 3, 3), "s": np.full(shape, 0.7, np.float32),
             "t": np.full(shape, 0.2, np.float32)},
        )  # fmt: skip
    _, q, ranges, samples = _quantize(model)
    assert [op.op_type for op in q.ops] == ["Input", "Cast", "QConv2d", "Cast", "Output"]
    _close(model, q, ranges, samples)


def test_a_conv_read_twice_keeps_its_output_and_the_chain_becomes_depthwise() -> None:
    model = make_model(
        [
            N("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
            N("Mul", ["c", "s"], ["m"]),
            N("Div", ["m", "d"], ["a"]),
            N("Add", ["a", "c"], ["y"]),
        ],
        {"x": (1, 3, 6, 6)},
        ["y"],
        {"w": rand(20, 3, 3, 3), "s": (rand(20) + 1.5).reshape(20, 1, 1),
         "d": np.float32(1.7).reshape(1)},
    )  # fmt: skip
    _, q, ranges, samples = _quantize(model)
    types = [op.op_type for op in q.ops]
    assert types == ["Input", "Cast", "QConv2d", "QConv2d", "QAdd", "Cast", "Output"]
    dw = q.ops[3]
    assert dw.attrs["groups"] == 20 and q.op_params(dw)["weight"].shape == (20, 1, 1, 1)
    _close(model, q, ranges, samples)


def test_pre_activation_batchnorm_after_a_concat_is_one_depthwise_conv() -> None:
    """DenseNet's pre-activation: Concat -> BatchNorm -> Mul -> Add -> Relu -> Conv."""
    c = 24
    init = {
        "w1": rand(8, 3, 3, 3), "w2": rand(16, 3, 1, 1), "w3": rand(8, c, 1, 1),
        "g": (rand(c) * 0.2 + 1.0), "be": rand(c) * 0.1, "mu": rand(c) * 0.1,
        "var": np.abs(rand(c)) + 0.5, "s": (np.abs(rand(c)) + 0.5).reshape(c, 1, 1),
        "t": (rand(c) * 0.1).reshape(c, 1, 1),
    }  # fmt: skip
    model = make_model(
        [
            N("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
            N("Conv", ["x", "w2"], ["c2"]),
            N("Concat", ["c1", "c2"], ["cat"], axis=1),
            N("BatchNormalization", ["cat", "g", "be", "mu", "var"], ["bn"]),
            N("Mul", ["bn", "s"], ["m"]),
            N("Add", ["m", "t"], ["a"]),
            N("Relu", ["a"], ["r"]),
            N("Conv", ["r", "w3"], ["y"]),
        ],
        {"x": (1, 3, 6, 6)},
        ["y"],
        init,
    )
    _, q, ranges, samples = _quantize(model)
    dws = [op for op in q.ops if op.op_type == "QConv2d" and op.attrs["groups"] == c]
    assert len(dws) == 1 and dws[0].attrs["lo"] == 0
    assert not {"BatchNorm", "QMul", "QAdd", "Constant"} & {op.op_type for op in q.ops}
    _close(model, q, ranges, samples)


def test_not_affine_stays_as_it_was() -> None:
    """A constant that varies over pixels, and a division of a constant by the tensor."""
    model = make_model(
        [N("Mul", ["x", "s"], ["m"]), N("Div", ["d", "m"], ["y"])],
        {"x": (1, 2, 3, 3)},
        ["y"],
        {"s": rand(1, 1, 3, 3), "d": np.float32(2.0).reshape(1)},
    )
    _, q, _, _ = _quantize(model)
    assert "QMul" in [op.op_type for op in q.ops] and "Div" in [op.op_type for op in q.ops]


def test_affine_weights_keep_the_accumulator_provable() -> None:
    a = np.array([1.0, -0.5, 0.0, 1e-9, 0.0])
    b = np.array([0.1, 0.2, 0.3, 5.0, 0.0])
    w_q, b_q, s_w = affine_weights(a, b, 0.01)
    assert w_q.shape == (5, 1, 1, 1) and w_q.dtype == np.int8
    assert w_q[:2, 0, 0, 0].tolist() == [127, -127] and w_q[2, 0, 0, 0] == 0
    assert np.all(np.abs(b_q.astype(np.int64)) <= 2**23)
    np.testing.assert_allclose(w_q.reshape(-1) * s_w, a, atol=1e-12 + 0.5 * s_w.max())
    np.testing.assert_allclose(b_q * 0.01 * s_w, b, rtol=1e-6, atol=1e-12)
    assert s_w[4] == 1.0
