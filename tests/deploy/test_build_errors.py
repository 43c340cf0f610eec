"""A failed model build prints Verilator's first errors and the path of the full log, not
a traceback (a broken RTL file in a copy of rtl/)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from cli_helpers import run_cli

from npuemu.sim.build import RTL_DIR

pytestmark = pytest.mark.sim


def test_broken_rtl_gives_the_short_error(tmp_path):
    rtl = tmp_path / "rtl"
    shutil.copytree(RTL_DIR, rtl)
    fifo = rtl / "common" / "npu_fifo.sv"
    text = fifo.read_text()
    assert "endmodule" in text
    fifo.write_text(text.replace("endmodule", "  this is not verilog;\nendmodule", 1))
    out = run_cli(
        ["build", "--target", "buyi"],
        env={"NPU_EMU_RTL_DIR": str(rtl), "NPU_EMU_BUILD_DIR": str(tmp_path / "build")},
    )
    assert out.returncode == 1, out
    err = out.stderr
    assert "Traceback" not in err, err
    assert "building the verilated model npu_sim failed" in err
    assert re.search(r"%Error: \S*npu_fifo\.sv:\d+", err), err
    log = re.search(r"full log: (\S+)", err)
    assert log and Path(log.group(1)).is_file(), err
    assert len(err.splitlines()) < 30, err


def test_pgo_of_the_traced_model_is_refused_before_any_build(tmp_path):
    out = run_cli(
        ["build", "--target", "buyi", "--pgo", "--waves", "--json"],
        env={"NPU_EMU_BUILD_DIR": str(tmp_path / "build")},
    )
    assert out.returncode == 2, out
    assert "--pgo profiles the untraced model" in out.stdout and not (tmp_path / "build").exists()
