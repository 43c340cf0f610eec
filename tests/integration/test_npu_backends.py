"""BuyiBackend and ZG330Backend against a real ``npu-emu serve`` (real processes, RTL engine).

Every result is compared bit for bit with `HostBackend` on the same quantized network: the
host integer kernels are the specification (docs/quantization.md).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "network"))

from netutil import random_feeds
from onnx_zoo import COMPOSITES

from npuemu.server.launch import ServerProcess
from xrt import Device, HostDevice, Tensor, TensorType
from xrt.backend import BuyiBackend, HostBackend
from xrt.backend.npu.hardop import to_hardop
from xrt.devices import NpuDevice
from xrt.network import Network, NetworkBuilder
from xrt.quant import quantize_network
from xrt.session import Session

pytestmark = pytest.mark.sim


def _quantized(model, seeds: int = 2) -> Network:  # type: ignore[no-untyped-def]
    net = Network.from_onnx(model)
    return quantize_network(net, [random_feeds(model, seed=s) for s in range(seeds)])


def _host(net: Network, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    with Session.create([HostBackend], net).apply() as sess:
        return [t.numpy() for t in sess.forward(feeds)]


def _assert_same(got: list[Tensor], want: list[np.ndarray]) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g.numpy(), w)


@pytest.fixture
def buyi(open_buyi: Callable[..., NpuDevice]) -> NpuDevice:
    return open_buyi()


@pytest.fixture
def zg330(zg330_server: ServerProcess) -> Iterator[NpuDevice]:
    dev = Device.open(zg330_server.url)
    assert isinstance(dev, NpuDevice)
    yield dev
    dev.close()


def manual_float(seed: int = 0) -> Network:
    """The manual's network before compiling: a float convolution on the host, a quantize,
    an int8 convolution, a dequantize, ReLU and pooling. Op ids 1..6 as in the manual."""
    rng = np.random.default_rng(seed)
    b = NetworkBuilder("manual", first_id=1)
    x = b.input("x", TensorType("FP32", [1, 3, 12, 12]))
    w = b.param("w", (rng.standard_normal((8, 3, 3, 3)) * 0.3).astype(np.float32))
    (c,) = b.add("Conv2d", [x], {"pads": [1, 1, 1, 1]}, {"weight": w}, name="conv")
    (q,) = b.add("Cast", [c], {"to": "SInt8", "scale": 0.05}, name="quantize")
    qw = b.param("qw", rng.integers(-60, 60, (16, 8, 3, 3)).astype(np.int8))
    qb = b.param("qb", rng.integers(-500, 500, 16).astype(np.int32))
    qm = b.param("qm", rng.integers(1 << 14, 1 << 15, 16).astype(np.int32))
    qs = b.param("qs", np.full(16, 20, np.int32))
    (h,) = b.add(
        "QConv2d",
        [q],
        {"pads": [1, 1, 1, 1], "lo": -128, "hi": 127, "out_scale": 0.04},
        {"weight": qw, "bias": qb, "multiplier": qm, "shift": qs},
        name="npu_conv",
    )
    (f,) = b.add("Cast", [h], {"to": "FP32", "scale": 0.04}, name="dequantize")
    (r,) = b.add("Relu", [f], name="relu")
    (m,) = b.add("MaxPool2d", [r], {"kernel": [2, 2], "strides": [2, 2]}, name="pool")
    return b.build([m])


def manual_network(seed: int = 0) -> Network:
    """The manual's ``Input -> Conv2d -> Cast -> HardOp -> Cast -> ReLU -> MaxPool2d``: op 3
    compiled ahead of time into a Buyi HardOp."""
    return to_hardop(manual_float(seed), [3], "buyi")


MANUAL_BINDINGS = {1: HostBackend, 2: HostBackend, 3: BuyiBackend, 4: BuyiBackend,
                   5: HostBackend, 6: HostBackend}  # fmt: skip


def _x(seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((1, 3, 12, 12)).astype(np.float32)


def _assert_manual_bindings(sess: Session) -> None:
    bindings = sess.backend_bindings()
    assert sorted(bindings) == sorted(MANUAL_BINDINGS)
    for op_id, cls in MANUAL_BINDINGS.items():
        assert bindings[op_id].is_type(cls), (op_id, bindings[op_id])


def test_manual_1_1_1_create_by_priority(buyi: NpuDevice) -> None:
    network = manual_network()
    assert network.op(3).op_type == "HardOp"
    want = _host(manual_float(), {"x": _x()})
    sess = Session.create([BuyiBackend, HostBackend], network, [buyi, HostDevice.default()])
    sess.apply()
    _assert_manual_bindings(sess)
    _assert_same(sess.forward([_x()]), want)
    sess.close()
    sess2 = Session.create_by_order(
        network, [BuyiBackend(), HostBackend()], [buyi, HostDevice.default()]
    ).apply()
    _assert_manual_bindings(sess2)
    _assert_same(sess2.forward([_x()]), want)
    sess2.close()


def test_manual_1_1_2_create_with_backends(buyi: NpuDevice) -> None:
    network = manual_network()
    host_backend = HostBackend.create(network.view([1, 2, 5, 6]), HostDevice.default())
    buyi_backend = BuyiBackend.create(network.view([3, 4]), buyi)
    sess = Session.create_with_backends(network, [host_backend, buyi_backend]).apply()
    _assert_manual_bindings(sess)
    _assert_same(sess.forward([_x()]), _host(manual_float(), {"x": _x()}))
    sess.close()


@pytest.mark.parametrize("name", sorted(COMPOSITES))
def test_composite_networks_bit_exact_on_buyi(name: str, buyi: NpuDevice) -> None:
    model = COMPOSITES[name]()
    qnet = _quantized(model)
    feeds = random_feeds(model, seed=42)
    sess = Session.create([BuyiBackend, HostBackend], qnet, [buyi, None]).apply()
    npu_ops = [i for i, b in sess.backend_bindings().items() if b.is_type(BuyiBackend)]
    assert any(qnet.op(i).op_type in ("QConv2d", "QGemm") for i in npu_ops)
    _assert_same(sess.forward(feeds), _host(qnet, feeds))
    launched = {i for ids in sess.backends[0].launches for i in ids}
    assert launched >= {i for i in npu_ops if qnet.op(i).op_type == "QConv2d"}
    sess.close()
