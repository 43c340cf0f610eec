"""The simulation speed cost of the RTL's assertions (issue 44), measured in one run.

Two `npu_sim` models of the same sources, as the harness runs them: one built with
``--assert`` (what tests and serving use) and one without. Each runs bench/compute_cocotb.py
(the engine idle, register reads, and each convolution of bench/compute_cases.py), the two
alternating round by round so that both see the same load. Speeds are medians over the
rounds, per wall-clock second and per CPU second of the simulating process (the latter holds
still when other work shares the machine); the cost is 1 - with / without.

Usage: python bench/bench_assert.py [--rounds 3] [--target buyi]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

from npuemu.sim.build import BuiltModel, build_npu_sim  # noqa: E402
from npuemu.sim.cocotb_run import run_cocotb  # noqa: E402
from xrt.hw.targets import target  # noqa: E402


def run_round(model: BuiltModel, target_name: str, tmp: Path, tag: str) -> list[dict]:
    """One run of compute_cocotb in `model` (fresh memory files); its rows."""
    cfg = target(target_name)
    files = {m: tmp / f"{tag}-{m}.bin" for m in ("udma", "plddr")}
    for m, path in files.items():
        with path.open("wb") as f:
            f.truncate(cfg.memory(m).size)
    out = tmp / f"{tag}.jsonl"
    run_cocotb(
        model,
        "compute_cocotb",
        test_dir=tmp / tag,
        plusargs=[f"+npu_mem_{m}={p}" for m, p in files.items()],
        extra_env={
            "NPU_TARGET": target_name,
            "BENCH_OUT": str(out),
            "BENCH_REPEAT": "1",
            "NPU_MEM_PLDDR": str(files["plddr"]),
        },
    )
    for path in files.values():
        path.unlink()
    return [json.loads(line) for line in out.read_text().splitlines()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--target", default="buyi")
    args = parser.parse_args()
    print("building (or reusing) both models ...", flush=True)
    models = {
        "with --assert": build_npu_sim(args.target, assertions=True),
        "without": build_npu_sim(args.target, assertions=False),
    }
    load_before = os.getloadavg()
    rows: dict[str, list[dict]] = {k: [] for k in models}
    shm = "/dev/shm" if Path("/dev/shm").is_dir() else None
    with tempfile.TemporaryDirectory(dir=shm) as tmp:
        for i in range(args.rounds):
            for name, model in models.items():  # alternating: both see the same load
                print(f"round {i + 1}: {name} ...", flush=True)
                rows[name] += run_round(model, args.target, Path(tmp), f"r{i}-{name[:4]}")
    load_after = os.getloadavg()

    cases = list(dict.fromkeys(r["case"] for r in rows["without"]))
    print()
    print(
        f"target {args.target}, medians of {args.rounds} alternating rounds; load average "
        f"{load_before[0]:.2f} before, {load_after[0]:.2f} after "
        f"(1/5/15 min after: {' '.join(f'{x:.2f}' for x in load_after)})"
    )
    print("Mcycles/s wall clock (per CPU second of the simulator); cost = 1 - with / without")
    worst = 0.0
    for case in cases:
        rate = {}
        for name in models:
            mine = [r for r in rows[name] if r["case"] == case]
            wall = statistics.median(r["cycles"] / r["seconds"] for r in mine)
            cpu = statistics.median(r["cycles"] / max(r["cpu_seconds"], 1e-9) for r in mine)
            rate[name] = (wall, cpu)
        (w_a, c_a), (w_n, c_n) = rate["with --assert"], rate["without"]
        cost = 1 - c_a / c_n
        worst = max(worst, cost)
        print(
            f"{case}: with --assert {w_a / 1e6:.3f} ({c_a / 1e6:.3f}), without "
            f"{w_n / 1e6:.3f} ({c_n / 1e6:.3f}); cost {100 * (1 - w_a / w_n):.1f}% wall, "
            f"{100 * cost:.1f}% CPU"
        )
    print(f"largest cost by CPU time: {100 * worst:.1f}%")


if __name__ == "__main__":
    main()
