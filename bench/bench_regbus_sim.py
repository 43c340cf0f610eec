"""What a register access costs inside the simulator, without the server around it.

    .venv/bin/python bench/bench_regbus_sim.py [--repeat 20] [--valgrind] [--target buyi]

In one run, on the same RTL:

- the cocotb harness (bench/regbus_cocotb.py, the worker's own code path: `run_rows`):
  wall and CPU time per op of batches of 1, 64 and 1024 reads, and of 3072 idle cycles
  (`run_cycles`), interleaved so that all see the same load; the simulated cycles per
  read;
- the raw Verilator loop (bench/raw_sim_main.cpp `regbus` mode, no VPI, no Python): the
  same reads through the same register bus master and its DPI-C queue, and idle cycles;
- with --valgrind, instruction counts (load-independent, unlike times on this shared
  machine): per read and per batch in the harness, per idle cycle, and per read and per
  idle cycle in the raw loop. Each is the difference of two runs that differ only in the
  workload (PYTHONHASHSEED fixed), so start-up costs cancel out.

NPU_EMU_RTL_DIR=another/rtl measures another copy of the RTL (a before/after pair).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

from bench_dma import build_raw  # noqa: E402

from npuemu.sim.build import build_npu_sim  # noqa: E402
from npuemu.sim.cocotb_run import run_cocotb, simulator_env  # noqa: E402
from xrt.hw.regs import NPU  # noqa: E402
from xrt.hw.targets import target  # noqa: E402

# Instruction-count workloads: 4096 reads in 4 batches and in 64, and idle cycles.
GRIND_BASE, GRIND_BIG, GRIND_SMALL, GRIND_IDLE = "0x0", "1024x4", "64x64", "idle:12288"


def memories(cfg, shm: Path) -> list[str]:
    for mem in ("udma", "plddr"):
        with open(shm / f"{mem}.bin", "wb") as f:
            f.truncate(cfg.memory(mem).size)
    return [f"+npu_mem_{m}={shm / (m + '.bin')}" for m in ("udma", "plddr")]


def harness_times(model, cfg, name: str, plusargs: list[str], tmp: Path, repeat: int) -> dict:
    out = tmp / "harness.jsonl"
    run_cocotb(
        model,
        "regbus_cocotb",
        test_dir=tmp / "cocotb",
        plusargs=plusargs,
        extra_env={"NPU_TARGET": name, "BENCH_OUT": str(out), "BENCH_REPEAT": str(repeat)},
    )
    rows: dict[str, list[dict]] = defaultdict(list)
    for line in out.read_text().splitlines():
        r = json.loads(line)
        rows[r["case"]].append(r)
    return rows


VALGRIND = ("valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null")


def valgrind_ir(cmd: list[str], env: dict[str, str], cwd: Path) -> int:
    out = subprocess.run(
        [*VALGRIND, *cmd],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    )
    return int(re.search(r"I\s+refs:\s+([\d,]+)", out.stderr).group(1).replace(",", ""))


def harness_instructions(model, name: str, plusargs: list[str], tmp: Path) -> dict[str, float]:
    """Instructions per read, per batch and per idle cycle in the harness (four runs)."""
    ir = {}
    for work in (GRIND_BASE, GRIND_BIG, GRIND_SMALL, GRIND_IDLE):
        env = simulator_env(
            model,
            "regbus_cocotb",
            tmp / "grind.xml",
            {"NPU_TARGET": name, "BENCH_ONLY": work, "PYTHONHASHSEED": "0"},
        )
        print(f"  valgrind, harness, {work} ...", flush=True)
        ir[work] = valgrind_ir([str(model.executable), *plusargs], env, tmp)
    per_batch = (ir[GRIND_SMALL] - ir[GRIND_BIG]) / 60  # 64 batches against 4
    per_read = (ir[GRIND_BIG] - ir[GRIND_BASE] - 4 * per_batch) / 4096
    per_idle = (ir[GRIND_IDLE] - ir[GRIND_BASE]) / int(GRIND_IDLE.split(":")[1])
    return {"read": per_read, "batch": per_batch, "idle_cycle": per_idle}


def raw_instructions(exe: Path, addr: int, plusargs: list[str], tmp: Path) -> dict[str, float]:
    """Instructions per read (batches of 1024) and per idle cycle in the raw loop."""

    def ir(batches: int, idle: int) -> int:
        cmd = [str(exe), "regbus", str(addr), "1024", str(batches), str(idle), *plusargs]
        return valgrind_ir(cmd, dict(os.environ), tmp)

    print("  valgrind, raw loop ...", flush=True)
    base, reads, idle = ir(0, 0), ir(4, 0), ir(0, 12288)
    return {"read": (reads - base) / 4096, "idle_cycle": (idle - base) / 12288}


def run_raw(exe: Path, addr: int, plusargs: list[str]) -> dict[str, float]:
    cmd = [str(exe), "regbus", str(addr), "1024", "20", str(3 * 1024 * 20), *plusargs]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return {k: float(v) for k, v in (kv.split("=") for kv in out.split())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20, help="rounds of the harness cases")
    parser.add_argument("--target", default="buyi")
    parser.add_argument("--valgrind", action="store_true", help="count instructions too")
    args = parser.parse_args()
    cfg = target(args.target)
    addr = cfg.npu_base + NPU.register("SCRATCH").offset
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as t, tempfile.TemporaryDirectory(dir="/dev/shm") as s:
        tmp, shm = Path(t), Path(s)
        plusargs = memories(cfg, shm)
        model = build_npu_sim(args.target)
        print("building the raw Verilator loop ...", flush=True)
        exe = build_raw(args.target, tmp / "raw")
        print("running the harness and the raw loop ...", flush=True)
        rows = harness_times(model, cfg, args.target, plusargs, tmp, args.repeat)
        raw = [run_raw(exe, addr, plusargs) for _ in range(3)]
        grind = None
        if args.valgrind:
            grind = (
                harness_instructions(model, args.target, plusargs, tmp),
                raw_instructions(exe, addr, plusargs, tmp),
            )
    load_after = os.getloadavg()

    def med(case: str, key: str) -> float:
        return statistics.median(r[key] for r in rows[case])

    us = 1e6
    print(f"\nRTL: {os.environ.get('NPU_EMU_RTL_DIR') or 'this checkout'}; target {args.target}")
    print(
        f"load average (1, 5, 15 min): before {' '.join(f'{x:.1f}' for x in load_before)}, "
        f"after {' '.join(f'{x:.1f}' for x in load_after)} ({os.cpu_count()} cores)"
    )
    print(f"harness, medians of {args.repeat} interleaved rounds:")
    for case in ("batch1", "batch64", "batch1024"):
        n = rows[case][0]["ops"]
        print(
            f"  batch of {n:4d} reads: per op {med(case, 'wall') / n * us:7.2f} us wall, "
            f"{med(case, 'cpu') / n * us:7.2f} us CPU; "
            f"{med(case, 'cycles') / n:.2f} cycles per read"
        )
    idle_cycles = med("idle", "cycles")
    print(
        f"  idle: {idle_cycles / med('idle', 'wall') / 1e3:.0f} kcycles/s wall, "
        f"{idle_cycles / med('idle', 'cpu') / 1e3:.0f} kcycles/s CPU; a 1024-read batch: "
        f"{med('batch1024', 'cycles') / med('batch1024', 'cpu') / 1e3:.0f} kcycles/s CPU"
    )
    r_read = statistics.median(r["cpu_seconds"] / r["reads"] for r in raw)
    r_idle = statistics.median(r["idle_cycles"] / r["idle_cpu_seconds"] for r in raw)
    r_cyc = statistics.median(r["cycles"] / r["reads"] for r in raw)
    print(
        f"raw Verilator loop, median of 3, CPU time: per read {r_read * us:.2f} us "
        f"({r_cyc:.2f} cycles); idle {r_idle / 1e3:.0f} kcycles/s"
    )
    print(
        f"harness / raw, per read in batches of 1024 (CPU): "
        f"{med('batch1024', 'cpu') / 1024 / r_read:.2f}x"
    )
    if grind:
        h, r = grind
        print("instructions (valgrind):")
        print(
            f"  harness: {h['read']:,.0f} per read, {h['batch']:,.0f} per batch beyond its "
            f"reads, {h['idle_cycle']:,.0f} per idle cycle"
        )
        print(f"  raw loop: {r['read']:,.0f} per read, {r['idle_cycle']:,.0f} per idle cycle")


if __name__ == "__main__":
    main()
