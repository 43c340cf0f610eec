"""The register maps of both CSR blocks, generated from ``rtl/regs/*.rdl``.

`NPU` and `DMA` are `xrt.hw.regmap.RegisterBlockInfo` records (names, offsets, fields,
reset values, access); `PERF_COUNTERS` names the compute engine's 64-bit counters in
register order (``PERF_<NAME>_LO``/``_HI``), the order the RTL's ``Perf*`` indices follow
(``rtl/generated/npu_config_pkg.sv``, generated from the same registers).
"""

from __future__ import annotations

from xrt.hw._generated.regs_dma import DMA
from xrt.hw._generated.regs_npu import NPU

__all__ = ["DMA", "NPU", "PERF_COUNTERS"]

PERF_COUNTERS: tuple[str, ...] = tuple(
    reg.name[len("PERF_") : -len("_LO")]
    for reg in NPU.registers
    if reg.name.startswith("PERF_") and reg.name.endswith("_LO")
)
"""Counter names without ``PERF_`` and ``_LO``: ``RUN_CYCLES``, ``LOAD_BUSY``, ..."""
