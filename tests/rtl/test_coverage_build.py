"""A coverage build end to end (what `make coverage` does for every model, on the smallest):
the DMA block with line, toggle and functional coverage, a short run of its cocotb tests
with NPU_EMU_COVERAGE set, the run's data file merged and reported.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from npuemu.sim.build import build_model
from npuemu.sim.cocotb_run import run_cocotb
from tools.coverage.__main__ import ROOT, WAIVERS
from tools.coverage.report import build_report

CONFIG = "w8-tight"


@pytest.mark.sim
def test_dma_block_coverage_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from test_dma_block import CONFIGS, RAM_SIZE

    dat = tmp_path / "dat"
    monkeypatch.setenv("NPU_EMU_COVERAGE", str(dat))
    bus_bytes, max_burst, max_out, fifo = CONFIGS[CONFIG]
    model = build_model(
        "npu_dma_flat",
        {
            "BusBytes": bus_bytes,
            "MaxBurstBeats": max_burst,
            "MaxOutstanding": max_out,
            "FifoDepth": fifo,
            "Mem0Base": "64'h0",
            "Mem0Size": f"64'h{RAM_SIZE:x}",
            "Mem1Base": f"64'h{RAM_SIZE:x}",
            "Mem1Size": f"64'h{RAM_SIZE:x}",
        },
        name=f"dma-{CONFIG}",
    )
    assert model.coverage and model.build_dir.name.startswith(f"dma-{CONFIG}-cov-")
    run_cocotb(
        model,
        "test_dma_block",
        test_dir=tmp_path / "run",
        extra_env={
            "DMA_CONFIG": ",".join(map(str, CONFIGS[CONFIG])),
            "NPU_TEST_SEED": "7",
            "DMA_CASES": "5",
        },
        seed=7,
    )
    files = sorted(dat.glob("npu_dma_flat-*.dat"))
    assert len(files) == 1, files  # the run's own file, named by the plusarg
    summary = build_report(files, tmp_path / "out", ROOT, WAIVERS, {"generated": "test"})
    assert json.loads((tmp_path / "out" / "summary.json").read_text()) == summary
    dma = summary["rtl/dma"]
    assert dma["line"] > 50 and dma["toggle"] > 10, dma  # the engine ran
    assert "rtl/compute" not in summary  # no compute engine in this model
    # the functional bins of the DMA are in the data; the compute engine's are not
    groups = summary["functional"]["groups"]
    assert set(groups) == {"dma_axi", "dma_end", "dma_shape", "dma_align", "dma_window"}, groups
    assert "dma_end.OK" not in summary["functional"]["missed"]
