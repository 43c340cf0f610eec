"""Register map description types (kept for existing imports: they live in
`xrt.hw.regmap`)."""

from xrt.hw.regmap import FieldInfo, RegisterBlockInfo, RegisterInfo

__all__ = ["FieldInfo", "RegisterBlockInfo", "RegisterInfo"]
