"""Tuning records in the NPU backends: the tilings a program is compiled with.

`tuned_plans` asks an `xrt.tuning.NpuTuner` for the recorded tilings of a run (measuring
what has no trusted record when the backend's ``tune`` is on); `DeviceMeasure` is its
RTL measure: a candidate program uploaded to the backend's device, launched once, and its
``RUN_CYCLES`` counter (`LaunchStats.busy_cycles`) read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from xrt.backend.npu._driver import EngineDriver
from xrt.memory import MemChunk
from xrt.network import NetworkView
from xrt.npu.compiler import NpuProgram, Plans
from xrt.npu_device.npu import NpuDevice
from xrt.tuning import CostModelMeasure, Measure, NpuTuner

if TYPE_CHECKING:
    from xrt.backend.npu._backend import NpuBackend

__all__ = ["DeviceMeasure", "tuned_plans"]

_ALIGN = 4096


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
            main = plddr.malloc(const_off + max(len(prog.constants), 1), True, _ALIGN)
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
                    if ocm.mem_manager.largest_free_block >= role.size + _ALIGN:
                        region = ocm
                chunk = region.malloc(max(role.size, 1), True, _ALIGN)
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


def tuned_plans(backend: NpuBackend, sub: NetworkView, ocm_bytes: int) -> Plans:
    """The recorded tilings for `sub` (empty without records); with ``backend.tune``,
    operators without a trusted record are measured first (``backend.tune_measure``:
    ``rtl`` on the backend's device, or ``cost-model``) and recorded."""
    records = backend.tuning
    if records is None:
        return {}
    # A run is looked up more than once per apply (sizing the OCM arena, then preparing).
    memo = (id(records), backend.tune, tuple(op.op_id for op in sub.ops), ocm_bytes)
    known = backend._plans_memo.get(memo)
    if known is not None:
        return known
    measure: Measure
    if backend.tune and backend.tune_measure == "rtl" and backend._driver is not None:
        assert isinstance(backend.device, NpuDevice)
        measure = DeviceMeasure(
            backend.device, backend._driver, backend.OCM_REGION, backend.timeout_s
        )
    else:
        measure = CostModelMeasure(backend.TARGET, backend.config, ocm_bytes > 0)
    tuner = NpuTuner(
        records,
        backend.config,
        backend.TARGET,
        tune=backend.tune,
        measure=measure,
        ocm_bytes=ocm_bytes,
    )
    tuner.report = backend.tune_report
    plans = tuner.plans_for(sub)
    backend._plans_memo[memo] = plans
    return plans
