"""Issue 45's property on the RTL: networks whose layers needed raised weight scales to keep
the int32 accumulator bound (near-dead channels, tests/network/test_quant_property.py) run
on the verilated Buyi NPU bit-exact with HostBackend on inputs far from the calibration
(uniform, +-1e3 and +-3e38 extremes, zeros, tiny values), with the raised layers on the NPU."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "network"))

from light_models import random_feeds
from test_quant_property import assert_bound_kept, input_kinds, quantized

from xrt.backend import BuyiBackend, HostBackend
from xrt.npu_device import NpuDevice
from xrt.session import Session

pytestmark = pytest.mark.sim


@pytest.mark.parametrize("name", ["squeezenet", "residual"])
def test_raised_scales_run_bit_exact_on_the_rtl(name: str, buyi: NpuDevice) -> None:
    q, report, model = quantized(name, 11, dead=True)
    assert_bound_kept(q)
    assert report.raised_channels > 0
    raised = {layer for layer, _ in report.raised}
    kinds = input_kinds(random_feeds(model, 311), 11)
    with Session.create([HostBackend], q).apply() as host:
        want = {k: [t.numpy() for t in host.forward(f)] for k, f in kinds.items()}
    with Session.create([BuyiBackend, HostBackend], q, [buyi, None]).apply() as sess:
        bindings = sess.backend_bindings()
        for kind, feeds in kinds.items():
            got = [t.numpy() for t in sess.forward(feeds)]
            for g, w in zip(got, want[kind], strict=True):
                np.testing.assert_array_equal(g, w, err_msg=kind)
    on_npu = {
        op.name for op in q.ops if op.name in raised and bindings[op.op_id].is_type(BuyiBackend)
    }
    assert on_npu == raised, f"raised layers left on the host: {raised - on_npu}"
