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

The "pgo" variant is gcc's profile-guided optimisation: a model built with
-fprofile-generate runs a profile workload (the 1x1 compiler-made convolution and the
engine idle: not the 3x3 programs measured), then the measured model is compiled with that
profile.

Usage: python bench/bench_rtl_speed.py [--targets buyi,zg330] [--rounds 3]
       [--variants baseline,default,...] [--build-dir build/rtl-speed] [--json FILE]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

from bench_assert import run_round  # noqa: E402

from npuemu.sim.build import BuiltModel, build_npu_sim  # noqa: E402
from npuemu.sim.codegen import BASELINE, DEFAULT, NATIVE, CodeGen  # noqa: E402

PROFILE_CASE = "conv1x1 64ch 16x16, compiler"
BUSY = ("conv3x3 64ch 16x16, hand-compiled", "conv3x3 64ch 16x16, compiler")

CANDIDATES = {
    "baseline": BASELINE,
    "default": DEFAULT,
    "native": CodeGen("native", verilator_args=("-CFLAGS", NATIVE)),
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
    "pgo": replace(DEFAULT, name="pgo"),  # built in two steps: pgo_model
}


def profile_digest(folder: Path) -> str:
    """Digest of a profile folder's .gcda files (the `use` build's cache key)."""
    h = hashlib.sha256()
    for path in sorted(folder.rglob("*.gcda")):
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def pgo_model(base: CodeGen, target_name: str, root: Path, tmp: Path) -> tuple[BuiltModel, float]:
    """The model compiled with a profile of `base` (built and run first); (model, seconds
    of the whole: instrumented build, profile run, final build)."""
    profiles = root / f"profile-{target_name}-{base.name}"
    gen = replace(base, name=f"{base.name}-gen", pgo="generate", profile_dir=str(profiles))
    instrumented = build_npu_sim(target_name, assertions=False, codegen=gen, build_root=root)
    spent = instrumented.seconds
    if not any(profiles.rglob("*.gcda")):
        print(f"  profile run of {instrumented.build_dir.name} ({PROFILE_CASE}) ...", flush=True)
        os.environ["BENCH_ONLY"] = PROFILE_CASE
        try:
            run_round(instrumented, target_name, tmp, f"profile-{target_name}")
        finally:
            del os.environ["BENCH_ONLY"]
        gcda = list(profiles.rglob("*.gcda"))
        if not gcda:
            raise SystemExit(f"the profile run wrote no .gcda file under {profiles}")
        print(f"  {len(gcda)} profile files", flush=True)
    use = replace(
        base,
        name=f"{base.name}-pgo",
        pgo="use",
        profile_dir=str(profiles),
        profile_digest=profile_digest(profiles),
    )
    model = build_npu_sim(target_name, assertions=False, codegen=use, build_root=root)
    return model, spent + model.seconds


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
            built: dict[str, float] = {}
            for name in names:  # one build at a time (make -j uses every core)
                print(f"{tname}: building (or reusing) {name} ...", flush=True)
                if name == "pgo":
                    model, seconds = pgo_model(DEFAULT, tname, root, tmp)
                else:
                    model = build_npu_sim(
                        tname, assertions=False, codegen=CANDIDATES[name], build_root=root
                    )
                    seconds = model.seconds
                models[name] = model
                if model.built_now:
                    built[name] = seconds
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
    built: dict[str, float],
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
        build = f"built in {built[name]:.0f} s" if name in built else "cached"
        print(f"  {name:10s} MAC busy gain {100 * gain:+5.1f}%  [{build}]  {cells}")
        out["variants"][name] = {
            "busy_gain": gain,
            "build_s": built.get(name),
            "rates": {c: {"wall": w, "cpu": p} for c, (w, p) in rate[name].items()},
        }
    return out


if __name__ == "__main__":
    main()
