"""ruff is clean on every Python tree, so lint cannot regress unnoticed between `make lint` runs."""

from __future__ import annotations

from tools.lint import ruff_check


def test_ruff_is_clean():
    proc = ruff_check(capture=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
