"""RTL simulation speed per build variant (issue 42), compared in one run.

Each variant is one `npuemu.sim.codegen.CodeGen` (Verilator and compiler options): the
baseline (the flags before issue 42), the default models are built with now, and
candidates. Each builds the `npu_sim` harness model without assertions (as the issue
compares them) into a folder of its own under --build-dir, then runs
bench/compute_cocotb.py: convolutions with the MAC array busy (bench/compute_cases.py),
outputs checked against the host. The variants alternate round by round so all see the
same load. Figures are medians over the rounds, in simulated cycles per wall-clock second
and per CPU second of the simulator (the latter holds still when other work shares the
machine); the gain is against the baseline. A variant's cold build time is printed when
this run built it (an empty --build-dir measures them all).

The "pgo" variant is the default compiled with gcc's profile-guided optimisation as
npuemu.sim.pgo takes it: a model built with -fprofile-generate runs
npuemu.sim.pgo_workload (its own convolutions, not these programs), then the measured model
is compiled with that profile.

Usage: python bench/bench_rtl_speed.py [--targets buyi,zg330] [--rounds 3]
       [--variants baseline,default,...] [--build-dir build/rtl-speed] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

from bench_assert import run_round  # noqa: E402

from npuemu.sim.build import BuiltModel, build_npu_sim  # noqa: E402
from npuemu.sim.codegen import BASELINE, DEFAULT, NATIVE, CodeGen  # noqa: E402
from npuemu.sim.pgo import take_profile  # noqa: E402

BUSY = ("conv3x3 64ch 16x16, hand-compiled", "conv3x3 64ch 16x16, compiler")

CANDIDATES = {
    "baseline": BASELINE,
    "default": DEFAULT,
    # The default without a profile, even when npuemu.sim.pgo took one.
    "native": CodeGen("native", verilator_args=("-CFLAGS", NATIVE), use_profile=False),
    "noplt": CodeGen(
        "noplt",
        verilator_args=(
            "-CFLAGS",
            NATIVE,
            "-CFLAGS",
            "-fno-plt",
            "-CFLAGS",
            "-fno-semantic-interposition",
        ),
    ),
    "global-O2": CodeGen("global-O2", verilator_args=("-CFLAGS", NATIVE), opt_global="-O2"),
    "groups": CodeGen("groups", verilator_args=("-CFLAGS", NATIVE, "--output-groups", "4")),
    "split": CodeGen(
        "split",
        verilator_args=("-CFLAGS", NATIVE, "--output-split-cfuncs", "2000"),
    ),
    "inline": CodeGen("inline", verilator_args=("-CFLAGS", NATIVE, "--inline-mult", "20000")),
    "pgo": DEFAULT,  # compiled with a profile: npuemu.sim.pgo
}


def _children_cpu() -> float:
    """CPU seconds of every finished child process so far (Verilator, make, g++)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", default="buyi,zg330")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--variants", default="baseline,default")
    parser.add_argument("--build-dir", type=Path, default=REPO / "build" / "rtl-speed")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    names = args.variants.split(",")
    unknown = [n for n in names if n not in CANDIDATES]
    if unknown:
        parser.error(f"unknown variants {unknown}: known {sorted(CANDIDATES)}")
    targets = args.targets.split(",")
    root = args.build_dir.resolve()
    print(f"models in {root}; variants {', '.join(names)}", flush=True)
    results: dict = {"build_dir": str(root), "targets": {}}
    shm = "/dev/shm" if Path("/dev/shm").is_dir() else None
    with tempfile.TemporaryDirectory(dir=shm) as tmp_name:
        tmp = Path(tmp_name)
        for tname in targets:
            models: dict[str, BuiltModel] = {}
            built: dict[str, tuple[float, float]] = {}
            for name in names:  # one build at a time (make -j uses every core)
                print(f"{tname}: building (or reusing) {name} ...", flush=True)
                cpu0, t0 = _children_cpu(), time.monotonic()
                if name == "pgo":  # the instrumented build, its run, the final build
                    model = take_profile(tname, assertions=False, build_root=root)
                    seconds = time.monotonic() - t0
                else:
                    model = build_npu_sim(
                        tname, assertions=False, codegen=CANDIDATES[name], build_root=root
                    )
                    seconds = model.seconds
                models[name] = model
                if model.built_now:  # the compilers' CPU time holds still under load
                    built[name] = (seconds, _children_cpu() - cpu0)
            load_before = os.getloadavg()
            rows: dict[str, list[dict]] = {n: [] for n in names}
            for i in range(args.rounds):
                for name, model in models.items():
                    print(f"{tname} round {i + 1}: {name} ...", flush=True)
                    rows[name] += run_round(model, tname, tmp, f"{tname}-r{i}-{name}")
            load_after = os.getloadavg()
            results["targets"][tname] = report(tname, names, rows, built, load_before, load_after)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")


def report(
    tname: str,
    names: list[str],
    rows: dict[str, list[dict]],
    built: dict[str, tuple[float, float]],
    load_before: tuple[float, float, float],
    load_after: tuple[float, float, float],
) -> dict:
    """Print one target's table; its figures."""
    cases = list(dict.fromkeys(r["case"] for r in rows[names[0]]))
    out: dict = {"load": [load_before[0], *load_after], "variants": {}}
    print()
    print(
        f"{tname}: medians of {len(rows[names[0]]) // max(len(cases), 1)} alternating rounds; "
        f"load average {load_before[0]:.2f} before, after (1/5/15 min) "
        f"{' '.join(f'{x:.2f}' for x in load_after)}"
    )
    print("Mcycles/s per CPU second of the simulator (wall clock); gain against the baseline")
    base = names[0]
    rate: dict[str, dict[str, tuple[float, float]]] = {}
    for name in names:
        rate[name] = {}
        for case in cases:
            mine = [r for r in rows[name] if r["case"] == case]
            wall = statistics.median(r["cycles"] / r["seconds"] for r in mine)
            cpu = statistics.median(r["cycles"] / max(r["cpu_seconds"], 1e-9) for r in mine)
            rate[name][case] = (wall, cpu)
    for name in names:
        busy = [c for c in cases if c in BUSY]
        gains = [rate[name][c][1] / rate[base][c][1] - 1 for c in busy]
        cells = ", ".join(
            f"{c.split(' 64ch')[0]}{' hand' if 'hand' in c else ''}"
            f"{' comp' if 'compiler' in c else ''} "
            f"{rate[name][c][1] / 1e6:.3f} ({rate[name][c][0] / 1e6:.3f})"
            for c in cases
        )
        gain = statistics.mean(gains) if gains else 0.0
        build = (
            f"built in {built[name][0]:.0f} s, {built[name][1]:.0f} CPU s"
            if name in built
            else "cached"
        )
        print(f"  {name:10s} MAC busy gain {100 * gain:+5.1f}%  [{build}]  {cells}")
        out["variants"][name] = {
            "busy_gain": gain,
            "build_s": built.get(name),  # (wall, CPU) when built in this run
            "rates": {c: {"wall": w, "cpu": p} for c, (w, p) in rate[name].items()},
        }
    return out


if __name__ == "__main__":
    main()
