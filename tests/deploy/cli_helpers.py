"""The real `npu-emu` and `xrt` commands run as subprocesses of this environment's Python
(for the deployment and debugging tests)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence


def run_cli(
    args: Sequence[str],
    *,
    env: dict[str, str] | None = None,
    timeout_s: float = 180.0,
    module: str = "npuemu",
) -> subprocess.CompletedProcess[str]:
    """`python -m npuemu ARGS` (or another module), output captured."""
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env={**os.environ, **(env or {})},
        check=False,
    )
