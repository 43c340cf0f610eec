"""Hardware configuration of the NPU targets (kept for existing imports: the contract lives
in `xrt.hw.config` (types) and `xrt.hw.targets` (values, `target`))."""

from xrt.hw.config import DmaConfig, MemoryWindow, NpuConfig, TargetConfig
from xrt.hw.targets import target

__all__ = ["DmaConfig", "MemoryWindow", "NpuConfig", "TargetConfig", "target"]
