"""Issue 45's property: a network made by `quantize_network` never fails at run time on
any finite input, and keeps the int32 accumulator bound (docs/quantization.md, section 4)
in every layer, so no accumulator ever wraps.

Networks: three of the onnx wheel's light networks at a reduced input size and the
composite test networks (tests/network/onnx_zoo.py), each with two weight draws, as drawn
and with a near-dead output channel in every layer (the case that broke the bound before:
its bias needed more than 31 bits). Calibration on standard-normal inputs; forwards on
other distributions: uniform, large extremes (+-1e3, +-3e38), zeros, tiny values. A subset
also runs on the RTL, bit-exact with the host (tests/integration/test_quant_property_npu.py).
"""

from __future__ import annotations

import functools

import numpy as np
import onnx
import pytest
from light_models import random_feeds, reduced, with_near_dead_channels, with_random_weights
from onnx_zoo import COMPOSITES

from xrt.backend import HostBackend
from xrt.network import Network
from xrt.ops import intmath
from xrt.quant import QuantReport, calibrate, quantize_with_report
from xrt.session import Session

LIGHT = {"squeezenet": 32, "shufflenet": 32, "inception_v1": 64}
"""Light networks and the input size they run at here (seconds each)."""
SEEDS = (11, 12)


def input_kinds(feeds: dict[str, np.ndarray], seed: int) -> dict[str, dict[str, np.ndarray]]:
    """Inputs unlike the standard-normal calibration samples, by kind."""
    rng = np.random.default_rng(seed)

    def each(make):  # type: ignore[no-untyped-def]
        return {k: make(v.shape).astype(np.float32) for k, v in feeds.items()}

    return {
        "uniform": each(lambda s: rng.uniform(-3.0, 3.0, s)),
        "extremes": each(lambda s: rng.choice([-1e3, 1e3, -3e38, 3e38, 0.0], s)),
        "zeros": each(np.zeros),
        "tiny": each(lambda s: rng.standard_normal(s) * 1e-30),
    }


@functools.cache
def _model(name: str, seed: int) -> onnx.ModelProto:
    if name in LIGHT:
        return reduced(with_random_weights(name, seed=seed), LIGHT[name])
    return COMPOSITES[name](seed=seed)


def quantized(name: str, seed: int, dead: bool) -> tuple[Network, QuantReport, onnx.ModelProto]:
    model = _model(name, seed)
    if dead:
        model = with_near_dead_channels(model)
    net = Network.from_onnx(model)
    samples = [random_feeds(model, 100 + i) for i in range(2)]
    q, report = quantize_with_report(net, ranges=calibrate(net, samples))
    return q, report, model


def assert_bound_kept(q: Network) -> int:
    """Every convolution and dense layer keeps the bound; returns how many there are."""
    layers = [op for op in q.ops if op.op_type in ("QConv2d", "QGemm")]
    for op in layers:
        p = q.op_params(op)
        bound = intmath.accumulator_bound(p["weight"], p["bias"])
        assert bound <= intmath.ACC_MAX, f"{op.describe()}: bound {bound}"
    return len(layers)


@pytest.mark.parametrize("dead", [False, True], ids=["as_drawn", "near_dead"])
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("name", [*LIGHT, *COMPOSITES])
def test_quantized_network_runs_on_any_finite_input(name: str, seed: int, dead: bool) -> None:
    q, report, model = quantized(name, seed, dead)
    assert assert_bound_kept(q) > 0
    with_bias = any(
        n.op_type in ("Conv", "Gemm") and len(n.input) > 2 and n.input[2] for n in model.graph.node
    )
    if dead and with_bias:
        assert report.raised_channels > 0, "the near-dead channels needed no raised scale"
    assert report.clamped_biases == 0  # clamping is for outputs saturated on every input
    with Session.create([HostBackend], q).apply() as sess:
        for kind, feeds in input_kinds(random_feeds(model, 300 + seed), seed).items():
            outs = [t.numpy() for t in sess.forward(feeds)]
            assert outs and all(np.all(np.isfinite(o)) for o in outs), kind
