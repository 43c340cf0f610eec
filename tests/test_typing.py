"""mypy is clean on the packages whose types others build on: the hardware contract
(``xrt.hw``), the transports (``xrt.transport``), the device server (``npuemu.server``)
and its worker, with the configuration in pyproject.toml."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_mypy_is_clean_on_the_typed_packages() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-incremental", "--cache-dir", "/dev/null"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert "Success" in run.stdout
