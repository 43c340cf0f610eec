"""Coverage-instrumented simulations: which models to build, where each run writes its data.

`NPU_EMU_COVERAGE=DIR` in the environment turns it on for every process that inherits it
(pytest, a device server and its workers): `build_model` then builds the models with
Verilator's line and toggle coverage (`COVERAGE_ARGS`, a cache folder of their own, named
``...-cov-<hash>``), and every simulator process writes its counts into DIR in a file of
its own when it ends:

- models with cocotb's main loop (the block tests) through the plusarg
  `coverage_plusarg` that `npuemu.sim.cocotb_run.run_cocotb` adds (cocotb's main calls
  ``VerilatedCov::write()`` at exit, which honours it);
- `npu_sim` (our own main loop, rtl/sim/npu_sim_main.cpp) by reading the variable itself
  at the end of ``main``: a device server's workers get no plusargs from us, and a worker
  told to QUIT ends its loop and writes. A worker killed (SIGKILL at a server's stop after
  its grace time, or a test that kills it on purpose) writes nothing; its counts are lost.

``make coverage`` (tools/coverage.py) sets the variable, runs the tests and merges the
files (`npuemu.sim.covdata`).
"""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

__all__ = [
    "COVERAGE_ARGS",
    "COVERAGE_ENV",
    "coverage_dir",
    "coverage_file",
    "coverage_plusarg",
]

COVERAGE_ENV = "NPU_EMU_COVERAGE"
# Line coverage (Verilator's "line" points are blocks: each arm of an if or a case, each
# process body; "branch" points, each arm of a ?:, come with it) and toggle coverage (each
# bit of each signal, 0->1 and 1->0 as two points). --coverage-max-width keeps Verilator's
# default (256): wider signals (the SRAM arrays) have no toggle points. The functional
# bins (--coverage-user, npuemu.sim.fcov) are added by build_model.
COVERAGE_ARGS = ("--coverage-line", "--coverage-toggle")


def coverage_dir() -> Path | None:
    """The folder that `NPU_EMU_COVERAGE` names (created), or None when coverage is off."""
    value = os.environ.get(COVERAGE_ENV, "")
    if not value:
        return None
    path = Path(value).resolve()
    path.mkdir(parents=True, exist_ok=True)
    return path


def coverage_file(toplevel: str) -> Path | None:
    """A fresh file name in the coverage folder for one simulator run of `toplevel`."""
    folder = coverage_dir()
    if folder is None:
        return None
    return folder / f"{toplevel}-{time.strftime('%H%M%S')}-{uuid.uuid4().hex[:12]}.dat"


def coverage_plusarg(toplevel: str) -> list[str]:
    """The plusarg naming the run's coverage file (cocotb's main loop writes it at exit),
    or nothing when coverage is off."""
    path = coverage_file(toplevel)
    return [] if path is None else [f"+verilator+coverage+file+{path}"]
