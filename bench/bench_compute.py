"""Figures of the compute engine (issue 10), measured in one run.

- simulation speed while the MAC array is busy (a 3x3 and a 1x1 convolution, 64 channels,
  16x16, each hand-compiled and compiler-made: bench/compute_cases.py), in the cocotb
  harness and in a minimal raw Verilator C++ loop on the same RTL, and their ratio;
- MAC utilisation from the engine's counters (GEMM_CYCLES / RUN_CYCLES) and the golden
  model's cycle estimate for the same programs;
- time to build the verilated model from scratch, and with the cache warm.

Medians over --repeat runs. Usage: python bench/bench_compute.py [--repeat 3] [--target buyi]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

from bench_dma import timed_build  # noqa: E402
from compute_cases import Case, cases  # noqa: E402

from npuemu.sim.build import RTL_DIR, VERILATOR_ARGS, build_npu_sim, rtl_sources, verilator_env  # noqa: E402
from npuemu.sim.cocotb_run import run_cocotb  # noqa: E402
from xrt.hwconfig import target  # noqa: E402
from xrt.npu import golden  # noqa: E402


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
        str(RTL_DIR / "lint" / "npu.vlt"),
        *map(str, rtl_sources()),
        str(RTL_DIR / "mem" / "npu_mem_dpi.cpp"),
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
    args = parser.parse_args()
    cfg = target(args.target)

    with tempfile.TemporaryDirectory() as tmp, tempfile.TemporaryDirectory(dir="/dev/shm") as shm:
        tmp_path, shm_path = Path(tmp), Path(shm)
        cold = warm = []
        if not args.no_cold_build:
            print(f"building from scratch ({args.target}) ...", flush=True)
            cold = [timed_build(args.target, tmp_path / "cold")]
            warm = [timed_build(args.target, tmp_path / "cold") for _ in range(args.repeat)]
        model = build_npu_sim(args.target)
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
        raw: dict[str, list[float]] = {}
        all_cases = cases()
        if not args.no_raw:
            print("building and running the raw Verilator loop ...", flush=True)
            exe = build_raw(args.target, tmp_path / "raw")
        for row in (
            [] if args.no_raw else rows
        ):  # the memory files still hold the last case's data: rewrite each
            case = next(c for c in all_cases if c.name == row["case"])
            with files["plddr"].open("r+b") as f:
                for off, blob in case.images.items():
                    f.seek(off)
                    f.write(blob)
            writes = tmp_path / "writes.txt"
            writes.write_text("".join(f"{a} {v}\n" for a, v in row["launch"]))
            out = subprocess.run(
                [str(exe), str(writes), *(f"+npu_mem_{m}={p}" for m, p in files.items())],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            fields = dict(kv.split("=") for kv in out.split())
            raw.setdefault(case.name, []).append(float(fields["cycles_per_second"]))

    print()
    print(f"target {args.target}, medians of {args.repeat} runs")
    for case in all_cases:
        mine = [r for r in rows if r["case"] == case.name]
        cps = statistics.median(r["cycles"] / r["seconds"] for r in mine)
        perf = mine[0]["perf"]
        util = perf["GEMM_CYCLES"] / perf["RUN_CYCLES"]
        est = golden_cycles(case, cfg)
        print(
            f"{case.name}: {perf['RUN_CYCLES']} cycles, MAC utilisation {100 * util:.1f}% "
            f"(GEMM {perf['GEMM_CYCLES']}); golden model estimate {est} cycles "
            f"({100 * perf['GEMM_CYCLES'] / est:.1f}% utilisation by it)"
        )
        speed = f"  simulation speed: cocotb harness {cps / 1e6:.3f} Mcycles/s"
        if case.name in raw:
            raw_cps = statistics.median(raw[case.name])
            speed += (
                f", raw Verilator {raw_cps / 1e6:.3f} Mcycles/s, raw / cocotb {raw_cps / cps:.2f}x"
            )
        print(speed)
    if cold:
        print(
            f"model build from scratch: {statistics.median(cold):.1f} s; cache warm: "
            f"{statistics.median(warm):.2f} s"
        )


if __name__ == "__main__":
    main()
