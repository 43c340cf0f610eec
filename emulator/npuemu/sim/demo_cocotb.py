"""cocotb side of the local demo (tools/demo.py): DMA a buffer udma -> plddr -> udma.

Reads its parameters from the environment and writes its figures as JSON to DEMO_OUT.
"""

from __future__ import annotations

import json
import os
import time

import cocotb

from npuemu.sim.dma_driver import DmaTransfer, run_dma
from npuemu.sim.harness import NpuHarness
from xrt._generated.hwconfig import CLOCK_PERIOD_PS
from xrt._generated.regmap_npu import NPU
from xrt.hwconfig import target


@cocotb.test()
async def demo(dut):
    cfg = target(os.environ["NPU_TARGET"])
    nbytes, back_off = int(os.environ["DEMO_BYTES"]), int(os.environ["DEMO_BACK_OFFSET"])
    h = NpuHarness(dut, CLOCK_PERIOD_PS)
    await h.reset()
    udma, plddr = cfg.memory("udma"), cfg.memory("plddr")

    magic = cfg.npu_base + NPU.register("MAGIC").offset
    t0 = time.perf_counter()
    for _ in range(100):
        await h.read_reg(magic)
    reg_us = (time.perf_counter() - t0) / 100 * 1e6

    figures = {"reg_read_us": reg_us}
    for leg, t in (
        ("to_plddr", DmaTransfer(udma.base, plddr.base, nbytes)),
        ("to_udma", DmaTransfer(plddr.base, udma.base + back_off, nbytes)),
    ):
        t0 = time.perf_counter()
        res = await run_dma(h, cfg.dma_base, t)
        assert res.ok, f"{leg}: {res}"
        figures[leg] = {"cycles": res.cycles, "seconds": time.perf_counter() - t0}
    with open(os.environ["DEMO_OUT"], "w") as f:
        json.dump(figures, f)
