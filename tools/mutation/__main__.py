"""``make mutation``: apply each mutant of ``mutants.toml`` to a copy of the RTL, build the
models from the copy, run the mutant's tests; every mutant must be killed.

    python -m tools.mutation                  # all mutants, each on its own test selection
    python -m tools.mutation --only dma-4k-split requant-truncates
    python -m tools.mutation --full           # each mutant on the whole sim-marked suite
    python -m tools.mutation --check          # only check the mutants file (no simulation)

First the file is checked (each snippet exactly once in its file: a stale mutant is an error
naming it), then the unmutated selection must pass (the baseline), then the mutants run one
at a time. Tracked files are never edited: each mutant gets a copy of rtl/ under
``build/mutation/work`` and a model cache of its own (``NPU_EMU_RTL_DIR``,
``NPU_EMU_BUILD_DIR``), removed after its run. The report is ``build/mutation/report.md`` and
``summary.json``; the exit status is 0 only when the baseline passed and every mutant was
killed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

from tools.mutation.mutants import MUTANTS_FILE, Mutant, MutantFileError, apply_mutant, load_mutants
from tools.mutation.report import Outcome, write_report
from tools.mutation.runner import run_selection

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "build" / "mutation"
FULL_SUITE = ("-m", "sim", "tests")  # --full: every test that drives a simulator


def run_mutant(
    m: Mutant, root: Path, work: Path, *, full: bool = False, timeout: float = 900.0
) -> Outcome:
    """Run one mutant: copy and mutate rtl/, build from the copy, run its tests.

    Killed means a test failed (or the run hung past `timeout`); the copy and its models
    are removed afterwards.
    """
    mdir = work / m.id
    try:
        rtl = apply_mutant(m, root / "rtl", mdir / "rtl")
        tests = list(FULL_SUITE) if full else list(m.tests)
        res = run_selection(
            root, tests, mdir / "run", rtl_dir=rtl, build_dir=mdir / "sim", env=m.env,
            timeout=timeout,
        )  # fmt: skip
    finally:
        shutil.rmtree(mdir / "rtl", ignore_errors=True)
        shutil.rmtree(mdir / "sim", ignore_errors=True)
    return Outcome(
        m, not res.passed, res.failed_test, res.seconds, res.timed_out, res.also_failed,
        res.assertion,
    )  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m tools.mutation", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--mutants", type=Path, default=MUTANTS_FILE, help="the mutants file")
    ap.add_argument("--only", nargs="+", metavar="ID", help="run only these mutants")
    ap.add_argument("--full", action="store_true", help="run the whole sim-marked suite per mutant")
    ap.add_argument("--check", action="store_true", help="only check the mutants file")
    ap.add_argument("--no-baseline", action="store_true", help="skip the unmutated run")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per run (a hang)")
    ap.add_argument("--out", type=Path, default=OUT, help=f"output folder ({OUT})")
    args = ap.parse_args(argv)
    try:
        mutants = load_mutants(args.mutants, ROOT)
    except MutantFileError as exc:
        print(f"mutation: {exc}", file=sys.stderr)
        return 2
    if args.only:
        unknown = set(args.only) - {m.id for m in mutants}
        if unknown:
            print(f"mutation: no mutant named {', '.join(sorted(unknown))}", file=sys.stderr)
            return 2
        mutants = [m for m in mutants if m.id in args.only]
    print(f"{len(mutants)} mutants, every snippet found once")
    if args.check:
        return 0

    out: Path = args.out.resolve()
    work = out / "work"
    start = time.monotonic()
    meta: dict[str, object] = {
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
        "load average at start": _loadavg(),
        "selection": "the whole sim-marked suite per mutant" if args.full else "per mutant",
    }
    if not args.no_baseline:
        tests = list(FULL_SUITE) if args.full else sorted({t for m in mutants for t in m.tests})
        print(f"baseline: {' '.join(tests)}", flush=True)
        base = run_selection(ROOT, tests, work / "baseline", timeout=args.timeout, stop_first=False)
        meta["baseline"] = f"{' '.join(tests)}: passed in {base.seconds:.0f} s"
        if not base.passed:
            print(f"mutation: the unmutated tests fail ({base.failed_test}); log: {base.log}",
                  file=sys.stderr)  # fmt: skip
            return 1
    outcomes: list[Outcome] = []
    for i, m in enumerate(mutants, 1):
        o = run_mutant(m, ROOT, work, full=args.full, timeout=args.timeout)
        outcomes.append(o)
        verdict = f"killed by {o.killed_by}" if o.killed else "SURVIVED"
        if o.also_failed:
            verdict += f" (also: {', '.join(o.also_failed)})"
        if o.assertion:
            verdict += f"; assertion first: {o.assertion}"
        print(f"[{i}/{len(mutants)}] {m.id}: {verdict} ({o.seconds:.0f} s)", flush=True)
    meta["load average at end"] = _loadavg()
    meta["total run time"] = f"{time.monotonic() - start:.0f} s"
    md, js = write_report(out, outcomes, meta)
    survived = [o.mutant.id for o in outcomes if not o.killed]
    print(f"{len(outcomes) - len(survived)} of {len(outcomes)} killed; report: {md}, {js}")
    return 1 if survived else 0


def _loadavg() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


if __name__ == "__main__":
    sys.exit(main())
