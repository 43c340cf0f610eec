"""Every RTL top passes `verilator --lint-only -Wall` (waivers only in rtl/lint/npu.vlt)."""

from __future__ import annotations

import pytest

from tools.lint import LINT_TOPS, lint_rtl


@pytest.mark.parametrize(("top", "params"), LINT_TOPS, ids=lambda x: str(x))
def test_verilator_lint_is_clean(top, params):
    proc = lint_rtl(top, params)
    assert proc.returncode == 0 and "%Warning" not in proc.stderr, proc.stderr


def test_every_waiver_says_why():
    """Each lint_off line in the waiver file follows a comment explaining it."""
    from npuemu.sim.build import LINT_CONFIG

    lines = LINT_CONFIG.read_text().splitlines()
    for i, line in enumerate(lines):
        if line.startswith("lint_off"):
            above = lines[i - 1].strip()
            assert above.startswith("//") or lines[i - 1].startswith("lint_off"), (
                f"waiver without a reason: {line}"
            )
