"""The NPU backends: `BuyiBackend` and `ZG330Backend` (docs/session.md, "NPU backends").

Both compile runs of quantized operators into programs for the compute engine at
``apply`` and launch them at ``forward`` through the device's register and memory regions,
the same on the emulator (``grpc://``) and on a board (``axi://``). Buyi keeps every
tensor in external memory (``plddr``); ZG330 keeps a program's intermediates in its
on-chip memory (``ocm``) when they fit. `bind_compile_only` binds one to no device, so
that a session compiles its programs for a program container (``xrt compile``).
"""

from __future__ import annotations

from xrt.backend._names import register_backend_type
from xrt.backend.npu._backend import NpuBackend, Segment
from xrt.backend.npu._binding import LONE_ALIAS
from xrt.backend.npu._cache import PROGRAM_CACHE, ProgramCache, program_key
from xrt.backend.npu._driver import EngineDriver, LaunchStats
from xrt.backend.npu._offline import bind_compile_only
from xrt.backend.npu._serialize import program_from_bytes, program_to_bytes
from xrt.backend.npu.hardop_builder import to_hardop
from xrt.npu_device.npu import BuyiDevice, ZG330Device

__all__ = [
    "LONE_ALIAS",
    "PROGRAM_CACHE",
    "BuyiBackend",
    "EngineDriver",
    "LaunchStats",
    "NpuBackend",
    "ProgramCache",
    "Segment",
    "ZG330Backend",
    "bind_compile_only",
    "program_from_bytes",
    "program_key",
    "program_to_bytes",
    "to_hardop",
]


@register_backend_type("buyi")
class BuyiBackend(NpuBackend):
    """Buyi: every tensor in external memory (ETM: ``plddr``). Caller-placed outputs
    (``forward(inputs, outputs)``) are not supported, as in the manual."""

    TARGET = "buyi"
    DEVICE_CLASS = BuyiDevice
    supports_output_placement = False


@register_backend_type("zg330")
class ZG330Backend(NpuBackend):
    """ZG330: a program's intermediates live in the on-chip memory (``ocm``) as far as they
    fit (the memory planner packs them by lifetime), the rest in ``plddr``;
    ``forward(inputs, outputs)`` writes into caller-placed tensors."""

    TARGET = "zg330"
    DEVICE_CLASS = ZG330Device
    OCM_REGION = "ocm"
    DIRECT_OUTPUTS = True
    supports_output_placement = True
