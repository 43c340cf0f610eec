"""cocotb side of bench/bench_regbus_sim.py: register batches in the harness, timed.

Runs in the simulator process, as the emulator's worker does, with no server or IPC around
it. Environment: BENCH_OUT (a JSON-lines file), BENCH_REPEAT (rounds: every case once per
round, interleaved, so all see the same load) and, for instruction counting under
valgrind, BENCH_ONLY ("SIZExBATCHES", or "idle:CYCLES") to run one workload and nothing
else.
"""

from __future__ import annotations

import json
import os
import time

import cocotb

from npuemu.sim.harness import NpuHarness
from xrt.hw.regops import RegKind, RegRow
from xrt.hw.regs import NPU
from xrt.hw.targets import CLOCK_PERIOD_PS, target
from xrt.hw.wire import RegisterStatus

SIZES = (1, 64, 1024)
IDLE_CYCLES = 3 * 1024  # the cycles of a 1024-read batch


@cocotb.test()
async def regbus_speed(dut):
    cfg = target(os.environ["NPU_TARGET"])
    h = NpuHarness(dut, CLOCK_PERIOD_PS)
    await h.reset()
    addr = cfg.npu_base + NPU.register("SCRATCH").offset
    batches = {n: [RegRow(RegKind.READ, addr)] * n for n in SIZES}
    only = os.environ.get("BENCH_ONLY")
    if only:  # one workload for instruction counts (valgrind), nothing printed
        if only.startswith("idle:"):
            await h.run_cycles(int(only[5:]))
        else:
            size, count = map(int, only.split("x"))
            rows = [RegRow(RegKind.READ, addr)] * size
            for _ in range(count):
                await h.run_rows(rows)
        return
    cases = [(f"batch{n}", n, lambda rows=rows: h.run_rows(rows)) for n, rows in batches.items()]
    cases.append(("idle", 0, lambda: h.run_cycles(IDLE_CYCLES)))
    with open(os.environ["BENCH_OUT"], "a") as out:
        for _ in range(int(os.environ.get("BENCH_REPEAT", "20"))):
            for name, ops, run in cases:
                c0, t0, p0 = h.cycles, time.perf_counter(), time.process_time()
                results = await run()
                wall, cpu = time.perf_counter() - t0, time.process_time() - p0
                assert ops == 0 or all(s == RegisterStatus.OK for s, _, _ in results), results
                row = {"case": name, "ops": ops, "cycles": h.cycles - c0, "wall": wall}
                out.write(json.dumps({**row, "cpu": cpu}) + "\n")
