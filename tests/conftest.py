"""Session-wide hooks: where WAVES=1 runs left their waveforms."""

from __future__ import annotations

import pytest


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    from npuemu.sim.cocotb_run import WAVE_FILES

    if WAVE_FILES:
        terminalreporter.section("waveforms (WAVES=1)")
        for path in WAVE_FILES:
            terminalreporter.write_line(str(path))
