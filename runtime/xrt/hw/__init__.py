"""xrt.hw: the hardware contract the runtime, the emulator and the RTL share.

One public place for every fact more than one layer needs, generated where it can be from
the single sources (``rtl/regs/*.rdl``, ``rtl/config/npu.toml``, ``rtl/isa/npu_isa.toml``,
``proto/npuemu/v1/device.proto``):

- `xrt.hw.config`, `xrt.hw.targets`: the targets, memory windows, engine sizes, clock;
- `xrt.hw.regmap`, `xrt.hw.regs`: the register maps (`NPU`, `DMA`) and the counter list;
- `xrt.hw.isa`: the compute engine's instruction set (encode, decode, error codes);
- `xrt.hw.regops`: register operations (`RegRead` ... `RegPoll`) and their device form;
- `xrt.hw.engine`: the engine launch sequence as register operations;
- `xrt.hw.wire`: the device server's protocol: stubs, version, statuses, retry hints.

Nothing here imports the rest of the runtime (errors aside), and the emulator, bench/ and
tools/ import only these modules of it: a newcomer finds each fact in one place.
"""

from xrt.hw.config import DmaConfig, MemoryWindow, NpuConfig, TargetConfig
from xrt.hw.targets import CLOCK_PERIOD_PS, HW_VERSION, TARGETS, target
from xrt.hw.wire import PROTOCOL_VERSION, DeviceState, RegisterStatus, WaitOutcome

__all__ = [
    "CLOCK_PERIOD_PS",
    "HW_VERSION",
    "PROTOCOL_VERSION",
    "TARGETS",
    "DeviceState",
    "DmaConfig",
    "MemoryWindow",
    "NpuConfig",
    "RegisterStatus",
    "TargetConfig",
    "WaitOutcome",
    "target",
]
