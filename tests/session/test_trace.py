"""The forward timeline (Chrome trace JSON for ui.perfetto.dev): Session and `xrt run --trace`."""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx_zoo import COMPOSITES
from tinynpu import TinyNpuBackend, manual_network

from xrt import ErrorCode, XrtError
from xrt.backend import HostBackend, Subgraph
from xrt.cli import main
from xrt.session import Session
from xrt.tensor import Tensor


class TracingNpu(TinyNpuBackend):
    """Adds a device span inside each merged run, as an NPU backend adds DMA and unit spans."""

    def forward_subgraph(
        self, subgraph: Subgraph, inputs: Mapping[str, Tensor], outputs: Mapping[str, Tensor]
    ) -> None:
        t0 = time.perf_counter()
        super().forward_subgraph(subgraph, inputs, outputs)
        self.trace("compute", t0, time.perf_counter() - t0, lane="npu.compute", cycles=123)


def _x() -> np.ndarray:
    return np.random.default_rng(1).standard_normal((1, 3, 8, 8)).astype(np.float32)


def _complete(doc: dict) -> list[dict]:
    return [e for e in doc["traceEvents"] if e["ph"] == "X"]


def test_a_traced_forward_has_every_unit_and_device_spans_inside_them(tmp_path: Path) -> None:
    sess = Session.create([TracingNpu, HostBackend], manual_network()).apply()
    with pytest.raises(XrtError) as e:
        sess.write_trace(tmp_path / "none.json")
    assert e.value.code == ErrorCode.WRONG_ORDER
    sess.enable_trace()
    sess.forward([_x()])
    sess.write_trace(tmp_path / "t.json")
    doc = json.loads((tmp_path / "t.json").read_text())
    lanes = {e["tid"]: e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "thread_name"}
    spans = _complete(doc)
    by_lane: dict[str, list[dict]] = {}
    for s in spans:
        by_lane.setdefault(lanes[s["tid"]], []).append(s)
    # One span per execution unit, on its backend's lane, in order and not overlapping.
    units = by_lane["host"] + by_lane["TracingNpu"]
    assert len(units) == len(sess.execution_units())
    ordered = sorted(units, key=lambda s: s["ts"])
    for a, b in itertools.pairwise(ordered):
        assert a["ts"] + a["dur"] <= b["ts"] + 1e-3
    (npu_unit,) = by_lane["TracingNpu"]
    (dev,) = by_lane["npu.compute"]
    assert dev["args"] == {"cycles": 123} and dev["cat"] == "device"
    assert (
        npu_unit["ts"] <= dev["ts"]
        and dev["ts"] + dev["dur"] <= npu_unit["ts"] + npu_unit["dur"] + 1e-3
    )
    assert {s["name"] for s in by_lane["session"]} == {"inputs in", "outputs out"}
    # Not tracing: no events, and the next traced run starts a new timeline.
    sess.enable_trace(False)
    sess.forward([_x()])
    assert sess.trace_events() == []


def test_xrt_run_trace_writes_a_perfetto_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = tmp_path / "m.onnx"
    onnx.save(COMPOSITES["small_cnn"](), model)
    trace = tmp_path / "run.json"
    assert main(["run", str(model), "--trace", str(trace)]) == 0
    out = capsys.readouterr().out
    doc = json.loads(trace.read_text())
    # The count said is the file's, as `jq '.traceEvents | length'` counts it (issue 43).
    assert f"trace: {trace} ({len(doc['traceEvents'])} trace events: " in out, out
    spans = _complete(doc)
    assert any(s["name"].startswith("op ") and "Conv2d" in s["name"] for s in spans)
    assert main(["run", str(model), "--trace", str(tmp_path / "no" / "dir.json")]) == 2
