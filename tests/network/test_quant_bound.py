"""The int32 accumulator bound (docs/quantization.md, "The accumulator"): the quantizer keeps
it by construction and reports what that changed; a hand-made layer beyond it wraps modulo
2**32 on the host as on the engine (the golden model, which the RTL matches in lockstep)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from netutil import make_model, ort_run, rand
from onnx import helper

import xrt.npu.compiler._legalize as legalize
from xrt.cli import main
from xrt.dtypes import QuantParams, TensorType
from xrt.hw.targets import NPU
from xrt.network import Network, NetworkBuilder, run_network_reference
from xrt.npu.compiler import compile_run, refusal
from xrt.npu.compiler._golden_run import run_on_golden
from xrt.ops import intmath
from xrt.quant import calibrate, quantize_with_report
from xrt.quant.accumulator import fit_layer

N = helper.make_node


def _bound_holds(net: Network) -> None:
    for op in net.ops:
        if op.op_type in ("QConv2d", "QGemm"):
            p = net.op_params(op)
            assert intmath.accumulator_bound(p["weight"], p["bias"]) <= intmath.ACC_MAX, op


def test_the_bound_is_the_worst_int8_input() -> None:
    w = np.array([[127, -127, 3], [0, 0, 0]], np.int8)
    assert intmath.accumulator_headroom(w).tolist() == [2**31 - 1 - 128 * 257, 2**31 - 1]
    bias = np.array([5, -(2**31) + 1], np.int64)
    assert intmath.accumulator_bound(w, bias) == 2**31 - 1
    # The input that reaches it: -128 against each positive weight, 127 against negatives.
    x = np.where(w[0] > 0, -128, 127).astype(np.int64)
    assert abs(int(x @ w[0].astype(np.int64)) - 5) <= 128 * 257 + 5


def test_wrap_int32_is_modulo_two_to_the_32() -> None:
    vals = np.array([0, 2**31 - 1, 2**31, -(2**31), -(2**31) - 1, 3 * 2**32 + 7], np.int64)
    want = [((int(v) + 2**31) % 2**32) - 2**31 for v in vals]
    assert intmath.wrap_int32(vals).tolist() == want


@pytest.mark.parametrize("depth", [1, 9, 288, 4096])
def test_fit_layer_raises_the_scale_of_a_channel_whose_bias_breaks_the_bound(depth: int) -> None:
    rng = np.random.default_rng(depth)
    w = rng.standard_normal((4, depth)) * 0.1
    w[1] *= 1e-9  # weights all near zero: at max|w| / 127 its bias needs > 31 bits
    bias = np.array([0.05, 0.3, -0.2, 0.0])
    s_in, s_out = 0.02, 0.05
    fit = fit_layer(w, bias, s_in, s_out)
    assert fit.raised == (1,) and fit.clamped == ()
    assert intmath.accumulator_bound(fit.weight, fit.bias) <= intmath.ACC_MAX
    # Untouched channels are exactly the default quantization.
    s0 = np.abs(w[0]).max() / 127
    assert fit.scale[0] == s0 and fit.bias[0] == np.rint(0.05 / (s_in * s0))
    # The raised channel still represents its bias (which dominates it) to 1e-6.
    assert abs(fit.bias[1] * s_in * fit.scale[1] - 0.3) <= 1e-6 * 0.3
    assert fit.scale[1] * s_in / s_out < intmath.MULTIPLIER_MAX


def test_fit_layer_clamps_only_what_no_multiplier_represents() -> None:
    """A bias of -1e20 under a ReLU: the output is 0 on every input (scale 1.0); the weight
    scale that would fit that bias is beyond any multiplier, so the bias is clamped."""
    w = np.full((1, 8), 0.1)
    fit = fit_layer(w, np.array([-1e20]), 0.01, 1.0)
    assert fit.clamped == (0,)
    assert intmath.accumulator_bound(fit.weight, fit.bias) <= intmath.ACC_MAX
    assert fit.bias[0] < -(2**30)  # still as negative as the bound allows: ReLU gives 0


def _tiny_channel_model() -> object:
    """Conv whose channel 1 has all-but-zero weights and a real bias, then a dense layer."""
    w = rand(4, 3, 3, 3)
    w[1] *= 1e-9
    return make_model(
        [
            N("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
            N("Relu", ["c"], ["r"]),
            N("Flatten", ["r"], ["f"]),
            N("Gemm", ["f", "g", "gb"], ["y"], transB=1),
        ],
        {"x": (1, 3, 5, 5)},
        ["y"],
        {
            "w": w,
            "b": np.array([0.1, 0.5, -0.2, 0.0], np.float32),
            "g": rand(6, 100),
            "gb": rand(6),
        },
    )


def test_quantizer_keeps_the_bound_and_reports_the_raised_scale() -> None:
    model = _tiny_channel_model()
    net = Network.from_onnx(model)
    rng = np.random.default_rng(0)
    samples = [{"x": rng.standard_normal((1, 3, 5, 5)).astype(np.float32)} for _ in range(3)]
    q, report = quantize_with_report(net, ranges=calibrate(net, samples))
    _bound_holds(q)
    assert report.raised_channels == 1 and report.clamped_biases == 0
    assert "0 bias(es) clamped, 1 channel weight scale(s) raised" in report.line()
    assert report.to_dict()["scale_raised"] == 1
    for feed in samples:
        err = np.abs(run_network_reference(q, feed)[0] - ort_run(model, feed)[0])
        assert err.max() <= 0.1 * np.abs(ort_run(model, feed)[0]).max()
    for x in (np.full((1, 3, 5, 5), 1e3, np.float32), np.zeros((1, 3, 5, 5), np.float32)):
        assert np.all(np.isfinite(run_network_reference(q, {"x": x})[0]))


def _out_of_bound_conv() -> tuple[Network, dict[str, np.ndarray]]:
    """A hand-made QConv2d whose bias is near int32's top: positive sums wrap."""
    rng = np.random.default_rng(7)
    c = 16
    b = NetworkBuilder("wraps")
    x = b.input("x", TensorType("SInt8", (1, c, 6, 6), quant=QuantParams(1.0)))
    params = {
        "weight": b.param("w", rng.integers(-127, 128, (c, c, 3, 3), dtype=np.int8)),
        "bias": b.param("b", np.full(c, 2**31 - 20000, np.int32)),
        "multiplier": b.param("m", np.full(c, 16384, np.int32)),
        "shift": b.param("s", np.full(c, 38, np.int32)),
    }
    attrs = {"strides": [1, 1], "pads": [1, 1, 1, 1], "dilations": [1, 1], "groups": 1,
             "lo": -128, "hi": 127, "out_scale": 1.0}  # fmt: skip
    (y,) = b.add("QConv2d", [x], attrs, params)
    feeds = {"x": rng.integers(-128, 128, (1, c, 6, 6), dtype=np.int8)}
    return b.build([y]), feeds


def test_a_hand_made_layer_beyond_the_bound_wraps_on_the_host() -> None:
    net, feeds = _out_of_bound_conv()
    (out,) = run_network_reference(net, feeds)
    p = net.op_params(net.ops[1])
    xp = np.pad(feeds["x"].astype(np.int64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    w = p["weight"].astype(np.int64)
    sums = np.einsum("ocij,cyixj->oyx", w, np.lib.stride_tricks.sliding_window_view(
        xp[0], (3, 3), axis=(1, 2)).transpose(0, 1, 3, 2, 4))  # fmt: skip
    acc = [((int(s) + 2**31 - 20000 + 2**31) % 2**32) - 2**31 for s in sums.reshape(-1)]
    assert max(int(s) for s in sums.reshape(-1)) > 20000  # some do wrap
    want = intmath.requantize(np.array(acc).reshape(1, 16, 6, 6), 16384, 38)
    np.testing.assert_array_equal(out, want)


def test_the_engine_wraps_the_same_where_the_compiler_is_told_to_place_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The NPU refuses the layer (its bound cannot be proven); lowered anyway, the golden
    model (int32 wrap-around, docs/isa.md) gives the host's answer bit for bit."""
    net, feeds = _out_of_bound_conv()
    op = net.ops[1]
    assert "accumulator bound" in (refusal(op, net.values, net.op_params(op), NPU) or "")
    monkeypatch.setattr(legalize, "accumulator_bound", lambda w, b: 0)
    outs, _ = run_on_golden(compile_run(net), feeds)
    np.testing.assert_array_equal(outs[net.outputs[0]], run_network_reference(net, feeds)[0])


def test_xrt_run_and_compile_report_the_raised_scale(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "tiny.onnx"
    onnx.save(_tiny_channel_model(), path)
    assert main(["run", str(path), "--quantize", "--calib", "2", "--device", "host://"]) == 0
    out = capsys.readouterr().out
    assert (
        "quantizer: accumulator bound: 0 bias(es) clamped, 1 channel weight scale(s) raised" in out
    )
    argv = ["run", str(path), "--quantize", "--calib", "2", "--device", "host://", "--json"]
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["quantizer"]["scale_raised"] == 1 and doc["quantizer"]["bias_clamped"] == 0
    argv = ["compile", str(path), "--quantize", "--calib", "2", "--target", "buyi"]
    assert main([*argv, "-o", str(tmp_path / "t.xrtc"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["quantizer"]["scale_raised"] == 1 and len(doc["quantizer"]["layers_raised"]) == 1
