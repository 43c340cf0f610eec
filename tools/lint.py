"""`make lint`: Verilator's -Wall lint of every RTL top, then ruff on the Python.

RTL tops: `npu_sim` for each target (which holds `npu_top` with that target's parameters),
`npu_dma_flat` and `npu_cmp_core_flat` (the DMA and the compute engine alone, with the flat
ports the block tests drive). Waivers live in
rtl/lint/npu.vlt, each with its reason. Exit status 1 on any finding.
"""

from __future__ import annotations

import subprocess
import sys

from npuemu.sim.build import (
    LINT_CONFIG,
    REPO_ROOT,
    rtl_include_args,
    rtl_sources,
    verilator_env,
)
from xrt.hw.targets import TARGETS

__all__ = ["LINT_TOPS", "RUFF_PATHS", "lint_rtl", "main", "ruff_check"]

LINT_TOPS: list[tuple[str, dict[str, int]]] = [
    *(("npu_sim", {"Target": cfg.id}) for cfg in TARGETS.values()),
    ("npu_dma_flat", {}),
    ("npu_cmp_core_flat", {}),
]

# The Python trees ruff checks (configuration in pyproject.toml).
RUFF_PATHS = ("runtime", "emulator", "tools", "tests", "bench")


def ruff_check(*, capture: bool = False) -> subprocess.CompletedProcess[str]:
    """Run ``ruff check`` on RUFF_PATHS from the repository root."""
    return subprocess.run(
        [sys.executable, "-m", "ruff", "check", *RUFF_PATHS],
        cwd=REPO_ROOT,
        capture_output=capture,
        text=True,
        check=False,
    )


def lint_rtl(top: str, parameters: dict[str, int]) -> subprocess.CompletedProcess[str]:
    """Run ``verilator --lint-only -Wall`` on `top`; the result carries Verilator's output."""
    cmd = [
        "verilator",
        "--lint-only",
        "-Wall",
        "--assert",  # as every simulation build: the SVA assertions linted too
        "--top-module",
        top,
        *(f"-G{k}={v}" for k, v in parameters.items()),
        "+define+NPU_LOCKSTEP",  # as every simulation build: the lockstep trace linted too
        *rtl_include_args(),
        str(LINT_CONFIG),
        *map(str, rtl_sources()),
    ]
    return subprocess.run(cmd, env=verilator_env(), capture_output=True, text=True, check=False)


def main() -> int:
    failed = False
    for top, params in LINT_TOPS:
        proc = lint_rtl(top, params)
        label = f"{top} {params}" if params else top
        if proc.returncode == 0 and "%Warning" not in proc.stderr:
            print(f"verilator -Wall {label}: clean")
        else:
            failed = True
            print(f"verilator -Wall {label}: FAILED\n{proc.stderr}")
    failed |= ruff_check().returncode != 0
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
