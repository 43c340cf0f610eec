"""Progress of long steps off a terminal: heartbeat lines while a step lasts, one line at
its end, nothing for a short step, and nothing at all with XRT_PROGRESS=0."""

from __future__ import annotations

import threading
import time

import pytest

from xrt import progress as progress_module
from xrt.progress import progress


@pytest.fixture(autouse=True)
def _default_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("XRT_PROGRESS", raising=False)


def test_a_long_step_beats_and_says_when_it_ends(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(progress_module, "HEARTBEAT_S", 0.01)
    seen = ""
    with progress("building the model"):
        deadline = time.monotonic() + 30
        while seen.count("building the model: ") < 2:  # two heartbeats
            assert time.monotonic() < deadline, seen
            time.sleep(0.01)
            seen += capsys.readouterr().err
    lines = (seen + capsys.readouterr().err).splitlines()
    assert all(line.startswith("building the model: ") for line in lines)
    assert lines[0].endswith(" s ...") and lines[-1].startswith("building the model: done in ")


def test_a_short_step_prints_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    with progress("quick"):
        pass
    assert capsys.readouterr().err == ""


def test_xrt_progress_0_silences_it(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XRT_PROGRESS", "0")
    monkeypatch.setattr(progress_module, "HEARTBEAT_S", 0.001)
    with progress("silent"):
        threading.Event().wait(0.05)  # many heartbeat periods
    assert capsys.readouterr().err == ""
