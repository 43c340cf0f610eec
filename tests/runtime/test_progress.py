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


def test_a_step_with_an_expected_duration_is_announced_and_counts_down(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A model build: its last build took 120 s; announced before anything else, with it.
    monkeypatch.setattr(progress_module, "HEARTBEAT_S", 0.01)
    monkeypatch.setattr(progress_module, "HEARTBEAT_MAX_S", 0.04)
    seen = ""
    with progress(
        "building the verilated model buyi-waves (traced)",
        expected_s=120.0,
        basis="its last build here",
        detail="log: /x/build.log",
    ):
        seen += capsys.readouterr().err
        assert seen == (
            "building the verilated model buyi-waves (traced): expected to take about "
            "120 s (its last build here); log: /x/build.log\n"
        )
        deadline = time.monotonic() + 30
        while seen.count(" left") < 2:
            assert time.monotonic() < deadline, seen
            time.sleep(0.01)
            seen += capsys.readouterr().err
    lines = (seen + capsys.readouterr().err).splitlines()
    assert lines[1] == "building the verilated model buyi-waves (traced): 0 s, about 120 s left"
    assert lines[-1].startswith("building the verilated model buyi-waves (traced): done in ")


def test_eta_text_counts_down_then_says_the_step_is_late() -> None:
    assert progress_module.eta_text(35.2, 110.0) == "35 s, about 75 s left"
    assert progress_module.eta_text(130.0, 110.0) == "130 s, past the expected 110 s"
    assert progress_module.eta_text(12.0, None) == "12 s ..."


def test_heartbeats_thin_out_on_a_long_step(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A 263 s build used to print 52 lines at 5 s; gaps now double up to HEARTBEAT_MAX_S.
    gaps: list[float] = []
    real_every = progress_module._every

    def recording_every(period_s, action):  # the same ticker; its gaps are kept
        def period() -> float:
            gaps.append(period_s())
            return 0.001

        return real_every(period, action)

    monkeypatch.setattr(progress_module, "_every", recording_every)
    with progress("long"):
        deadline = time.monotonic() + 30
        while len(gaps) < 8:
            assert time.monotonic() < deadline
            time.sleep(0.01)
    capsys.readouterr()
    hb, top = progress_module.HEARTBEAT_S, progress_module.HEARTBEAT_MAX_S
    assert gaps[:5] == [hb, 2 * hb, 4 * hb, top, top]
    elapsed, lines = 0.0, 0
    for gap in (gaps + [top] * 100)[:100]:
        elapsed += gap
        if elapsed > 263:
            break
        lines += 1
    assert lines <= 12
