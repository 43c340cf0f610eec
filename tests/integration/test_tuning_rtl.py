"""Tuning records with the NPU backends on a real ``npu-emu serve``: candidates measured on the
RTL engine's cycles, recorded, reused by a later session, results bit-exact with the host."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "network"))

from netutil import random_feeds
from onnx_zoo import COMPOSITES

from npuemu.server.launch import ServerProcess
from xrt import Device
from xrt.backend import BuyiBackend, HostBackend, ZG330Backend
from xrt.backend.npu import NpuBackend
from xrt.network import Network
from xrt.npu_device import NpuDevice
from xrt.quant import quantize_network
from xrt.session import Session
from xrt.tuning import TuningRecords

pytestmark = pytest.mark.sim


@pytest.fixture
def zg330(zg330_server: ServerProcess) -> Iterator[NpuDevice]:
    dev = Device.open(zg330_server.url)
    assert isinstance(dev, NpuDevice)
    yield dev
    dev.close()


def _run(
    kind: type[NpuBackend], dev: NpuDevice, net: Network, feeds: dict, records: TuningRecords
) -> tuple[list[np.ndarray], NpuBackend]:  # type: ignore[type-arg]
    sess = Session.create([kind, HostBackend], net, [dev, None])
    sess.set_tuning(records, tune=True)
    with sess.apply():
        backend = sess.backends[0]
        assert isinstance(backend, NpuBackend)
        return [t.numpy() for t in sess.forward(feeds)], backend


@pytest.mark.parametrize("target", ["buyi", "zg330"])
def test_tuned_on_rtl_cycles_reused_and_bit_exact(
    target: str, buyi: NpuDevice, zg330: NpuDevice, tmp_path: Path
) -> None:
    model = COMPOSITES["small_cnn"]()
    net = quantize_network(Network.from_onnx(model), [random_feeds(model, seed=0)])
    feeds = random_feeds(model, seed=42)
    with Session.create([HostBackend], net).apply() as host:
        want = [t.numpy() for t in host.forward(feeds)]
    kind, dev = (BuyiBackend, buyi) if target == "buyi" else (ZG330Backend, zg330)
    records = TuningRecords()
    got, backend = _run(kind, dev, net, feeds, records)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)
    report = backend.tune_report
    convs = [op for op in net.ops if op.op_type in ("QConv2d", "QGemm")]
    assert report.tuned == len(convs) and report.measurements > len(convs)
    assert all(r.measured_on == "rtl" and r.cost <= r.default_cost for r in records)
    assert all(r.cost > 0 for r in records)  # RUN_CYCLES of a real launch
    records.save(tmp_path / "records.json")
    # A later session reads them: nothing is measured again, results still exact.
    again = TuningRecords.load(tmp_path / "records.json")
    got2, backend2 = _run(kind, dev, net, feeds, again)
    assert backend2.tune_report.measurements == 0 and backend2.tune_report.tuned == 0
    assert backend2.tune_report.reused == len(convs)
    for g, w in zip(got2, want, strict=True):
        np.testing.assert_array_equal(g, w)
    assert not again.notes
