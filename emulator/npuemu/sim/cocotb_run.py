"""Run cocotb test modules against a built model, from pytest or a script."""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from npuemu.sim.build import BuiltModel, verilator_env
from npuemu.sim.coverage import coverage_plusarg

__all__ = ["WAVE_FILES", "CocotbTestsFailedError", "run_cocotb", "simulator_env"]

# FST files that runs of traced models (WAVES=1) wrote in this process, for a summary.
WAVE_FILES: list[Path] = []


class CocotbTestsFailedError(AssertionError):
    """Some cocotb tests failed; the message carries the end of the simulator log."""


def run_cocotb(
    model: BuiltModel,
    test_module: str,
    *,
    test_dir: Path,
    testcase: str | Sequence[str] | None = None,
    plusargs: Sequence[str] = (),
    extra_env: Mapping[str, str] | None = None,
    seed: int | None = None,
) -> Path:
    """Run the cocotb tests of `test_module` in `model`; raise on any failure.

    Args:
        model: From `build_model`.
        test_module: Importable module holding ``@cocotb.test()`` functions.
        test_dir: Working folder of the run (logs, results.xml).
        testcase: Only these tests.
        plusargs: Simulator plusargs (``+npu_mem_udma=PATH``...).
        extra_env: Environment for the simulator process.
        seed: cocotb's random seed (printed by cocotb; pass it to reproduce a run).

    Returns:
        The results XML file.

    Raises:
        CocotbTestsFailedError: a test failed or the simulation died; the message holds the
            failing tests' log sections.
    """
    from cocotb_tools.check_results import get_results
    from cocotb_tools.runner import get_runner

    test_dir.mkdir(parents=True, exist_ok=True)
    log_file = test_dir / "sim.log"
    results = test_dir / "results.xml"
    saved_env = dict(os.environ)
    os.environ.update(verilator_env())
    os.environ.update(cocotb_library_path(os.environ))  # the runner starts from os.environ
    try:
        runner = get_runner("verilator")
        # The runner raises SystemExit when a test fails; the results file says which.
        with contextlib.suppress(SystemExit):
            runner.test(
                test_module=test_module,
                hdl_toplevel=model.toplevel,
                hdl_toplevel_lang="verilog",
                build_dir=model.build_dir,
                test_dir=test_dir,
                testcase=testcase,
                # a coverage model's counts go to a file of this run's own (make coverage)
                plusargs=[*plusargs, *(coverage_plusarg(model.toplevel) if model.coverage else [])],
                extra_env=dict(extra_env or {}),
                seed=seed,
                results_xml=str(results),
                log_file=log_file,
                waves=model.waves,
            )
    finally:
        os.environ.clear()
        os.environ.update(saved_env)
        if model.waves:
            _keep_waves(test_dir, test_module, testcase)
    if not results.exists():
        raise CocotbTestsFailedError(
            f"the simulation of {test_module} died:\n{_log_tail(log_file)}"
        )
    total, failed = get_results(results)
    if failed or total == 0:
        raise CocotbTestsFailedError(
            f"{failed} of {total} cocotb tests failed in {test_module} (log: {log_file})\n"
            + _failures(log_file)
        )
    return results


def _keep_waves(test_dir: Path, test_module: str, testcase: str | Sequence[str] | None) -> None:
    """Move the run's dump.fst to the fixed waves folder (WAVES=1) and say where."""
    from npuemu.sim.build import WAVES_DIR

    dump = test_dir / "dump.fst"
    if not dump.exists():
        return
    cases = [testcase] if isinstance(testcase, str) else list(testcase or [])
    # The test folder's name tells parametrized pytest runs apart (test_npu_sim_buyi_0).
    name = "-".join([test_module.rsplit(".", 1)[-1], *cases, test_dir.name])
    WAVES_DIR.mkdir(parents=True, exist_ok=True)
    target = WAVES_DIR / f"{name}.fst"
    shutil.move(dump, target)
    WAVE_FILES.append(target)
    print(f"waves: {target}", file=sys.stderr)


def _log_tail(log_file: Path, lines: int = 60) -> str:
    if not log_file.exists():
        return "(no log)"
    return "\n".join(log_file.read_text(errors="replace").splitlines()[-lines:])


def _failures(log_file: Path) -> str:
    """The log sections of failed tests (from 'failed' to the next test), and the summary."""
    out: list[str] = []
    keep = False
    for line in log_file.read_text(errors="replace").splitlines():
        if " failed" in line and "cocotb.regression" in line:
            keep = True
        elif "cocotb.regression" in line and "running " in line:
            keep = False
        if keep or "FAIL " in line:
            out.append(line)
    return "\n".join(out[-200:])


@functools.cache
def _libpython() -> str:
    """The shared libpython the simulator embeds, looked up once per process: the lookup
    runs ``ldconfig``/``gcc`` subprocesses (ctypes.util), which a server restarting a
    worker has no reason to spawn each time."""
    import find_libpython

    libpython = find_libpython.find_libpython()
    if libpython is None:
        raise RuntimeError("cannot find libpython: is this Python built with a shared library?")
    return libpython


def cocotb_library_path(env: Mapping[str, str]) -> dict[str, str]:
    """`LD_LIBRARY_PATH` with this interpreter's cocotb libraries first.

    A model's executable records the cocotb library folder of the venv that built it (its
    RUNPATH); a shared build cache (`NPU_EMU_BUILD_DIR`) can outlive that venv, and the
    loader searches `LD_LIBRARY_PATH` before RUNPATH.
    """
    from cocotb_tools import config

    rest = env.get("LD_LIBRARY_PATH", "")
    return {"LD_LIBRARY_PATH": os.pathsep.join(p for p in (str(config.libs_dir), rest) if p)}


def simulator_env(
    model: BuiltModel, test_module: str, results_file: Path, extra_env: Mapping[str, str]
) -> dict[str, str]:
    """Environment to start a built model's executable directly, running `test_module`.

    For long-lived simulator processes that a caller supervises itself (the emulator's
    workers): the same variables cocotb's runner sets before it runs a test.
    """
    from cocotb_tools import config

    libpython = _libpython()
    env = dict(os.environ)
    env.update(verilator_env())
    env.update(
        {
            "PATH": f"{env['PATH']}{os.pathsep}{config.libs_dir}",
            "PYTHONPATH": os.pathsep.join(sys.path),
            "PYGPI_PYTHON_BIN": sys.executable,
            "GPI_USERS": f"{libpython};{config.pygpi_entry_point()}",
            "COCOTB_TOPLEVEL": model.toplevel,
            "COCOTB_TEST_MODULES": test_module,
            "TOPLEVEL_LANG": "verilog",
            "COCOTB_RESULTS_FILE": str(results_file),
            **cocotb_library_path(env),
            **extra_env,
        }
    )
    return env
