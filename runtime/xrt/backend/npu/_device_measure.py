"""Tuning an NPU backend's tilings on its device's RTL: `DeviceMeasure`, the RTL measure an
`xrt.tuning.NpuTuner` gives each candidate program (uploaded to the device, launched once,
its ``RUN_CYCLES`` counter, `LaunchStats.busy_cycles`, read). The backend asks the tuner
(`NpuBackend._tuned_plans`); the cost-model measure is `xrt.tuning.CostModelMeasure`.
"""

from __future__ import annotations

from dataclasses import dataclass

from xrt.backend.npu._driver import EngineDriver
from xrt.backend.npu._loader import PROGRAM_ALIGN
from xrt.memory import MemChunk
from xrt.npu.compiler import NpuProgram
from xrt.npu_device.npu import NpuDevice

__all__ = ["DeviceMeasure"]


@dataclass
class DeviceMeasure:
    """RTL cycles of one launch of a program on `device` (its data is whatever the
    buffers hold: the engine's timing does not depend on values).

    Attributes:
        device: The NPU device.
        driver: Its engine driver.
        ocm_region: Where an on-chip scratch role goes (None: plddr).
        timeout_s: Wall seconds a launch may take.
    """

    device: NpuDevice
    driver: EngineDriver
    ocm_region: str | None = None
    timeout_s: float = 600.0
    name: str = "rtl"

    def __call__(self, prog: NpuProgram) -> int:
        plddr = self.device.get_mem_region("plddr")
        chunks: list[MemChunk] = []
        try:
            code = prog.encode()
            const_off = -(-len(code) // 64) * 64
            main = plddr.malloc(const_off + max(len(prog.constants), 1), True, PROGRAM_ALIGN)
            chunks.append(main)
            main.write(code)
            if prog.constants:
                main.write(prog.constants, offset=const_off)
            bases = {0: main.begin.addr + const_off}
            for role in prog.bases:
                if role.kind == "const":
                    continue
                region = plddr
                if role.kind == "ocm" and self.ocm_region is not None:
                    ocm = self.device.get_mem_region(self.ocm_region)
                    if ocm.mem_manager.largest_free_block >= role.size + PROGRAM_ALIGN:
                        region = ocm
                chunk = region.malloc(max(role.size, 1), True, PROGRAM_ALIGN)
                chunks.append(chunk)
                bases[role.index] = chunk.begin.addr
            stats = self.driver.launch(
                main.begin.addr,
                len(prog.instructions),
                bases,
                what="tuning candidate",
                timeout_s=self.timeout_s,
            )
            return stats.busy_cycles
        finally:
            for c in chunks:
                c.free()
