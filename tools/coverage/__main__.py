"""``make coverage``: run the tests that drive the RTL on coverage builds, merge, report.

    python -m tools.coverage                 # the default test set (DEFAULT_TESTS)
    python -m tools.coverage --all           # the whole suite
    python -m tools.coverage --tests tests/rtl/test_dma_block.py
    python -m tools.coverage --report-only   # merge and report the data already there

Every simulator process the tests start (cocotb block tests, ``npu_sim`` runs, a device
server's workers) runs a coverage build and leaves its ``.dat`` in ``build/coverage/dat``
(`npuemu.sim.coverage`); this merges them into ``merged.dat`` and writes the report
(`tools.coverage.report`: ``summary.json``, ``report.md``, lcov files, ``html/``,
``annotated/``). The exit status is pytest's (the report is written either way).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from tools.coverage.report import build_report

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "build" / "coverage"
WAIVERS = ROOT / "rtl" / "coverage_waivers.toml"
# The tests that drive the RTL: the block tests and the harness tests of tests/rtl, the
# device server's tests of the device itself, and the integration tests (gRPC device,
# networks on both NPU targets). The rest of the suite reaches the same RTL through the
# same paths, or none (runtime, compiler and golden-model tests).
DEFAULT_TESTS = (
    "tests/rtl",
    "tests/emulator/test_server.py",
    "tests/integration",
)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m tools.coverage", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--tests", nargs="+", default=list(DEFAULT_TESTS), help="pytest paths")
    ap.add_argument("--all", action="store_true", help="run the whole suite")
    ap.add_argument("--report-only", action="store_true", help="merge the .dat files already there")
    ap.add_argument("--out", type=Path, default=OUT, help=f"output folder ({OUT})")
    ap.add_argument("--pytest-args", default="", help="more pytest arguments (one string)")
    args = ap.parse_args(argv)
    out: Path = args.out.resolve()
    dat = out / "dat"
    meta: dict[str, object] = {"generated": time.strftime("%Y-%m-%d %H:%M:%S %Z")}
    rc = 0
    if not args.report_only:
        for old in dat.glob("*.dat"):
            old.unlink()
        dat.mkdir(parents=True, exist_ok=True)
        tests = ["tests"] if args.all else args.tests
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests,
               *args.pytest_args.split()]  # fmt: skip
        env = {**os.environ, "NPU_EMU_COVERAGE": str(dat)}
        print(f"coverage run: {' '.join(cmd)}  (NPU_EMU_COVERAGE={dat})", flush=True)
        start = time.monotonic()
        load_before = os.getloadavg()
        rc = subprocess.run(cmd, cwd=ROOT, env=env, check=False).returncode
        meta.update(
            {
                "tests": "tests: " + " ".join(tests),
                "pytest_exit": rc,
                "seconds": round(time.monotonic() - start, 1),
                "loadavg_before": [round(x, 2) for x in load_before],
                "loadavg_after": [round(x, 2) for x in os.getloadavg()],
            }
        )
    dat_files = sorted(dat.glob("*.dat"))
    if not dat_files:
        print(f"no coverage data in {dat}", file=sys.stderr)
        return rc or 1
    summary = build_report(dat_files, out, ROOT, WAIVERS, meta)
    print(f"coverage report: {out / 'report.md'}; summary: {out / 'summary.json'}")
    for folder, figs in summary.items():
        if folder.startswith("rtl/") or folder == "total":
            kinds = "  ".join(f"{k} {figs[k]}" for k in ("line", "branch", "toggle"))
            print(f"  {folder:<16} {kinds}")
    fn = summary["functional"]
    print(f"  functional bins: {fn['hit']} of {fn['bins']} hit")
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
