"""Figures of the compute engine (issue 10), measured in one run.

- simulation speed while the MAC array is busy (a 3x3 and a 1x1 convolution, 64 channels,
  16x16, each hand-compiled and compiler-made: bench/compute_cases.py), in the cocotb
  harness and in a minimal raw Verilator C++ loop on the same RTL, and their ratio;
- simulation speed with the engine idle: the clock alone (harness and raw loop), and
  register reads through the harness (what every register access of the device costs);
- MAC utilisation from the engine's counters (GEMM_CYCLES / RUN_CYCLES) and the golden
  model's cycle estimate for the same programs;
- time to build the verilated model from scratch, and with the cache warm.

Speeds are given per wall-clock second and per CPU second of the simulating process (the
latter holds still when other work shares the machine).

Medians over --repeat runs. Usage: python bench/bench_compute.py [--repeat 3] [--target buyi]

--valgrind adds instruction counts of the harness's simulator process (cachegrind, which
does not depend on the load): per idle cycle (a 100,000-cycle run less a 0-cycle one) and
per cycle of each 3x3 conv (its run less the 0-cycle one, over its simulated cycles).
--model DIR measures a model built before (a before/after pair) instead of this checkout's.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

from bench_dma import timed_build  # noqa: E402
from bench_regbus_sim import valgrind_ir  # noqa: E402
from compute_cases import Case, cases  # noqa: E402

from npuemu.sim.build import (  # noqa: E402
    DPI_SOURCES,
    RTL_DIR,
    VERILATOR_ARGS,
    BuiltModel,
    build_npu_sim,
    rtl_include_args,
    rtl_sources,
    verilator_env,
)
from npuemu.sim.cocotb_run import run_cocotb, simulator_env  # noqa: E402
from xrt.hw.targets import target  # noqa: E402
from xrt.npu import golden  # noqa: E402

RAW_IDLE_CYCLES = 1_000_000
GRIND_IDLE_CYCLES = 100_000
GRIND_CASES = ("conv3x3 64ch 16x16, hand-compiled", "conv3x3 64ch 16x16, compiler")


def build_raw(target_name: str, out_dir: Path) -> Path:
    """Build bench/raw_compute_main.cpp around npu_sim with plain Verilator (no VPI)."""
    cmd = [
        "verilator",
        "--cc",
        "--exe",
        "--build",
        "-j",
        "2",
        "-Mdir",
        str(out_dir),
        "--top-module",
        "npu_sim",
        f"-GTarget={target(target_name).id}",
        *VERILATOR_ARGS,
        *rtl_include_args(),
        str(RTL_DIR / "lint" / "npu.vlt"),
        *map(str, rtl_sources()),
        *map(str, DPI_SOURCES),
        str(REPO / "bench" / "raw_compute_main.cpp"),
    ]
    done = subprocess.run(cmd, env=verilator_env(), capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"the raw Verilator build failed (--no-raw skips it):\n{done.stderr[-3000:]}")
    return out_dir / "Vnpu_sim"


def golden_cycles(case: Case, cfg) -> int:
    mem = golden.Memory(cfg.memories)
    plddr = cfg.memory("plddr")
    for off, blob in case.images.items():
        mem.write(plddr.base + off, blob)
    res = golden.run(case.program, mem, {r: plddr.base + off for r, off in case.bases.items()})
    assert res.ok, res
    assert case.check(lambda off, k: mem.read(plddr.base + off, k)), case.name
    return res.cycles.total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--target", default="buyi")
    parser.add_argument("--no-cold-build", action="store_true", help="skip the scratch builds")
    parser.add_argument("--no-raw", action="store_true", help="skip the raw Verilator loop")
    parser.add_argument(
        "--raw-exe", type=Path, help="a raw loop built before from the same sources (no build)"
    )
    parser.add_argument("--model", type=Path, help="folder of a harness model built before")
    parser.add_argument("--valgrind", action="store_true", help="harness instruction counts")
    args = parser.parse_args()
    cfg = target(args.target)
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())

    with tempfile.TemporaryDirectory() as tmp, tempfile.TemporaryDirectory(dir="/dev/shm") as shm:
        tmp_path, shm_path = Path(tmp), Path(shm)
        cold = warm = []
        if not args.no_cold_build:
            print(f"building from scratch ({args.target}) ...", flush=True)
            cold = [timed_build_cpu(args.target, tmp_path / "cold")]
            warm = [timed_build_cpu(args.target, tmp_path / "cold") for _ in range(args.repeat)]
        model = (
            BuiltModel("npu_sim", args.model.resolve(), "given", False, 0.0)
            if args.model
            else build_npu_sim(args.target)
        )
        files = {m: shm_path / f"{m}.bin" for m in ("udma", "plddr")}
        for m, path in files.items():
            with path.open("wb") as f:
                f.truncate(cfg.memory(m).size)
        results = tmp_path / "results.jsonl"
        print("running the cocotb harness ...", flush=True)
        run_cocotb(
            model,
            "compute_cocotb",
            test_dir=tmp_path / "cocotb",
            plusargs=[f"+npu_mem_{m}={p}" for m, p in files.items()],
            extra_env={
                "NPU_TARGET": args.target,
                "BENCH_OUT": str(results),
                "BENCH_REPEAT": str(args.repeat),
                "NPU_MEM_PLDDR": str(files["plddr"]),
            },
        )
        rows = [json.loads(line) for line in results.read_text().splitlines()]
        grind = harness_instructions(model, args.target, files, tmp_path) if args.valgrind else {}
        grind_raw: dict[str, float] = {}
        idle_rows = [r for r in rows if r["case"].startswith("idle")]
        rows = [r for r in rows if not r["case"].startswith("idle")]
        raw: dict[str, list[dict[str, float]]] = {}
        all_cases = cases()
        plusargs = [f"+npu_mem_{m}={p}" for m, p in files.items()]
        if not args.no_raw:
            print("building and running the raw Verilator loop ...", flush=True)
            exe = args.raw_exe or build_raw(args.target, tmp_path / "raw")
            for row in rows:  # the memory files still hold the last case's data: rewrite each
                case = next(c for c in all_cases if c.name == row["case"])
                cmd = raw_case_command(exe, case, row, files, tmp_path)
                raw.setdefault(case.name, []).append(run_raw(cmd))
            for _ in range(args.repeat):
                idle_cmd = [str(exe), "--idle", str(RAW_IDLE_CYCLES), *plusargs]
                raw.setdefault("idle", []).append(run_raw(idle_cmd))
            if args.valgrind:
                grind_raw = raw_instructions(exe, rows, all_cases, files, tmp_path)

    print()
    print(f"target {args.target}, medians of {args.repeat} runs; load average {load}")
    print("speeds in Mcycles/s, wall clock (per CPU second of the simulating process)")
    for case in all_cases:
        mine = [r for r in rows if r["case"] == case.name]
        perf = mine[0]["perf"]
        util = perf["GEMM_CYCLES"] / perf["RUN_CYCLES"]
        est = golden_cycles(case, cfg)
        harness = rates(mine)
        print(
            f"{case.name}: {perf['RUN_CYCLES']} cycles, MAC utilisation {100 * util:.1f}% "
            f"(GEMM {perf['GEMM_CYCLES']}); golden model estimate {est} cycles "
            f"({100 * perf['GEMM_CYCLES'] / est:.1f}% utilisation by it)"
        )
        speed = f"  simulation speed: cocotb harness {fmt(harness)}"
        if case.name in raw:
            raw_rate = rates(raw[case.name])
            speed += (
                f", raw Verilator {fmt(raw_rate)}, raw / cocotb "
                f"{raw_rate[0] / harness[0]:.2f}x ({raw_rate[1] / harness[1]:.2f}x)"
            )
        print(speed)
    idle = [r for r in idle_rows if r["case"] == "idle"]
    regs = [r for r in idle_rows if r["case"] == "idle_regs"]
    idle_raw = f", raw Verilator {fmt(rates(raw['idle']))}" if "idle" in raw else ""
    print(
        f"engine idle: cocotb harness {fmt(rates(idle))}{idle_raw}; "
        f"during register reads (harness) {fmt(rates(regs))}"
    )
    if grind:
        print(
            f"instructions per simulated cycle, harness (valgrind): engine idle "
            f"{grind['idle']:,.0f}, waited on with wait_irq {grind['wait']:,.0f}; "
            + ", ".join(f"{name} busy {grind[name]:,.0f}" for name in GRIND_CASES)
        )
    if grind_raw:
        print(
            f"instructions per simulated cycle, raw loop (valgrind): engine idle "
            f"{grind_raw['idle']:,.0f}; "
            + ", ".join(f"{name} busy {grind_raw[name]:,.0f}" for name in GRIND_CASES)
        )
        print(
            "harness / raw by instructions: idle "
            f"{grind['idle'] / grind_raw['idle']:.3f}, "
            + ", ".join(f"{name} {grind[name] / grind_raw[name]:.3f}" for name in GRIND_CASES)
        )
    if cold:
        print(
            f"model build from scratch: {statistics.median(c[0] for c in cold):.1f} s "
            f"({statistics.median(c[1] for c in cold):.1f} CPU s); cache warm: "
            f"{statistics.median(w[0] for w in warm):.2f} s"
        )


def harness_instructions(
    model: BuiltModel,
    target_name: str,
    files: dict[str, Path],
    tmp: Path,
    cases: tuple[str, ...] = GRIND_CASES,
) -> dict[str, float]:
    """Instructions per simulated cycle in the harness's simulator process: idle, and each
    of GRIND_CASES; each the difference of two runs that differ only in the workload. The
    runs go in parallel (each with its own memory files): under valgrind each takes
    minutes of CPU, most of it Python starting up."""
    works = ("idle:0", f"idle:{GRIND_IDLE_CYCLES}", f"wait:{GRIND_IDLE_CYCLES}", *cases)

    def grind(index: int, work: str) -> tuple[int, int]:
        mems = {}
        for m, path in files.items():
            mems[m] = path.with_name(f"grind{index}-{m}.bin")
            with mems[m].open("wb") as f:
                f.truncate(path.stat().st_size)
        out = tmp / f"grind-{index}.jsonl"
        env = simulator_env(
            model,
            "compute_cocotb",
            tmp / f"grind-{index}.xml",
            {
                "NPU_TARGET": target_name,
                "BENCH_OUT": str(out),
                "BENCH_REPEAT": "1",
                "BENCH_ONLY": work,
                "NPU_MEM_PLDDR": str(mems["plddr"]),
                "PYTHONHASHSEED": "0",
                # One BLAS thread: idle worker threads spin, and valgrind counts that.
                "OPENBLAS_NUM_THREADS": "1",
                "OMP_NUM_THREADS": "1",
            },
        )
        plusargs = [f"+npu_mem_{m}={p}" for m, p in mems.items()]
        ir = valgrind_ir([str(model.executable), *plusargs], env, tmp)
        rows = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
        for path in mems.values():
            path.unlink()
        return ir, rows[0]["cycles"] if rows else 0

    print(f"  valgrind, harness: {', '.join(works)} in parallel ...", flush=True)
    with ThreadPoolExecutor(len(works)) as pool:
        done = dict(zip(works, pool.map(grind, range(len(works)), works), strict=True))
    base = done["idle:0"][0]
    result = {
        "idle": (done[f"idle:{GRIND_IDLE_CYCLES}"][0] - base) / GRIND_IDLE_CYCLES,
        "wait": (done[f"wait:{GRIND_IDLE_CYCLES}"][0] - base) / GRIND_IDLE_CYCLES,
    }
    for name in cases:
        result[name] = (done[name][0] - base) / done[name][1]
    return result


def raw_case_command(
    exe: Path, case: Case, row: dict, files: dict[str, Path], tmp: Path
) -> list[str]:
    """Load `case`'s memory images into the plddr file and write the launch writes the
    harness recorded (`row`) for the raw loop; returns the raw loop's command for it."""
    with files["plddr"].open("r+b") as f:
        for off, blob in case.images.items():
            f.seek(off)
            f.write(blob)
    writes = tmp / "writes.txt"
    writes.write_text("".join(f"{a} {v}\n" for a, v in row["launch"]))
    return [str(exe), str(writes), *(f"+npu_mem_{m}={p}" for m, p in files.items())]


def raw_instructions(
    exe: Path, rows: list[dict], all_cases: list[Case], files: dict[str, Path], tmp: Path
) -> dict[str, float]:
    """Instructions per simulated cycle in the raw loop, as `harness_instructions`: idle,
    and each of GRIND_CASES from START to the interrupt (its launch writes, about 60 cycles
    before START, are counted in with them)."""
    plusargs = [f"+npu_mem_{m}={p}" for m, p in files.items()]
    print("  valgrind, raw loop ...", flush=True)
    base = valgrind_ir([str(exe), "--idle", "0", *plusargs], dict(os.environ), tmp)
    idle_cmd = [str(exe), "--idle", str(GRIND_IDLE_CYCLES), *plusargs]
    result = {"idle": (valgrind_ir(idle_cmd, dict(os.environ), tmp) - base) / GRIND_IDLE_CYCLES}
    for name in GRIND_CASES:
        case = next(c for c in all_cases if c.name == name)
        row = next(r for r in rows if r["case"] == name)
        cmd = raw_case_command(exe, case, row, files, tmp)
        cycles = run_raw(cmd)["cycles"]
        result[name] = (valgrind_ir(cmd, dict(os.environ), tmp) - base) / cycles
    return result


def run_raw(cmd: list[str]) -> dict[str, float]:
    """Run the raw loop; its printed fields."""
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return {k: float(v) for k, v in (kv.split("=") for kv in out.split())}


def rates(runs: list[dict[str, float]]) -> tuple[float, float]:
    """Median cycles per wall second and per CPU second."""
    wall = statistics.median(r["cycles"] / r["seconds"] for r in runs)
    cpu = statistics.median(r["cycles"] / max(r["cpu_seconds"], 1e-9) for r in runs)
    return wall, cpu


def fmt(rate: tuple[float, float]) -> str:
    return f"{rate[0] / 1e6:.3f} ({rate[1] / 1e6:.3f})"


def timed_build_cpu(target_name: str, build_root: Path) -> tuple[float, float]:
    """(wall seconds, CPU seconds of all processes) of `build_npu_sim` in a fresh process
    with its cache in `build_root`: CPU seconds hold still on a shared machine."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = timed_build(target_name, build_root)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


if __name__ == "__main__":
    main()
