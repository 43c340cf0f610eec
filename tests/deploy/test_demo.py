"""README's first command, `make demo` (``python -m tools.demo``), as a user runs it: a real
server, the DMA round trip, then a quantized CNN on the simulated NPU, bit-exact against the
host, with its placement and profile."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_helpers import run_cli

pytestmark = pytest.mark.sim

REPO = Path(__file__).resolve().parents[2]


def test_make_demo_shows_the_dma_round_trip_and_a_cnn_on_the_npu(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(REPO)
    out = run_cli([], module="tools.demo", timeout_s=600)
    assert out.returncode == 0, out.stdout + out.stderr
    text = out.stdout
    assert "[4/7] verify: OK, bit-exact" in text
    assert "quantized operators on an accelerator: 9 of 9" in text
    assert "BuyiBackend" in text.split("time profile of network")[1]
    assert "[7/7] NPU result against HostBackend's: bit-exact" in text
    assert "Traceback" not in out.stderr
