"""Encoding and decoding of one instruction, driven by the generated field tables.

The instruction classes themselves (`Load`, `Store`, `Gemm`, `Vec`, `Sync`, `Finish`) are
generated from ``rtl/isa/npu_isa.toml`` into `xrt.hw._generated.isa`; this module gives them
their behaviour, so no field position is typed by hand anywhere in Python.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, ClassVar

from xrt.errors import ErrorCode, XrtError

__all__ = ["FieldSpec", "Instruction", "IsaError"]


class IsaError(XrtError):
    """A malformed instruction or program; the message names the instruction and field."""

    def __init__(self, message: str, index: int | None = None) -> None:
        where = f"instruction {index}: " if index is not None else ""
        super().__init__(ErrorCode.OUT_OF_RANGE, where + message)
        self.index = index


@dataclass(frozen=True)
class FieldSpec:
    """Where one field sits in the instruction word and how to read it."""

    name: str
    lsb: int
    width: int
    kind: str  # uint | sint | flag | enum
    enum: type[IntEnum] | None

    def pack(self, value: Any) -> int:
        """The field's bits (already shifted into place); raises ValueError when out of range."""
        w = self.width
        if self.kind == "flag":
            if value not in (0, 1, True, False):
                raise ValueError(f"{self.name} must be a flag, got {value!r}")
            raw = int(value)
        elif self.kind == "enum":
            assert self.enum is not None
            try:
                raw = int(self.enum(value))
            except ValueError:
                raise ValueError(f"{self.name}={value!r} is not a {self.enum.__name__}") from None
        elif self.kind == "sint":
            v = int(value)
            if not -(1 << (w - 1)) <= v < 1 << (w - 1):
                raise ValueError(f"{self.name}={v} does not fit {w} signed bits")
            raw = v & ((1 << w) - 1)
        else:
            v = int(value)
            if not 0 <= v < 1 << w:
                raise ValueError(f"{self.name}={v} does not fit {w} unsigned bits")
            raw = v
        return raw << self.lsb

    def unpack(self, word: int) -> Any:
        """The field's value from an instruction word; raises ValueError for a bad enum."""
        raw = (word >> self.lsb) & ((1 << self.width) - 1)
        if self.kind == "flag":
            return bool(raw)
        if self.kind == "sint" and raw >> (self.width - 1):
            return raw - (1 << self.width)
        if self.kind == "enum":
            assert self.enum is not None
            try:
                return self.enum(raw)
            except ValueError:
                raise ValueError(f"{self.name}={raw} is not a {self.enum.__name__}") from None
        return raw


@dataclass(frozen=True)
class Instruction:
    """Base of the generated instruction classes."""

    OPCODE: ClassVar[int]
    UNIT: ClassVar[str]
    RESERVED_MASK: ClassVar[int]
    FIELDS: ClassVar[tuple[FieldSpec, ...]]
    INSN_BYTES: ClassVar[int] = 32

    def to_word(self) -> int:
        """The instruction as one integer (bit 0 = bit 0 of byte 0)."""
        word = self.OPCODE
        for spec in self.FIELDS:
            try:
                word |= spec.pack(getattr(self, spec.name))
            except ValueError as exc:
                raise IsaError(f"{type(self).__name__.upper()}: {exc}") from None
        return word

    def encode(self) -> bytes:
        """The instruction's bytes as the engine fetches them (little-endian)."""
        return self.to_word().to_bytes(self.INSN_BYTES, "little")

    @classmethod
    def from_word(cls, word: int, index: int | None = None) -> Instruction:
        """Decode a word whose opcode is this class's; reserved bits must be 0."""
        if word & cls.RESERVED_MASK:
            bits = word & cls.RESERVED_MASK
            raise IsaError(f"{cls.__name__.upper()}: reserved bits set (mask {bits:#x})", index)
        values = {}
        for spec in cls.FIELDS:
            try:
                values[spec.name] = spec.unpack(word)
            except ValueError as exc:
                raise IsaError(f"{cls.__name__.upper()}: {exc}", index) from None
        return cls(**values)

    def replace(self, **changes: Any) -> Instruction:
        """A copy with some fields changed."""
        return dataclasses.replace(self, **changes)

    def tokens(self) -> tuple[bool, bool, bool, bool]:
        """(pop_prev, pop_next, push_prev, push_next)."""
        d = self.__dict__
        return (d["pop_prev"], d["pop_next"], d["push_prev"], d["push_next"])

    def __str__(self) -> str:
        parts = []
        for spec in self.FIELDS:
            value = getattr(self, spec.name)
            default = type(self).__dataclass_fields__[spec.name].default
            if value != default:
                shown = value.name if isinstance(value, IntEnum) else value
                parts.append(f"{spec.name}={shown}")
        return f"{type(self).__name__.upper()} " + " ".join(parts)
