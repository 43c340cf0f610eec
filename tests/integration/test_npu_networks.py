"""Whole light networks on the RTL: the onnx wheel's networks through a real server.

The golden-model test (tests/npu/test_compiler_networks.py) covers all nine; here four of
them (ShuffleNet's channel shuffles, SqueezeNet's concatenations, AlexNet's LRN split and
VGG-19's large dense layers) run on the verilated NPU behind ``npu-emu serve`` for each
target, at a reduced input size so each takes seconds: bit-exact against HostBackend, in
as few launches as the operators the host keeps allow, with at least 95% of the operators
that count (all but casts, Softmax and LRN) bound to the NPU backend.
bench/bench_npu_networks.py runs all nine at full size."""

from __future__ import annotations

import functools
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "network"))

from light_models import random_feeds, reduced, with_random_weights

from npuemu.server.launch import ServerProcess
from xrt import Device
from xrt.backend import BuyiBackend, HostBackend, ZG330Backend
from xrt.network import Network
from xrt.npu_device import NpuDevice
from xrt.quant import quantize_network
from xrt.session import Session

pytestmark = pytest.mark.sim

EXCLUDED_FROM_SHARE = {"Cast", "Softmax", "LRN", "Input", "Output"}
"""What issue 25's share of operators on the NPU leaves out."""


@pytest.fixture
def zg330(zg330_server: ServerProcess) -> Iterator[NpuDevice]:
    dev = Device.open(zg330_server.url)
    assert isinstance(dev, NpuDevice)
    yield dev
    dev.close()


# name -> (input size, op types the host keeps, NPU launches per forward)
NETWORKS = {
    "shufflenet": (32, {"Cast", "Softmax"}, 1),
    # The host keeps the Reshape back to 4-D after Softmax (a launch of its own otherwise).
    "squeezenet": (32, {"Cast", "Softmax", "Reshape"}, 1),
    # LRN runs in float on the host (docs/compiler.md): three programs around its two.
    "bvlc_alexnet": (64, {"Cast", "LRN", "Softmax"}, 3),
    "vgg19": (32, {"Cast", "Softmax"}, 1),
}


@functools.cache
def _on_host(name: str) -> tuple[Network, dict[str, np.ndarray], list[np.ndarray]]:
    """The quantized network at its reduced size, a feed and HostBackend's outputs (once
    for both targets: VGG-19's random weights alone take seconds)."""
    model = reduced(with_random_weights(name, seed=1), NETWORKS[name][0])
    qnet = quantize_network(Network.from_onnx(model), [random_feeds(model, seed=0)])
    feeds = random_feeds(model, seed=42)
    with Session.create([HostBackend], qnet).apply() as host:
        want = [t.numpy() for t in host.forward(feeds)]
    return qnet, feeds, want


@pytest.mark.parametrize("target", ["buyi", "zg330"])
@pytest.mark.parametrize("name", list(NETWORKS))
def test_light_network_on_the_rtl(name: str, target: str, request: pytest.FixtureRequest) -> None:
    _, host_types, programs = NETWORKS[name]
    device = request.getfixturevalue(target)
    backend = {"buyi": BuyiBackend, "zg330": ZG330Backend}[target]
    qnet, feeds, want = _on_host(name)
    with Session.create([backend, HostBackend], qnet, [device, None]).apply() as sess:
        got = [t.numpy() for t in sess.forward(feeds)]
        bindings = sess.backend_bindings()
        npu = sess.backends[0]
        launches = [ids for ids in npu.launches if any(qnet.op(i).op_type != "Cast" for i in ids)]
        stats = npu.launch_stats
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)
    # What the host computes: the Input and Output ops (bound there) pass values through.
    host = [op for op in qnet.ops[1:-1] if not bindings[op.op_id].is_type(backend)]
    assert {op.op_type for op in host} == host_types
    counted = [op for op in qnet.ops if op.op_type not in EXCLUDED_FROM_SHARE]
    on_npu = {op.op_id for op in counted if bindings[op.op_id].is_type(backend)}
    assert len(on_npu) >= 0.95 * len(counted), f"{len(on_npu)} of {len(counted)} on the NPU"
    # As few launches as the host's operators allow, and they ran every NPU operator.
    assert len(launches) == programs and on_npu <= {i for ids in launches for i in ids}
    assert all(s.gemm_cycles > 0 for s in stats)
