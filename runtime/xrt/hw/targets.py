"""The hardware configuration's values: both targets, the DMA and compute engine parameters,
the clock, the register bus's poll back-off.

Generated from ``rtl/config/npu.toml`` (which also parameterises the RTL through
``rtl/generated/npu_config_pkg.sv``) into `xrt.hw._generated.config`; the types are in
`xrt.hw.config`.
"""

from __future__ import annotations

from xrt.errors import ErrorCode, XrtError
from xrt.hw._generated.config import (
    CLOCK_PERIOD_PS,
    DMA,
    HW_VERSION,
    NPU,
    POLL_FIRST_INTERVAL,
    POLL_MAX_INTERVAL,
    TARGETS,
)
from xrt.hw.config import TargetConfig

__all__ = [
    "CLOCK_PERIOD_PS",
    "DMA",
    "HW_VERSION",
    "MIN_SIM_CYCLES_PER_S",
    "NPU",
    "POLL_FIRST_INTERVAL",
    "POLL_MAX_INTERVAL",
    "TARGETS",
    "target",
]


MIN_SIM_CYCLES_PER_S = 100_000
"""The slowest simulation this project allows for (simulated cycles per wall-clock second;
measured here: about 1,000,000): every wall-clock guard on simulated work (a poll's or a
wait's deadline, a DMA's, a worker's watchdog) gives the work its cycles at this speed."""


def target(name: str) -> TargetConfig:
    """Return the configuration of target `name` (``"buyi"`` or ``"zg330"``)."""
    try:
        return TARGETS[name]
    except KeyError:
        raise XrtError(
            ErrorCode.WRONG_TYPE, f"unknown target {name!r} (known: {', '.join(TARGETS)})"
        ) from None
