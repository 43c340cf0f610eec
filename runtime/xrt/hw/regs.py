"""The register maps of the CSR blocks, generated from ``rtl/regs/*.rdl``.

`NPU` and `DMA` (both chips) and `FAULT` (the simulator's fault controller) are
`xrt.hw.regmap.RegisterBlockInfo` records (names, offsets, fields, reset values, access);
`PERF_COUNTERS` names the compute engine's 64-bit counters in register order
(``PERF_<NAME>_LO``/``_HI``), the order the RTL's ``Perf*`` indices follow
(``rtl/generated/npu_config_pkg.sv``, generated from the same registers).
"""

from __future__ import annotations

from xrt.hw._generated.regs_dma import DMA
from xrt.hw._generated.regs_fault import FAULT
from xrt.hw._generated.regs_npu import NPU
from xrt.hw.regmap import RegisterBlockInfo, RegisterInfo

__all__ = [
    "DMA",
    "FAULT",
    "NPU",
    "PERF_COUNTERS",
    "configuration_registers",
    "read_side_effect_text",
    "read_side_effects",
]

PERF_COUNTERS: tuple[str, ...] = tuple(
    reg.name[len("PERF_") : -len("_LO")]
    for reg in NPU.registers
    if reg.name.startswith("PERF_") and reg.name.endswith("_LO")
)
"""Counter names without ``PERF_`` and ``_LO``: ``RUN_CYCLES``, ``LOAD_BUSY``, ..."""


def read_side_effect_text(block: RegisterBlockInfo, reg: RegisterInfo) -> str:
    """What reading `reg` does to the device, in words (``""``: nothing, a read only looks).

    From the RDL: ``onread`` changes the field itself; ``swacc`` tells the RTL of each
    read. In this NPU every ``swacc`` field is the LO half of a 64-bit counter, and the read
    latches the HI half (a holder reading LO then HI would get a torn value if anyone else
    read LO in between).
    """
    kinds = reg.read_side_effect
    if not kinds:
        return ""
    if reg.name.endswith("_LO") and reg.name[: -len("_LO")] + "_HI" in block:
        return f"reading it latches {block.name}.{reg.name[: -len('_LO')]}_HI ({kinds})"
    return f"reading it changes the device ({kinds})"


def read_side_effects(npu_base: int, dma_base: int) -> dict[int, str]:
    """Physical address -> ``BLOCK.REGISTER: what reading it does``, for every register
    whose read is not a pure look (`read_side_effect_text`), with the blocks at these
    bases. An observer of a held device (`npu-emu regs read --observe`) may not read them."""
    out = {}
    for base, block in ((npu_base, NPU), (dma_base, DMA)):
        for reg in block:
            text = read_side_effect_text(block, reg)
            if text:
                out[base + reg.offset] = f"{block.name}.{reg.name}: {text}"
    return out


def configuration_registers(block: RegisterBlockInfo) -> list[RegisterInfo]:
    """The registers that hold only what software wrote: every field read-write storage
    that hardware never changes, with no side effect on a read or a write (no single
    pulse, no write-1-to-clear, no access strobe). Writing back a value read from one puts
    the device's configuration back and starts nothing (a checkpoint's portable part)."""
    return [
        reg
        for reg in block
        if reg.fields
        and all(
            f.sw == "rw" and not (f.singlepulse or f.onwrite or f.onread or f.swacc or f.volatile)
            for f in reg.fields
        )
    ]
