"""Registers: register regions (the manual's ``RegRegion``), batches of register operations,
and named access through a generated register map.

- `xrt.registers.region`: `RegRegion`, its transport hooks (the hook table is there), the
  checked single accesses, polls and batch `execute`;
- `xrt.registers.named`: `RegisterFile`, `RegisterView`, `FieldView` (``region.regs.CTRL``),
  `RegisterPairView` (``region.regs.pair("CYCLES")``, 64 bits) and the rules of field
  read-modify-writes;
- `xrt.registers.batch`: `RegBatch`, the builder behind ``region.batch()``.

The operation records (`RegRead`, `RegWrite`, `RegMaskedWrite`, `RegPoll`, `RegOp`) belong to
the hardware contract, `xrt.hw.regops`; they are re-exported here (and from `xrt`), with
every other name this module had when it was one file.
"""

from xrt.hw.regmap import FieldInfo as FieldInfo
from xrt.hw.regmap import RegisterBlockInfo as RegisterBlockInfo
from xrt.hw.regmap import RegisterInfo as RegisterInfo
from xrt.hw.regmap import RegisterPair as RegisterPair
from xrt.hw.regops import MASK32 as MASK32
from xrt.hw.regops import RegMaskedWrite, RegOp, RegPoll, RegRead, RegWrite
from xrt.registers.batch import RegBatch
from xrt.registers.batch import Target as Target
from xrt.registers.named import FieldView, RegisterFile, RegisterPairView, RegisterView
from xrt.registers.region import DEFAULT_POLL_TIMEOUT_S as DEFAULT_POLL_TIMEOUT_S
from xrt.registers.region import RegRegion

__all__ = [
    "FieldView",
    "RegBatch",
    "RegMaskedWrite",
    "RegOp",
    "RegPoll",
    "RegRead",
    "RegRegion",
    "RegWrite",
    "RegisterFile",
    "RegisterPairView",
    "RegisterView",
]
