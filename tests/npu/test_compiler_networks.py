"""Whole quantized networks through compiler + golden model, bit-exact against the host.

Each network is quantized as tests/network does; consecutive operators the NPU takes are
compiled into one program per run and executed by the golden model, the rest run on the
host kernels (`simulate_network`). The outputs must equal the host reference exactly, every
run must balance its tokens, and the NPU must actually have done the work (every QConv2d and
QGemm of the networks below is in some program).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "network"))

from light_models import reduced, with_random_weights
from netutil import random_feeds
from onnx_zoo import COMPOSITES, resnet18_model, squeezenet11_model

from xrt.network import Network, run_network_reference
from xrt.npu.compiler._simulate import simulate_network
from xrt.quant import quantize_network


def _check(model, seeds: int = 3):  # type: ignore[no-untyped-def]
    net = Network.from_onnx(model)
    qnet = quantize_network(net, [random_feeds(model, seed=s) for s in range(seeds)])
    feeds = random_feeds(model, seed=42)
    want = run_network_reference(qnet, feeds)
    got, runs = simulate_network(qnet, feeds)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)
    on_npu = {i for r in runs for i in r.program.op_ids}
    macs = [op.op_id for op in qnet.ops if op.op_type in ("QConv2d", "QGemm")]
    assert macs and set(macs) <= on_npu
    for r in runs:
        assert sum(r.result.tokens_left.values()) == 0
    return qnet, runs


@pytest.mark.parametrize("name", sorted(COMPOSITES))
def test_composite_networks_bit_exact(name: str) -> None:
    _check(COMPOSITES[name]())


def test_squeezenet11_shaped_bit_exact() -> None:
    _, runs = _check(squeezenet11_model(hw=35, classes=20), seeds=2)
    assert len(runs) == 1  # every operator between the edge casts is on the NPU


def test_resnet18_shaped_bit_exact() -> None:
    _, runs = _check(resnet18_model(hw=32, classes=20), seeds=2)
    assert len(runs) == 1


@pytest.mark.parametrize(
    "name", ["shufflenet", "squeezenet", "densenet121", "inception_v2", "resnet50"]
)
def test_light_network_is_one_program(name: str) -> None:
    # The onnx wheel's light networks (random weights, 32x32 inputs): one NPU program each,
    # bit-exact; only the edge casts, Softmax and a lone relabelling reshape stay on the host.
    model = reduced(with_random_weights(name, seed=1), 32)
    qnet, runs = _check(model, seeds=1)
    assert len(runs) == 1
    on_npu = set(runs[0].program.op_ids)
    host = {op.op_type for op in qnet.ops if op.op_id not in on_npu}
    assert host <= {"Cast", "Softmax", "Reshape"}, host
