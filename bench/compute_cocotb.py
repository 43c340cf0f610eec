"""cocotb side of bench/bench_compute.py: convolution programs on the engine, timed.

Writes one JSON object per run to the file named by BENCH_OUT; each output is checked
against the host kernel. For instruction counting under valgrind, BENCH_ONLY runs one
workload once: "idle:CYCLES" (0 for the base run), "wait:CYCLES" (the engine idle, waited
on with `wait_irq` as a running program is) or a case's name."""

from __future__ import annotations

import json
import os
import time

import cocotb
import numpy as np
from compute_cases import cases

from npuemu.sim.core_driver import run_program
from npuemu.sim.harness import NpuHarness
from xrt.hw.engine import launch_ops
from xrt.hw.regops import RegRead, RegWrite
from xrt.hw.regs import NPU
from xrt.hw.targets import CLOCK_PERIOD_PS, target

IDLE_CYCLES = 300_000


@cocotb.test()
async def compute_speed(dut):
    cfg = target(os.environ["NPU_TARGET"])
    h = NpuHarness(dut, CLOCK_PERIOD_PS)
    await h.reset()
    plddr = cfg.memory("plddr")
    mem = np.memmap(os.environ["NPU_MEM_PLDDR"], np.uint8, "r+", shape=(plddr.size,))
    out = open(os.environ["BENCH_OUT"], "a")  # noqa: SIM115 - closed below
    status = cfg.npu_base + NPU.offset("CORE_STATUS")
    all_cases = cases()
    # The engine idle: the clock alone, then register reads (issue 13's traffic).
    idle_cases = [("idle", None), ("idle_regs", [RegRead(status)] * 2000)]
    repeat = int(os.environ["BENCH_REPEAT"])
    only = os.environ.get("BENCH_ONLY")
    if only is not None:
        repeat, idle_cases = 1, []
        if only.startswith("idle:"):
            await h.run_cycles(int(only.removeprefix("idle:")))
            all_cases = []
        elif only.startswith("wait:"):  # as while a program runs: a trigger on irq_o too
            wait = await h.wait_irq(int(only.removeprefix("wait:")))
            assert not wait.fired, wait
            all_cases = []
        else:
            all_cases = [c for c in all_cases if c.name == only]
            assert all_cases, f"no case {only}"
    for _ in range(repeat):
        for case, ops in idle_cases:
            t0, cpu0, c0 = time.perf_counter(), time.process_time(), h.cycles
            if ops is None:
                await h.run_cycles(IDLE_CYCLES)
            else:
                await h.run_batch(ops)
            seconds, cycles = time.perf_counter() - t0, h.cycles - c0
            cpu = time.process_time() - cpu0
            row = {"case": case, "cycles": cycles, "seconds": seconds, "cpu_seconds": cpu}
            out.write(json.dumps(row) + "\n")
        for case in all_cases:
            for off, blob in case.images.items():
                mem[off : off + len(blob)] = np.frombuffer(blob, np.uint8)
            bases = {r: plddr.base + off for r, off in case.bases.items()}
            n = len(case.program)
            t0, cpu0 = time.perf_counter(), time.process_time()
            c0 = h.cycles
            res = await run_program(h, cfg.npu_base, plddr.base, n, bases)
            seconds, cycles = time.perf_counter() - t0, h.cycles - c0
            cpu = time.process_time() - cpu0
            assert res.ok, res
            assert case.check(lambda off, k: bytes(mem[off : off + k])), f"{case.name} differs"
            ops = launch_ops(cfg.npu_base, plddr.base, n, bases)
            out.write(
                json.dumps(
                    {
                        "case": case.name,
                        "cycles": cycles,
                        "seconds": seconds,
                        "cpu_seconds": cpu,
                        "perf": res.perf,
                        "launch": [[op.addr, op.value] for op in ops if isinstance(op, RegWrite)],
                    }
                )
                + "\n"
            )
    out.close()
