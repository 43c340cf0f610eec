"""The types of the NPU's hardware configuration: memory windows, DMA and compute engine
parameters, targets.

The values come from ``rtl/config/npu.toml`` (the same file that parameterises the RTL),
generated into `xrt.hw._generated.config` and published by `xrt.hw.targets`; this module
defines only the records they are made of.
"""

from __future__ import annotations

from dataclasses import dataclass

from xrt.errors import ErrorCode, XrtError

__all__ = ["DmaConfig", "MemoryWindow", "NpuConfig", "TargetConfig"]


@dataclass(frozen=True)
class MemoryWindow:
    """A memory the DMA engine can reach, at physical addresses ``[base, base + size)``."""

    name: str
    base: int
    size: int
    description: str = ""

    @property
    def end(self) -> int:
        """First address past the window."""
        return self.base + self.size

    def contains(self, addr: int, nbytes: int = 1) -> bool:
        """True when ``[addr, addr + nbytes)`` lies inside the window."""
        return self.base <= addr and addr + nbytes <= self.end


@dataclass(frozen=True)
class DmaConfig:
    """DMA engine parameters shared by both targets."""

    data_width: int
    addr_width: int
    max_burst_beats: int
    max_outstanding: int
    fifo_depth: int

    @property
    def bus_bytes(self) -> int:
        """Bytes per data beat."""
        return self.data_width // 8


@dataclass(frozen=True)
class NpuConfig:
    """Compute engine sizes shared by both targets (`rtl/config/npu.toml` ``[npu]``)."""

    block: int
    inp_rows: int
    wgt_rows: int
    acc_rows: int
    prm_rows: int
    lut_tables: int
    insn_queue_depth: int
    token_depth: int
    watchdog_cycles: int
    base_regs: int
    ddr_latency: int = 0  # read latency of the DDR models in cycles (the OCM answers at once)
    ddr_shared_bus: int = 0  # 1: a DDR model moves one beat per cycle, reads and writes together

    @property
    def macs_per_cycle(self) -> int:
        """Multiply-accumulates the B x B array does per cycle."""
        return self.block * self.block

    def row_bytes(self, buffer: str) -> int:
        """Bytes of one row of ``buffer`` (INP, WGT, ACC, PRM or LUT) in memory."""
        b = self.block
        sizes = {"INP": b, "LUT": b, "WGT": b * b, "ACC": 4 * b, "PRM": 4 * b}
        return sizes[buffer]


@dataclass(frozen=True)
class TargetConfig:
    """One chip: register block bases and the memories its DMA engine reaches."""

    name: str
    id: int
    description: str
    npu_base: int
    dma_base: int
    fault_base: int
    """The simulator's fault controller (rtl/regs/fault.rdl): simulated devices only."""
    reg_block_size: int
    memories: tuple[MemoryWindow, ...]

    def memory(self, name: str) -> MemoryWindow:
        """Return the memory window called `name`; XrtError 11003 names the known ones."""
        for m in self.memories:
            if m.name == name:
                return m
        known = ", ".join(m.name for m in self.memories)
        raise XrtError(
            ErrorCode.OUT_OF_RANGE, f"target {self.name} has no memory {name!r} (has: {known})"
        )

    def has_memory(self, name: str) -> bool:
        return any(m.name == name for m in self.memories)

    @property
    def sim_register_blocks(self) -> tuple[tuple[str, int], ...]:
        """(name, base) of every register block of a simulated device of this target: the
        chip's ``npu`` and ``dma``, and the simulator's ``fault`` controller."""
        return (("npu", self.npu_base), ("dma", self.dma_base), ("fault", self.fault_base))
