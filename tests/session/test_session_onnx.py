"""Whole models through Session and HostBackend: onnxruntime for float, exact integers for int8.

* Float networks (the composite CNNs of tests/network/onnx_zoo.py) match onnxruntime to
  1e-4 relative (netutil.assert_close), and the session's result equals the reference
  executor's bit for bit.
* Quantized networks equal the integer arithmetic of docs/quantization.md exactly: the
  reference executor's integer kernels are checked against loop implementations in
  tests/network/test_quant_exact.py; here the session (host alone, and host with the
  NPU-like TinyNpu taking its int8 operators) must reproduce them bit for bit.
"""

from __future__ import annotations

import numpy as np
import pytest
from netutil import assert_close, ort_run, random_feeds
from onnx_zoo import COMPOSITES
from tinynpu import TinyNpuBackend

from xrt import HostDevice
from xrt.backend import HostBackend
from xrt.network import Network, run_network_reference
from xrt.quant import calibrate, quantize_network
from xrt.session import Session


@pytest.mark.parametrize("name", sorted(COMPOSITES))
def test_float_composites_match_onnxruntime(name: str) -> None:
    model = COMPOSITES[name]()
    net = Network.from_onnx(model)
    sess = Session.create([HostBackend], net).apply()
    for seed in (0, 1):
        feeds = random_feeds(model, seed=seed)
        got = sess.forward(feeds)
        assert [t.tensor_type for t in got] == net.output_types()
        ref = ort_run(model, feeds)
        direct = run_network_reference(net, feeds)
        assert len(got) == len(ref) == len(direct)
        for g, r, d in zip(got, ref, direct, strict=True):
            assert g.is_on(HostDevice.default_region())
            assert_close(g.numpy(), r)
            np.testing.assert_array_equal(g.numpy(), d)
    plan = sess.memory_plan
    assert plan.conflicts() == [] and plan.peak_bytes < plan.total_bytes


@pytest.mark.parametrize("name", ["small_cnn", "residual", "mobilenet", "fpn"])
def test_quantized_composites_are_exact(name: str) -> None:
    model = COMPOSITES[name]()
    net = Network.from_onnx(model)
    samples = [random_feeds(model, seed=s) for s in range(4)]
    qnet = quantize_network(net, ranges=calibrate(net, samples))
    host = Session.create([HostBackend], qnet).apply()
    mixed = Session.create([TinyNpuBackend, HostBackend], qnet).apply()
    for seed in (10, 11):
        feeds = random_feeds(model, seed=seed)
        want = run_network_reference(qnet, feeds, return_all=True)
        assert isinstance(want, dict)
        for sess in (host, mixed):
            got = sess.forward(feeds)
            for name_, g in zip(sess.outputs, got, strict=True):
                np.testing.assert_array_equal(g.numpy(), want[name_])
        # Every int8 value on the way, through step_to on the mixed session.
        for op in qnet.ops:  # the Output op yields the network's outputs
            yields = op.inputs if op.op_type == "Output" else op.outputs
            for v, t in zip(yields, mixed.step_to(op.op_id, feeds), strict=True):
                np.testing.assert_array_equal(t.numpy(), want[v])


def test_tinynpu_takes_the_int8_operators_of_a_quantized_network() -> None:
    """The mixed sessions above are really mixed: TinyNpu runs some operators."""
    model = COMPOSITES["small_cnn"]()
    net = Network.from_onnx(model)
    qnet = quantize_network(net, ranges=calibrate(net, [random_feeds(model, seed=0)]))
    sess = Session.create([TinyNpuBackend, HostBackend], qnet).apply()
    on_npu = [
        qnet.op(i).op_type for i, b in sess.backend_bindings().items() if b.is_type(TinyNpuBackend)
    ]
    assert "MaxPool2d" in on_npu
    assert all(
        qnet.values[qnet.op(i).inputs[0]].dtype.manual_name == "SInt8"
        for i, b in sess.backend_bindings().items()
        if b.is_type(TinyNpuBackend)
    )


def test_saved_networks_run_the_same(tmp_path) -> None:  # type: ignore[no-untyped-def]
    model = COMPOSITES["inception"]()
    net = Network.from_onnx(model)
    net.save(tmp_path / "net.json")
    loaded = Network.load(tmp_path / "net.json")
    feeds = random_feeds(model, seed=3)
    a = Session.create([HostBackend], net).apply().forward(feeds)
    b = Session.create([HostBackend], loaded).apply().forward(feeds)
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x.numpy(), y.numpy())
