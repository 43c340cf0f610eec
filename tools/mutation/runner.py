"""Run a pytest selection on one copy of the RTL and tell which test failed first."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["RunResult", "run_selection"]

# Variables that would change what the tests build or where they write: a mutant run gets
# none of them from the caller's environment (a coverage build, waves).
_DROP_ENV = ("NPU_EMU_COVERAGE", "WAVES", "NPU_EMU_RTL_DIR", "NPU_EMU_BUILD_DIR")


@dataclass(frozen=True)
class RunResult:
    """The outcome of one pytest run."""

    passed: bool
    failed_test: str | None  # first failing test: pytest id, and the cocotb test inside it
    timed_out: bool
    seconds: float
    returncode: int
    log: Path
    also_failed: tuple[str, ...] = ()  # the other cocotb tests that failed in that test
    assertion: str | None = None  # the first RTL assertion that failed in the run, if any


def run_selection(
    root: Path,
    tests: Sequence[str],
    work: Path,
    *,
    rtl_dir: Path | None = None,
    build_dir: Path | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = 900.0,
    stop_first: bool = True,
) -> RunResult:
    """Run ``pytest tests`` in `root` (one process, no xdist), on `rtl_dir` if given.

    Args:
        root: The repository checkout (working directory of the run).
        tests: pytest paths or node ids.
        work: A folder of this run's own: pytest's basetemp, its JUnit XML and its log.
        rtl_dir: The RTL to build the models from (``NPU_EMU_RTL_DIR``); None: rtl/.
        build_dir: Where the models are built (``NPU_EMU_BUILD_DIR``); None: the cache.
        env: More environment variables for the run.
        timeout: Seconds before the run is stopped (its process group killed): a hang.
        stop_first: Stop at the first failing test (``-x``).

    Returns:
        Whether every test passed and, if not, which one failed first.
    """
    work.mkdir(parents=True, exist_ok=True)
    junit, log = work / "junit.xml", work / "pytest.log"
    junit.unlink(missing_ok=True)
    run_env = {k: v for k, v in os.environ.items() if k not in _DROP_ENV}
    run_env["PYTHONPATH"] = os.pathsep.join(
        [str(root / "runtime"), str(root / "emulator"), run_env.get("PYTHONPATH", "")]
    ).rstrip(os.pathsep)
    if rtl_dir is not None:
        run_env["NPU_EMU_RTL_DIR"] = str(rtl_dir)
    if build_dir is not None:
        run_env["NPU_EMU_BUILD_DIR"] = str(build_dir)
    run_env.update(env or {})
    cmd = [
        sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
        f"--basetemp={work / 'tmp'}", f"--junitxml={junit}", *(["-x"] if stop_first else []),
        *tests,
    ]  # fmt: skip
    start = time.monotonic()
    timed_out = False
    with log.open("w") as out:
        # A session of its own, so a hung run is stopped with every simulator it started.
        proc = subprocess.Popen(
            cmd, cwd=root, env=run_env, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            os.killpg(proc.pid, signal.SIGKILL)
            rc = proc.wait()
    seconds = time.monotonic() - start
    if timed_out:
        return RunResult(False, f"(timeout after {timeout:.0f} s)", True, seconds, rc, log)
    failed, also = _first_failure(junit, work / "tmp")
    if rc != 0 and failed is None:
        failed = f"(pytest exit status {rc}: see {log})"
    assertion = first_assertion(work / "tmp") if rc != 0 else None
    return RunResult(rc == 0, failed, False, seconds, rc, log, also, assertion)


# Verilator's report of a failed assertion (rtl/include/npu_assert.svh): "[<time>] %Error:
# <file>:<line>: Assertion failed in <scope>: <name>: <message>".
_ASSERTION_LINE = re.compile(r"^\[(\d+)\] %Error: \S+: Assertion failed in (\S+): (\w+): (.*)$")


def first_assertion(basetemp: Path) -> str | None:
    """The RTL assertion that failed first (by simulated time) in any simulator log under
    `basetemp`: "NAME (SCOPE) at TIME ps: MESSAGE", or None when none failed. A failing
    assertion stops a test's simulation at once, so it is what caught a mutant first, before
    any check of the test's own."""
    first: tuple[int, str] | None = None
    for log in sorted(basetemp.glob("**/sim.log")):
        for line in log.read_text(errors="replace").splitlines():
            m = _ASSERTION_LINE.match(line.strip())
            if m is None:
                continue
            time_ps, scope, name, message = int(m[1]), m[2], m[3], m[4]
            if first is None or time_ps < first[0]:
                first = (time_ps, f"{name} ({scope}) at {time_ps} ps: {message}")
            break  # the first of each log
    return None if first is None else first[1]


def _first_failure(junit: Path, basetemp: Path) -> tuple[str | None, tuple[str, ...]]:
    """The first failed or errored test of the JUnit file (``node > cocotb test`` when it
    ran a simulation: the first cocotb test that failed in its results.xml), and the other
    cocotb tests that failed in it."""
    if not junit.exists():
        return None, ()
    for case in ET.parse(junit).getroot().iter("testcase"):
        if case.find("failure") is None and case.find("error") is None:
            continue
        module = case.get("classname", "").replace(".", "/")
        node = f"{module}.py::{case.get('name')}"
        inner = _cocotb_failures(basetemp, case.get("name", ""))
        if not inner:
            return node, ()
        return f"{node} > {inner[0]}", tuple(inner[1:])
    return None, ()


def _cocotb_failures(basetemp: Path, test_name: str) -> list[str]:
    """Names of the failed cocotb tests in the results.xml of pytest test `test_name`
    (its tmp_path is ``basetemp/<name, truncated and sanitised><n>``)."""
    stem = "".join(c if c.isalnum() or c == "_" else "_" for c in test_name)[:30]
    names: list[str] = []
    # pytest also links ``<name>current`` to the latest folder: each file once.
    for results in sorted({r.resolve() for r in basetemp.glob(f"{stem}*/**/results.xml")}):
        for case in ET.parse(results).getroot().iter("testcase"):
            if case.find("failure") is not None or case.find("error") is not None:
                names.append(case.get("name", "?"))  # in run order
    return names
