"""`make demo`: the simulated NPU moving 16 MiB through its DMA engine, verified.

Builds the Buyi model (once; cached), fills 16 MiB of host-visible memory (udma) with random
data through its shared-memory file, has the DMA copy it to device DDR (plddr) and back to
another udma buffer, checks every byte, and prints the register round-trip time, the
transfer rates and the simulated cycles.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from npuemu.sim.build import build_npu_sim
from npuemu.sim.cocotb_run import run_cocotb
from xrt._generated.hwconfig import CLOCK_PERIOD_PS
from xrt.hwconfig import target

TARGET = "buyi"
NBYTES = 16 << 20
BACK_OFFSET = 32 << 20


def main() -> int:
    cfg = target(TARGET)
    print(f"[1/3] verilated model of {TARGET} (built once, then cached) ...", flush=True)
    t0 = time.perf_counter()
    model = build_npu_sim(TARGET)
    print(f"      {'built' if model.built_now else 'cached'} in {time.perf_counter() - t0:.1f} s")

    with tempfile.TemporaryDirectory(prefix="npuemu-demo-", dir="/dev/shm") as shm:
        files = {m: Path(shm) / f"{m}.bin" for m in ("udma", "plddr")}
        for m, path in files.items():
            with path.open("wb") as f:
                f.truncate(cfg.memory(m).size)
        udma = np.memmap(files["udma"], np.uint8, "r+", shape=(cfg.memory("udma").size,))
        data = np.random.default_rng().integers(0, 256, NBYTES, dtype=np.uint8)
        udma[:NBYTES] = data
        print(
            f"[2/3] {NBYTES >> 20} MiB of random data in udma; DMA udma -> plddr -> udma ...",
            flush=True,
        )
        out = Path(shm) / "figures.json"
        run_cocotb(
            model,
            "npuemu.sim.demo_cocotb",
            test_dir=Path(shm) / "run",
            plusargs=[f"+npu_mem_{m}={p}" for m, p in files.items()],
            extra_env={
                "NPU_TARGET": TARGET,
                "DEMO_BYTES": str(NBYTES),
                "DEMO_BACK_OFFSET": str(BACK_OFFSET),
                "DEMO_OUT": str(out),
            },
        )
        fig = json.loads(out.read_text())
        ok = np.array_equal(udma[BACK_OFFSET : BACK_OFFSET + NBYTES], data)
        print(f"[3/3] verify {NBYTES >> 20} MiB: {'OK, bit-exact' if ok else 'MISMATCH'}")

    mib = NBYTES / (1 << 20)
    print()
    print(f"register read round trip (harness, AXI4-Lite): {fig['reg_read_us']:.0f} us")
    for leg, label in (("to_plddr", "udma -> plddr"), ("to_udma", "plddr -> udma")):
        cyc, sec = fig[leg]["cycles"], fig[leg]["seconds"]
        sim_us = cyc * CLOCK_PERIOD_PS / 1e6
        print(
            f"DMA {label}: {cyc} cycles ({NBYTES / cyc:.2f} bytes/cycle, {sim_us / 1e3:.2f} ms "
            f"simulated = {mib / (sim_us / 1e6):.0f} MiB/s at 100 MHz); "
            f"wall {sec:.2f} s = {mib / sec:.1f} MiB/s"
        )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
