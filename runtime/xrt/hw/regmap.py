"""Register map description types.

The concrete maps (`xrt.hw.regs.NPU`, `xrt.hw.regs.DMA`) are generated
from `rtl/regs/*.rdl` by `make regs`; nobody types an offset by hand. This module only
defines the plain, immutable records those generated modules are made of, so the runtime
can look registers and fields up by name without importing any RDL tooling.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

__all__ = ["FieldInfo", "RegisterBlockInfo", "RegisterInfo", "RegisterPair"]


@dataclass(frozen=True)
class FieldInfo:
    """One bit field of a register.

    Attributes:
        name: Field name as in the RDL (upper case).
        lsb: Lowest bit index.
        width: Width in bits.
        sw: Software access as SystemRDL says it: ``"rw"``, ``"r"`` or ``"w"``.
        reset: Reset value of the field (already shifted down to bit 0).
        onread: ``""`` or the RDL onread side effect (``"rclr"``...).
        onwrite: ``""`` or the RDL onwrite side effect (``"woclr"`` is write-1-to-clear).
        singlepulse: True when a written 1 pulses for one cycle and reads back 0.
        desc: Human description from the RDL.
        hw: Hardware access: ``"r"``, ``"w"``, ``"rw"`` or ``"na"``. A field hardware can
            write (``"w"`` in it) is volatile: its value may change without a bus write.
        has_reset: False for fields with no reset value of their own (hardware-driven
            read-only fields such as status and counters); their `reset` is 0.
        swacc: True when the RTL is told of every software access to the field (RDL
            ``swacc``). On a read-only field that makes a read an act, not a look: the
            64-bit counters' LO halves latch their HI half when read.
    """

    name: str
    lsb: int
    width: int
    sw: str
    reset: int
    onread: str = ""
    onwrite: str = ""
    singlepulse: bool = False
    desc: str = ""
    hw: str = "na"
    has_reset: bool = True
    swacc: bool = False

    @property
    def read_side_effect(self) -> str:
        """Why reading this field changes the device (``""``: a read only looks).

        RDL ``onread`` (``rclr``, ``rset``, ``ruser``) changes the field itself; ``swacc``
        on a field software can read tells the RTL of each read, which acts on it.
        """
        if "r" not in self.sw:
            return ""
        if self.onread:
            return f"onread={self.onread}"
        if self.swacc:
            return "swacc"
        return ""

    @property
    def volatile(self) -> bool:
        """True when hardware can change the field's value."""
        return "w" in self.hw

    @property
    def msb(self) -> int:
        return self.lsb + self.width - 1

    @property
    def mask(self) -> int:
        """Mask of the field's bits in the register."""
        return ((1 << self.width) - 1) << self.lsb

    def extract(self, reg_value: int) -> int:
        """Return this field's value from a whole-register value."""
        return (reg_value >> self.lsb) & ((1 << self.width) - 1)

    def insert(self, reg_value: int, value: int) -> int:
        """Return `reg_value` with this field replaced by `value` (which must fit)."""
        if not 0 <= value < (1 << self.width):
            raise ValueError(f"value {value:#x} does not fit field {self.name} ({self.width} bits)")
        return (reg_value & ~self.mask) | (value << self.lsb)


@dataclass(frozen=True)
class RegisterInfo:
    """One register: where it is and what it holds.

    Attributes:
        name: Register name as in the RDL (upper case).
        offset: Byte offset from the start of its block.
        width: Register width in bits (32 for every register of this NPU).
        fields: The register's fields, ordered by `lsb`.
        desc: Human description from the RDL.
    """

    name: str
    offset: int
    width: int
    fields: tuple[FieldInfo, ...]
    desc: str = ""

    @property
    def reset(self) -> int:
        """Reset value of the whole register (unused bits read as 0)."""
        value = 0
        for f in self.fields:
            value |= f.reset << f.lsb
        return value

    @property
    def readable(self) -> bool:
        return any("r" in f.sw for f in self.fields)

    @property
    def read_side_effect(self) -> str:
        """Why reading this register changes the device, as ``FIELD: kind`` (``""``: a
        read only looks). See `FieldInfo.read_side_effect`."""
        return ", ".join(
            f"{f.name}: {f.read_side_effect}" for f in self.fields if f.read_side_effect
        )

    @property
    def writable(self) -> bool:
        return any("w" in f.sw for f in self.fields)

    def field(self, name: str) -> FieldInfo:
        """Return the field called `name` (case-insensitive); KeyError names the register."""
        for f in self.fields:
            if f.name == name.upper():
                return f
        known = ", ".join(f.name for f in self.fields)
        raise KeyError(f"register {self.name} has no field {name!r} (fields: {known})")


@dataclass(frozen=True)
class RegisterPair:
    """A 64-bit quantity in two 32-bit registers: ``NAME_LO`` (bits 31:0) at `offset` and
    ``NAME_HI`` (bits 63:32) right above it, as the RDL lays out every 64-bit address and
    counter of this NPU. A driver on a 32-bit bus reads and writes such a pair LO then HI
    (Linux's ``lo_hi_readq``/``lo_hi_writeq``); the counters latch HI when LO is read, so
    LO then HI is one consistent value.

    Attributes:
        name: The pair's name: the registers' without ``_LO``/``_HI`` (``CYCLES``).
        lo: The low register.
        hi: The high register.
    """

    name: str
    lo: RegisterInfo
    hi: RegisterInfo

    @property
    def offset(self) -> int:
        """Byte offset of the low register."""
        return self.lo.offset

    @property
    def width(self) -> int:
        return 64

    @property
    def readable(self) -> bool:
        return self.lo.readable and self.hi.readable

    @property
    def writable(self) -> bool:
        return self.lo.writable and self.hi.writable


def _pairs(registers: tuple[RegisterInfo, ...]) -> dict[str, RegisterPair]:
    by_offset = {r.offset: r for r in registers}
    out = {}
    for lo in registers:
        hi = by_offset.get(lo.offset + 4)
        name = lo.name.removesuffix("_LO")
        if name != lo.name and hi is not None and hi.name == f"{name}_HI":
            out[name] = RegisterPair(name, lo, hi)
    return out


@dataclass(frozen=True)
class RegisterBlockInfo:
    """A CSR block (an RDL addrmap): its registers and its size in bytes.

    Attributes:
        name: Block name (``"npu"``, ``"dma"``).
        size: Bytes of address space the block decodes.
        registers: Registers ordered by offset.
        desc: Human description from the RDL.
    """

    name: str
    size: int
    registers: tuple[RegisterInfo, ...]
    desc: str = ""
    _by_name: Mapping[str, RegisterInfo] = field(init=False, repr=False, compare=False)
    _by_offset: Mapping[int, RegisterInfo] = field(init=False, repr=False, compare=False)
    _pairs: Mapping[str, RegisterPair] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_name", {r.name: r for r in self.registers})
        object.__setattr__(self, "_by_offset", {r.offset: r for r in self.registers})
        object.__setattr__(self, "_pairs", _pairs(self.registers))

    @property
    def pairs(self) -> Mapping[str, RegisterPair]:
        """The block's 64-bit LO/HI register pairs by name (`RegisterPair`), in offset
        order: every ``X_LO`` with an ``X_HI`` 4 bytes above it."""
        return self._pairs

    def pair_at(self, offset: int) -> RegisterPair | None:
        """The pair whose low register is at byte `offset`, or None."""
        reg = self._by_offset.get(offset)
        if reg is None:
            return None
        return self._pairs.get(reg.name.removesuffix("_LO")) if reg.name.endswith("_LO") else None

    def __iter__(self) -> Iterator[RegisterInfo]:
        return iter(self.registers)

    def __len__(self) -> int:
        return len(self.registers)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.upper() in self._by_name

    def register(self, name: str) -> RegisterInfo:
        """Return the register called `name` (case-insensitive); KeyError lists the block."""
        try:
            return self._by_name[name.upper()]
        except KeyError:
            raise KeyError(f"block {self.name} has no register {name!r}") from None

    def at(self, offset: int) -> RegisterInfo | None:
        """Return the register at byte `offset`, or None."""
        return self._by_offset.get(offset)

    def offset(self, name: str) -> int:
        """Byte offset of the register called `name` (KeyError lists the block)."""
        return self.register(name).offset

    @property
    def offsets(self) -> Mapping[str, int]:
        """Register name -> byte offset, for every register of the block."""
        return {name: reg.offset for name, reg in self._by_name.items()}
