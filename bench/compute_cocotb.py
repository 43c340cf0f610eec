"""cocotb side of bench/bench_compute.py: convolution programs on the engine, timed.

Writes one JSON object per run to the file named by BENCH_OUT."""

from __future__ import annotations

import json
import os
import time

import cocotb
import numpy as np
from conv_programs import CASES, OFFSETS

from npuemu.sim.core_driver import _R, launch_ops, run_program
from npuemu.sim.harness import NpuHarness, RegOp, RegOpKind
from xrt._generated.hwconfig import CLOCK_PERIOD_PS
from xrt.hwconfig import target
from xrt.npu import isa

IDLE_CYCLES = 300_000


@cocotb.test()
async def compute_speed(dut):
    cfg = target(os.environ["NPU_TARGET"])
    h = NpuHarness(dut, CLOCK_PERIOD_PS)
    await h.reset()
    plddr = cfg.memory("plddr")
    mem = np.memmap(os.environ["NPU_MEM_PLDDR"], np.uint8, "r+", shape=(plddr.size,))
    out = open(os.environ["BENCH_OUT"], "a")  # noqa: SIM115 - closed below
    status = cfg.npu_base + _R["CORE_STATUS"]
    for _ in range(int(os.environ["BENCH_REPEAT"])):
        # The engine idle: the clock alone, then register reads (issue 13's traffic).
        for case, ops in (("idle", None), ("idle_regs", [RegOp(RegOpKind.READ, status)] * 2000)):
            t0, cpu0, c0 = time.perf_counter(), time.process_time(), h.cycles
            if ops is None:
                await h.run_cycles(IDLE_CYCLES)
            else:
                await h.run_batch(ops)
            seconds, cycles = time.perf_counter() - t0, h.cycles - c0
            cpu = time.process_time() - cpu0
            row = {"case": case, "cycles": cycles, "seconds": seconds, "cpu_seconds": cpu}
            out.write(json.dumps(row) + "\n")
        for case in CASES:
            data = case.data()
            for name, blob in data.items():
                mem[OFFSETS[name] : OFFSETS[name] + len(blob)] = np.frombuffer(blob, np.uint8)
            prog = isa.encode_program(case.program())
            mem[: len(prog)] = np.frombuffer(prog, np.uint8)
            bases = {
                i: plddr.base + OFFSETS[n]
                for i, n in enumerate(("act", "wgt", "bias", "prm", "out"))
            }
            t0, cpu0 = time.perf_counter(), time.process_time()
            c0 = h.cycles
            res = await run_program(h, cfg.npu_base, plddr.base, len(prog) // 32, bases)
            seconds, cycles = time.perf_counter() - t0, h.cycles - c0
            cpu = time.process_time() - cpu0
            assert res.ok, res
            ops = launch_ops(cfg.npu_base, plddr.base, len(prog) // 32, bases)
            out.write(
                json.dumps(
                    {
                        "case": case.name,
                        "cycles": cycles,
                        "seconds": seconds,
                        "cpu_seconds": cpu,
                        "perf": res.perf,
                        "launch": [[op.addr, op.value] for op in ops],
                    }
                )
                + "\n"
            )
    out.close()
