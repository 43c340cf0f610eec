"""Quantized networks against onnxruntime's float result, within stated tolerances.

Tolerances (docs/quantization.md, "Accuracy"), for inputs inside the calibrated range:

* single ops: the first-order error bound of the integer scheme, per element:
  ``0.5 * s_out`` (output rounding) plus the input rounding errors (``0.5 * s_in`` each)
  carried through the op (times its Lipschitz constant; for convolutions also the weight
  rounding ``0.5 * s_w[c]`` times ``sum |x|``), plus ``2**-15`` relative for the 15-bit
  multiplier;
* composite networks (up to ~20 integer ops): max |error| <= 10 * s_out and mean |error|
  <= 2 * s_out; classifiers agree with onnxruntime on the top-1 class for at least 15 of 16
  inputs.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from netutil import make_model, ort_run, rand, random_feeds
from onnx import helper
from onnx_zoo import COMPOSITES

from xrt.network import Network, run_network_reference
from xrt.ops.conv import conv2d_forward
from xrt.quant import calibrate, quantize_network, quantize_weight_per_channel

N = helper.make_node
MULT_REL = 2.0**-15


def _quantize(model, n_samples: int = 8, scale: float = 1.0):
    net = Network.from_onnx(model)
    samples = [
        {k: v * scale for k, v in random_feeds(model, seed=s).items()} for s in range(n_samples)
    ]
    ranges = calibrate(net, samples)
    return net, quantize_network(net, ranges=ranges), ranges, samples


@pytest.mark.parametrize(
    ("case", "relu", "groups"),
    [("dense", True, 1), ("dense_no_act", False, 1), ("depthwise", True, 4), ("grouped", False, 2)],
)
def test_single_conv_within_first_order_bound(case: str, relu: bool, groups: int) -> None:
    cin, cout = 4, 8 if groups != 4 else 4
    w = rand(cout, cin // groups, 3, 3, seed=2) * 0.4
    b = rand(cout, seed=3)
    nodes = [
        N(
            "Conv",
            ["x", "w", "b"],
            ["c" if relu else "y"],
            pads=[1, 1, 1, 1],
            strides=[2, 1],
            group=groups,
        )
    ]
    if relu:
        nodes.append(N("Relu", ["c"], ["y"]))
    model = make_model(nodes, {"x": (1, cin, 9, 7)}, ["y"], {"w": w, "b": b})
    _net, qnet, ranges, samples = _quantize(model)
    assert [op.op_type for op in qnet.ops] == ["Input", "Cast", "QConv2d", "Cast", "Output"]
    s_in, s_out = ranges["x"].scale, ranges["y"].scale
    _, s_w = quantize_weight_per_channel(w)
    conv_attrs = {"strides": [2, 1], "pads": [1, 1, 1, 1], "dilations": [1, 1], "groups": groups}
    fake = SimpleNamespace(attrs=conv_attrs)
    taps = (cin // groups) * 9
    sw = s_w.reshape(1, -1, 1, 1)
    for feed in samples:
        x = feed["x"]
        (sum_abs_x,) = conv2d_forward(fake, [np.abs(x)], {"weight": np.ones_like(w)})
        (sum_abs_w,) = conv2d_forward(fake, [np.ones_like(x)], {"weight": np.abs(w)})
        (ref,) = ort_run(model, feed)
        bound = (
            0.5 * s_out
            + 0.5 * sw * sum_abs_x
            + 0.5 * s_in * sum_abs_w
            + 0.25 * s_in * sw * taps
            + 0.5 * s_in * sw
            + MULT_REL * np.abs(ref)
            + 1e-5 * np.abs(ref).max()
        )
        (got,) = run_network_reference(qnet, feed)
        err = np.abs(got - ref)
        assert np.all(err <= bound), f"worst excess {np.max(err - bound)}"


SINGLE = {
    # name: (nodes, initializers, bound(s_in, s_out, feed) in output units)
    "add": ([N("Add", ["x", "c"], ["y"])], {"c": rand(1, 4, 1, 1) * 3}, "add"),
    "mul": ([N("Mul", ["x", "c"], ["y"])], {"c": rand(1, 4, 5, 5) * 3}, "mul"),
    "avgpool": ([N("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])], {}, 1.0),
    "avgpool_include_pad": (
        [
            N(
                "AveragePool",
                ["x"],
                ["y"],
                kernel_shape=[3, 3],
                pads=[1, 1, 1, 1],
                strides=[2, 2],
                count_include_pad=1,
            )
        ],
        {},
        1.0,
    ),
    "gap": ([N("GlobalAveragePool", ["x"], ["y"])], {}, 1.0),
    "maxpool": ([N("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], strides=[2, 2])], {}, 1.0),
    "sigmoid": ([N("Sigmoid", ["x"], ["y"])], {}, 0.25),
    "hard_swish": ([N("HardSwish", ["x"], ["y"])], {}, 1.5),
    "hard_sigmoid": ([N("HardSigmoid", ["x"], ["y"])], {}, 0.2),
    "leaky_relu": ([N("LeakyRelu", ["x"], ["y"], alpha=0.2)], {}, 1.0),
    "relu": ([N("Relu", ["x"], ["y"])], {}, 1.0),
    "clip": (
        [N("Clip", ["x", "lo", "hi"], ["y"])],
        {"lo": np.array(-1.0, np.float32), "hi": np.array(0.5, np.float32)},
        1.0,
    ),
    "resize": (
        [N("Resize", ["x", "", "sc"], ["y"], mode="nearest")],
        {"sc": np.array([1, 1, 2, 2], np.float32)},
        1.0,
    ),
    "pad_reflect": (
        [N("Pad", ["x", "p"], ["y"], mode="reflect")],
        {"p": np.array([0, 0, 1, 2, 0, 0, 2, 1], np.int64)},
        1.0,
    ),
    "gemm": (
        [N("Flatten", ["x"], ["f"]), N("Gemm", ["f", "w", "b"], ["y"], transB=1)],
        {"w": rand(6, 100) * 0.1, "b": rand(6)},
        "gemm",
    ),
    "concat": (
        [N("Mul", ["x", "k"], ["x3"]), N("Concat", ["x", "x3"], ["y"], axis=1)],
        {"k": np.array(3.0, np.float32)},
        "concat",
    ),
}


@pytest.mark.parametrize("case", sorted(SINGLE))
def test_single_op_within_first_order_bound(case: str) -> None:
    nodes, inits, lip = SINGLE[case]
    model = make_model(nodes, {"x": (1, 4, 5, 5)}, ["y"], inits)
    _net, qnet, ranges, samples = _quantize(model)
    s_in, s_out = ranges["x"].scale, ranges["y"].scale
    for feed in samples:
        (ref,) = ort_run(model, feed)
        (got,) = run_network_reference(qnet, feed)
        x = feed["x"]
        if lip == "add":
            in_err = 0.5 * s_in + 0.5 * float(np.abs(inits["c"]).max()) / 127
        elif lip == "mul":
            c = inits["c"]
            s_c = float(np.abs(c).max()) / 127
            in_err = 0.5 * s_in * np.abs(c) + 0.5 * s_c * np.abs(x) + 0.25 * s_in * s_c
        elif lip == "gemm":
            w = inits["w"]
            _, s_w = quantize_weight_per_channel(w)
            flat = x.reshape(1, -1)
            in_err = (
                0.5 * s_in * np.abs(w).sum(1)
                + 0.5 * s_w * np.abs(flat).sum()
                + 0.25 * s_in * s_w * 100
                + 0.5 * s_in * s_w
            )
        elif lip == "concat":
            # x is requantized to the output scale; the 3x branch carries 3 * input error.
            in_err = 0.5 * s_out + 3 * 0.5 * s_in + 0.5 * ranges["x3"].scale
        else:
            in_err = lip * 0.5 * s_in
        bound = 0.5 * s_out + in_err + MULT_REL * np.abs(ref) + 1e-6
        err = np.abs(got - ref)
        assert np.all(err <= bound), f"{case}: worst excess {np.max(err - bound)} (s_out {s_out})"


@pytest.mark.parametrize("name", sorted(COMPOSITES))
def test_composite_networks_within_tolerance(name: str) -> None:
    model = COMPOSITES[name]()
    net, qnet, ranges, samples = _quantize(model)
    for feed in samples[:4]:
        refs = ort_run(model, feed)
        gots = run_network_reference(qnet, feed)
        for out, ref, got in zip(net.outputs, refs, gots, strict=True):
            s_out = ranges[out].scale
            err = np.abs(got - ref)
            assert got.dtype == np.float32 and got.shape == ref.shape
            assert err.max() <= 10 * s_out, f"{out}: max error {err.max() / s_out:.2f} s_out"
            assert err.mean() <= 2 * s_out, f"{out}: mean error {err.mean() / s_out:.2f} s_out"


@pytest.mark.parametrize("name", ["mobilenet", "small_cnn", "head"])
def test_classifiers_agree_on_top1(name: str) -> None:
    model = COMPOSITES[name]()
    _net, qnet, _, samples = _quantize(model, n_samples=16)
    agree = total = 0
    for feed in samples:
        ref = ort_run(model, feed)[0]
        got = run_network_reference(qnet, feed)[0]
        agree += int((ref.argmax(1) == got.argmax(1)).sum())
        total += ref.shape[0]
    assert agree >= total - total // 16


def test_inputs_beyond_the_calibrated_range_saturate() -> None:
    model = make_model([N("Relu", ["x"], ["y"])], {"x": (1, 4, 5, 5)}, ["y"])
    _net, qnet, ranges, samples = _quantize(model)
    big = {"x": samples[0]["x"] * 10}
    (got,) = run_network_reference(qnet, big)
    assert got.max() <= 127 * ranges["x"].scale * (1 + 1e-6)
