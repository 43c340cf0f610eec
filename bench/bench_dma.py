"""Figures of the simulated NPU's DMA path (issue 2), measured in one run.

- DMA throughput in simulated bytes per cycle (1 MiB copy udma -> plddr, no backpressure);
- simulation speed in cycles per wall second while the DMA runs, in the cocotb harness and
  in a minimal raw Verilator C++ loop on the same RTL, and their ratio;
- time to build the verilated model from scratch, and with the cache warm.

Medians over --repeat runs. Usage: python bench/bench_dma.py [--repeat 3] [--target buyi]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

from npuemu.sim.build import (  # noqa: E402
    DPI_SOURCES,
    RTL_DIR,
    VERILATOR_ARGS,
    build_npu_sim,
    rtl_include_args,
    rtl_sources,
    verilator_env,
)
from npuemu.sim.cocotb_run import run_cocotb  # noqa: E402
from xrt.hw.regs import DMA  # noqa: E402
from xrt.hw.targets import DMA as DMA_CFG  # noqa: E402
from xrt.hw.targets import target  # noqa: E402


def timed_build(target_name: str, build_root: Path) -> float:
    """Seconds for `build_model` in a fresh process with its cache in `build_root`."""
    code = (
        "import time; from npuemu.sim.build import build_npu_sim; t=time.perf_counter();"
        f"build_npu_sim('{target_name}'); print(time.perf_counter()-t)"
    )
    env = {**os.environ, "NPU_EMU_BUILD_DIR": str(build_root)}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, check=True, capture_output=True, text=True
    )
    return float(out.stdout.strip().splitlines()[-1])


def build_raw(target_name: str, out_dir: Path) -> Path:
    """Build bench/raw_sim_main.cpp around npu_sim with plain Verilator (no VPI)."""
    cfg = target(target_name)
    defines = {
        "DMA_BASE": cfg.dma_base,
        "UDMA_BASE": cfg.memory("udma").base,
        "PLDDR_BASE": cfg.memory("plddr").base,
        **{f"DMA_{r.name}": r.offset for r in DMA.registers},
    }
    cflags = " ".join(f"-D{k}={v:#x}ULL" for k, v in defines.items())
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
        f"-GTarget={cfg.id}",
        *VERILATOR_ARGS,
        "-CFLAGS",
        cflags,
        # The C++ headers the RTL's DPI-C and struct code include (as npuemu.sim.build):
        # npu_ring_abi.h (generated) and npu_savable_structs.h (rtl/sim).
        "-CFLAGS",
        f"-I{RTL_DIR / 'generated'} -I{RTL_DIR / 'sim'}",
        *rtl_include_args(),
        str(RTL_DIR / "lint" / "npu.vlt"),
        *map(str, rtl_sources()),
        *map(str, DPI_SOURCES),
        str(REPO / "bench" / "raw_sim_main.cpp"),
    ]
    subprocess.run(cmd, env=verilator_env(), check=True, capture_output=True, text=True)
    return out_dir / "Vnpu_sim"


def run_raw(exe: Path, nbytes: int, shm: Path) -> dict:
    out = subprocess.run(
        [
            str(exe),
            str(nbytes),
            f"+npu_mem_udma={shm / 'udma.bin'}",
            f"+npu_mem_plddr={shm / 'plddr.bin'}",
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    fields = dict(kv.split("=") for kv in out.split())
    return {k: float(v) for k, v in fields.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--target", default="buyi")
    parser.add_argument("--mib", type=int, default=16, help="size of the speed-test copy")
    args = parser.parse_args()
    cfg = target(args.target)
    speed_bytes = args.mib << 20

    with tempfile.TemporaryDirectory() as tmp, tempfile.TemporaryDirectory(dir="/dev/shm") as shm:
        tmp_path, shm_path = Path(tmp), Path(shm)
        print(f"building from scratch ({args.target}) ...", flush=True)
        cold = [timed_build(args.target, tmp_path / f"cold{i}") for i in range(args.repeat)]
        warm = [timed_build(args.target, tmp_path / "cold0") for _ in range(args.repeat)]

        model = build_npu_sim(args.target)
        for mem in ("udma", "plddr"):
            with open(shm_path / f"{mem}.bin", "wb") as f:
                f.truncate(cfg.memory(mem).size)
        results = tmp_path / "results.jsonl"
        sizes = [1 << 20] + [speed_bytes] * args.repeat
        print("running the cocotb harness ...", flush=True)
        run_cocotb(
            model,
            "dma_cocotb",
            test_dir=tmp_path / "cocotb",
            plusargs=[f"+npu_mem_{m}={shm_path / (m + '.bin')}" for m in ("udma", "plddr")],
            extra_env={
                "NPU_TARGET": args.target,
                "BENCH_OUT": str(results),
                "BENCH_SIZES": ",".join(map(str, sizes)),
                "NPU_MEM_UDMA": str(shm_path / "udma.bin"),
            },
        )
        rows = [json.loads(line) for line in results.read_text().splitlines()]
        one_mib, speed_runs = rows[0], rows[1:]

        print("building and running the raw Verilator loop ...", flush=True)
        exe = build_raw(args.target, tmp_path / "raw")
        raw_runs = [run_raw(exe, speed_bytes, shm_path) for _ in range(args.repeat)]

    bus = DMA_CFG.bus_bytes
    cocotb_cps = statistics.median(r["cycles"] / r["seconds"] for r in speed_runs)
    raw_cps = statistics.median(r["cycles_per_second"] for r in raw_runs)
    print()
    print(f"target {args.target}, DMA bus {bus} bytes/beat, medians of {args.repeat} runs")
    print(
        f"DMA throughput, 1 MiB udma->plddr:  {one_mib['bytes'] / one_mib['cycles']:.2f} "
        f"bytes/cycle ({100 * one_mib['bytes'] / one_mib['cycles'] / bus:.1f}% of the bus), "
        f"{one_mib['cycles']} cycles"
    )
    print(
        f"simulation speed, {args.mib} MiB copy, cocotb harness: {cocotb_cps / 1e6:.3f} Mcycles/s"
    )
    print(f"simulation speed, {args.mib} MiB copy, raw Verilator:  {raw_cps / 1e6:.3f} Mcycles/s")
    print(f"raw / cocotb ratio: {raw_cps / cocotb_cps:.2f}x")
    print(
        f"model build from scratch: {statistics.median(cold):.1f} s; cache warm: "
        f"{statistics.median(warm):.2f} s"
    )


if __name__ == "__main__":
    main()
