"""cocotb side of bench/bench_dma.py: DMA copies in the simulated NPU, timed.

Writes one JSON object per measurement to the file named by BENCH_OUT.
"""

from __future__ import annotations

import json
import os
import time

import cocotb
import numpy as np

from npuemu.sim.dma_driver import DmaTransfer, program_ops
from npuemu.sim.harness import NpuHarness
from xrt.hw.regs import DMA
from xrt.hw.targets import CLOCK_PERIOD_PS, target


@cocotb.test()
async def dma_speed(dut):
    cfg = target(os.environ["NPU_TARGET"])
    h = NpuHarness(dut, CLOCK_PERIOD_PS)
    await h.reset()
    udma, plddr = cfg.memory("udma"), cfg.memory("plddr")
    mem = np.memmap(os.environ["NPU_MEM_UDMA"], np.uint8, "r+", shape=(udma.size,))
    out = open(os.environ["BENCH_OUT"], "a")  # noqa: SIM115 - closed below
    for nbytes in map(int, os.environ["BENCH_SIZES"].split(",")):
        mem[:nbytes] = np.random.default_rng(nbytes).integers(0, 256, nbytes, np.uint8)
        await h.run_batch(program_ops(cfg.dma_base, DmaTransfer(udma.base, plddr.base, nbytes)))
        c0, t0 = h.cycles, time.perf_counter()
        wait = await h.wait_irq(max_cycles=100 * nbytes, timeout_s=600)
        seconds, cycles = time.perf_counter() - t0, h.cycles - c0
        assert wait.fired
        await h.write_reg(cfg.dma_base + DMA.register("INT_STATUS").offset, 3)  # acknowledge
        out.write(json.dumps({"bytes": nbytes, "cycles": cycles, "seconds": seconds}) + "\n")
    out.close()
