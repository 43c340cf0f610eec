"""Named register access through a generated register map: `RegisterFile` (``region.regs``),
`RegisterView` (one register) and `FieldView` (one field).

::

    npu.regs.SCRATCH.write(5)
    npu.regs.CTRL.modify(SW_IRQ=1)      # read-modify-write of the named fields only
    npu.regs.INT_STATUS.SW.write(1)     # field write (w1c: clears the bit, touches nothing else)
    npu.regs.STATUS.DMA_BUSY.read()
    dma.regs.STATUS.poll(DONE=1, timeout_s=2.0)
    npu.regs.pair("CYCLES").read()      # a 64-bit LO/HI pair: LO then HI, one batch

Field writes are read-modify-writes that know each field's access: plain read/write
fields not named keep their value; write-1-to-clear/set/toggle and single-pulse fields not
named are written 0 (so a write never clears a pending interrupt bit or fires a pulse by
accident); write-0-to-clear/set/toggle fields not named are written 1; read-only fields
are written 0 (ignored by hardware). When no field needs preserving the write is a plain
write with no read. A register with a write-only storage field, or a field that any write
changes (``wclr``/``wset``), refuses a partial modify: name those fields too.

The views build `xrt.hw.regops` records and run them through the region's checked
`RegRegion.execute`, `read` and `write`, so every transport gets named access for free;
`RegisterAccess` is what they ask of the region (this module sits below `RegRegion`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Protocol

from xrt._checks import as_int
from xrt.errors import ErrorCode, XrtError
from xrt.hw.regmap import FieldInfo, RegisterBlockInfo, RegisterInfo, RegisterPair
from xrt.hw.regops import MASK32, RegMaskedWrite, RegOp, RegPoll, RegRead, RegWrite
from xrt.registers._values import as_u32

__all__ = ["FieldView", "RegisterAccess", "RegisterFile", "RegisterPairView", "RegisterView"]


class RegisterAccess(Protocol):
    """What named registers ask of their register region (`RegRegion` is the one): its name
    and base, and its checked single accesses and batches."""

    @property
    def name(self) -> str: ...
    @property
    def base(self) -> int: ...
    def read(self, addr: int, relative: bool = False) -> int: ...
    def write(self, addr: int, value: int, relative: bool = False) -> None: ...
    def execute(self, ops: Sequence[RegOp], relative: bool = False) -> list[int | None]: ...


class _UnknownNameError(XrtError, AttributeError):
    """An unknown register or field name (an XrtError 11010 that is also an AttributeError,
    so ``hasattr`` and ``getattr(..., default)`` work)."""


_NEUTRAL_ZERO = {"woclr", "woset", "wot"}  # writing 0 leaves the field alone
_NEUTRAL_ONES = {"wzc", "wzs", "wzt"}  # writing 1 leaves the field alone
_ANY_WRITE = {"wclr", "wset", "wuser"}  # every write changes the field


def _preserved(f: FieldInfo) -> bool:
    """True for a plain storage field that a read-modify-write must keep."""
    return f.sw == "rw" and not f.onwrite and not f.singlepulse


class RegisterFile:
    """The registers of a region with an attached map, by name (``region.regs``).

    ``regs.CTRL`` / ``regs["ctrl"]`` give a `RegisterView`; iteration yields them in offset
    order. Unknown names raise XrtError 11010 (also an AttributeError for ``getattr``).
    """

    def __init__(self, region: RegisterAccess, regmap: RegisterBlockInfo) -> None:
        self._region = region
        self._map = regmap
        self._views: dict[str, RegisterView] = {}

    @property
    def block(self) -> RegisterBlockInfo:
        """The register map."""
        return self._map

    def register(self, name: str) -> RegisterView:
        """The register called `name` (case-insensitive)."""
        if not isinstance(name, str):
            raise XrtError(ErrorCode.WRONG_TYPE, f"register name must be a str, got {name!r}")
        view = self._views.get(name)
        if view is None:
            try:
                info = self._map.register(name)
            except KeyError:
                known = ", ".join(r.name for r in self._map)
                hint = (
                    f"; {name.upper()} is a 64-bit pair: regs.pair({name.upper()!r})"
                    if name.upper() in self._map.pairs
                    else ""
                )
                raise _UnknownNameError(
                    ErrorCode.WRONG_TYPE,
                    f"block {self._map.name!r} has no register {name!r}{hint} (registers: {known})",
                ) from None
            view = self._views.get(info.name) or RegisterView(self._region, info)
            self._views[name] = self._views[info.name] = view
        return view

    def pair(self, name: str) -> RegisterPairView:
        """The 64-bit LO/HI register pair called `name` (``"CYCLES"``: ``CYCLES_LO`` and
        ``CYCLES_HI``); XrtError 11010 lists the block's pairs."""
        info = self._map.pairs.get(name.upper()) if isinstance(name, str) else None
        if info is None:
            known = ", ".join(self._map.pairs) or "none"
            raise _UnknownNameError(
                ErrorCode.WRONG_TYPE,
                f"block {self._map.name!r} has no 64-bit register pair {name!r} (pairs: {known})",
            )
        return RegisterPairView(self._region, info)

    def __getattr__(self, name: str) -> RegisterView:
        if name.startswith("_"):
            raise AttributeError(name)
        return self.register(name)

    def __getitem__(self, name: str) -> RegisterView:
        return self.register(name)

    def __contains__(self, name: object) -> bool:
        return name in self._map

    def __iter__(self) -> Iterator[RegisterView]:
        return (self.register(r.name) for r in self._map)

    def __len__(self) -> int:
        return len(self._map)

    def __dir__(self) -> list[str]:
        return [*super().__dir__(), *(r.name for r in self._map)]

    def dump(self) -> dict[str, int]:
        """Read every readable register in one batch: ``{name: value}``."""
        regs = [r for r in self._map if r.readable]
        values = self._region.execute([RegRead(r.offset) for r in regs], relative=True)
        return {r.name: v for r, v in zip(regs, values, strict=True) if v is not None}

    def __repr__(self) -> str:
        return f"<RegisterFile {self._map.name!r} of {self._region.name!r}: {len(self)} registers>"


class RegisterView:
    """One named register of a region: read, write, field read-modify-write, poll.

    Fields are attributes too: ``view.START`` is ``view.field("START")``.
    """

    __slots__ = ("_fields", "_info", "_region")

    def __init__(self, region: RegisterAccess, info: RegisterInfo) -> None:
        self._region = region
        self._info = info
        self._fields: dict[str, FieldView] = {}

    @property
    def info(self) -> RegisterInfo:
        """The register's description from the map."""
        return self._info

    @property
    def name(self) -> str:
        return self._info.name

    @property
    def offset(self) -> int:
        """Byte offset in the block."""
        return self._info.offset

    @property
    def address(self) -> int:
        """Absolute physical address."""
        return self._region.base + self._info.offset

    @property
    def region(self) -> RegisterAccess:
        return self._region

    def field(self, name: str) -> FieldView:
        """The field called `name` (case-insensitive); XrtError 11010 lists the fields."""
        view = self._fields.get(name)
        if view is None:
            try:
                info = self._info.field(name)
            except KeyError:
                known = ", ".join(f.name for f in self._info.fields)
                raise _UnknownNameError(
                    ErrorCode.WRONG_TYPE,
                    f"register {self._info.name} has no field {name!r} (fields: {known})",
                ) from None
            view = self._fields.get(info.name) or FieldView(self, info)
            self._fields[name] = self._fields[info.name] = view
        return view

    def __getattr__(self, name: str) -> FieldView:
        if name.startswith("_"):
            raise AttributeError(name)
        return self.field(name)

    def __dir__(self) -> list[str]:
        return [*super().__dir__(), *(f.name for f in self._info.fields)]

    def __repr__(self) -> str:
        return f"<RegisterView {self._info.name} at {self.address:#x}>"

    # -- ops (for batches) -----------------------------------------------------------------

    def op_read(self) -> RegRead:
        """A `RegRead` of this register (absolute address)."""
        if not self._info.readable:
            raise XrtError(ErrorCode.WRONG_TYPE, f"register {self._info.name} is write-only")
        return RegRead(self.address)

    def op_write(self, value: int) -> RegWrite:
        """A `RegWrite` of the whole register."""
        if not self._info.writable:
            raise XrtError(ErrorCode.WRONG_TYPE, f"register {self._info.name} is read-only")
        return RegWrite(self.address, as_u32(value, f"value of {self._info.name}"))

    def op_modify(self, **fields: int) -> RegWrite | RegMaskedWrite:
        """The op that sets the named fields and leaves the others alone (see module doc)."""
        if not fields:
            raise XrtError(ErrorCode.OUT_OF_RANGE, f"modify of {self._info.name} names no field")
        named: dict[str, tuple[FieldInfo, int]] = {}
        for key, value in fields.items():
            f = self.field(key).info
            if "w" not in f.sw:
                raise XrtError(
                    ErrorCode.WRONG_TYPE, f"field {self._info.name}.{f.name} is read-only"
                )
            v = as_int(value, f"value of {self._info.name}.{f.name}")
            if not 0 <= v < 1 << f.width:
                raise XrtError(
                    ErrorCode.OUT_OF_RANGE,
                    f"value {v:#x} does not fit field {self._info.name}.{f.name} ({f.width} bits)",
                )
            named[f.name] = (f, v)
        bits = 0
        keep = 0
        for f in self._info.fields:
            if f.name in named:
                bits |= named[f.name][1] << f.lsb
            elif _preserved(f):
                keep |= f.mask
            elif f.onwrite in _NEUTRAL_ONES:
                bits |= f.mask
            elif f.onwrite in _ANY_WRITE or (
                f.sw == "w" and not f.singlepulse and f.onwrite not in _NEUTRAL_ZERO
            ):
                raise XrtError(
                    ErrorCode.WRONG_TYPE,
                    f"modify of {self._info.name} cannot leave field {f.name} alone "
                    f"(sw={f.sw}, onwrite={f.onwrite or 'none'}): name it too",
                )
        if not keep:
            return RegWrite(self.address, bits)
        return RegMaskedWrite(self.address, bits, ~keep & MASK32)

    def op_poll(
        self,
        *,
        mask: int | None = None,
        expected: int | None = None,
        max_polls: int | None = None,
        timeout_s: float | None = None,
        interval_s: float = 0.0,
        **fields: int,
    ) -> RegPoll:
        """A `RegPoll` of this register, by fields (``DONE=1``) or by `mask`/`expected`."""
        if fields:
            if mask is not None or expected is not None:
                raise XrtError(
                    ErrorCode.WRONG_TYPE, "poll takes either fields or mask/expected, not both"
                )
            mask = expected = 0
            for key, value in fields.items():
                f = self.field(key).info
                v = as_int(value, f"value of {self._info.name}.{f.name}")
                if not 0 <= v < 1 << f.width:
                    raise XrtError(
                        ErrorCode.OUT_OF_RANGE,
                        f"value {v:#x} does not fit field {self._info.name}.{f.name}",
                    )
                mask |= f.mask
                expected |= v << f.lsb
        elif mask is None or expected is None:
            raise XrtError(ErrorCode.WRONG_TYPE, "poll needs fields or both mask and expected")
        return RegPoll(self.address, mask, expected, max_polls, timeout_s, interval_s)

    # -- direct access ---------------------------------------------------------------------

    def read(self) -> int:
        """Read the whole register."""
        return self._region.read(self.op_read().addr)

    def write(self, value: int) -> None:
        """Write the whole register (every field, side effects included)."""
        op = self.op_write(value)
        self._region.write(op.addr, op.value)

    def modify(self, **fields: int) -> None:
        """Set the named fields, leaving the others alone (one op, one round trip)."""
        self._region.execute([self.op_modify(**fields)])

    def read_fields(self) -> dict[str, int]:
        """Read the register once and split it: ``{field name: value}``."""
        value = self.read()
        return {f.name: f.extract(value) for f in self._info.fields}

    def poll(self, **kwargs: Any) -> int:
        """Poll until the named fields (or mask/expected) match; return the register value.

        Raises:
            XrtError: 11015 when they do not match in time.
        """
        result = self._region.execute([self.op_poll(**kwargs)])[0]
        assert result is not None
        return result


class RegisterPairView:
    """A 64-bit quantity in a LO/HI pair of registers (`xrt.hw.regmap.RegisterPair`): read
    and written LO then HI in one batch, as a driver on a 32-bit bus does."""

    __slots__ = ("_info", "_region")

    def __init__(self, region: RegisterAccess, info: RegisterPair) -> None:
        self._region = region
        self._info = info

    @property
    def info(self) -> RegisterPair:
        return self._info

    @property
    def name(self) -> str:
        return self._info.name

    @property
    def address(self) -> int:
        """Absolute physical address of the low register."""
        return self._region.base + self._info.offset

    def read(self) -> int:
        """Read LO, then HI (the counters latch HI when LO is read): one 64-bit value."""
        if not self._info.readable:
            raise XrtError(ErrorCode.WRONG_TYPE, f"register pair {self._info.name} is write-only")
        lo, hi = self._region.execute([RegRead(self.address), RegRead(self.address + 4)])
        assert lo is not None and hi is not None
        return hi << 32 | lo

    def write(self, value: int) -> None:
        """Write LO, then HI.

        Raises:
            XrtError: 11003 for a value that does not fit 64 bits (naming the pair), 11010
                for a read-only pair.
        """
        if not self._info.writable:
            raise XrtError(ErrorCode.WRONG_TYPE, f"register pair {self._info.name} is read-only")
        v = as_int(value, f"value of {self._info.name}")
        if not 0 <= v < 1 << 64:
            raise XrtError(
                ErrorCode.OUT_OF_RANGE,
                f"value {v:#x} does not fit register pair {self._info.name} (64 bits)",
            )
        self._region.execute(
            [RegWrite(self.address, v & MASK32), RegWrite(self.address + 4, v >> 32)]
        )

    def __repr__(self) -> str:
        return f"<RegisterPairView {self._info.name} at {self.address:#x}>"


class FieldView:
    """One named field of a register."""

    __slots__ = ("_info", "_reg")

    def __init__(self, reg: RegisterView, info: FieldInfo) -> None:
        self._reg = reg
        self._info = info

    @property
    def info(self) -> FieldInfo:
        """The field's description from the map."""
        return self._info

    @property
    def name(self) -> str:
        return self._info.name

    @property
    def mask(self) -> int:
        return self._info.mask

    def read(self) -> int:
        """Read the register and return this field's value.

        Raises:
            XrtError: 11010 for a write-only field.
        """
        if "r" not in self._info.sw:
            raise XrtError(
                ErrorCode.WRONG_TYPE, f"field {self._reg.name}.{self._info.name} is write-only"
            )
        return self._info.extract(self._reg.read())

    def write(self, value: int) -> None:
        """Set this field, leaving the register's other fields alone (`RegisterView.modify`)."""
        self._reg.modify(**{self._info.name: value})

    def poll(self, value: int, **kwargs: Any) -> int:
        """Poll until this field equals `value`; return the register value."""
        return self._reg.poll(**{self._info.name: value}, **kwargs)

    def __repr__(self) -> str:
        f = self._info
        return f"<FieldView {self._reg.name}.{f.name} [{f.msb}:{f.lsb}] {f.sw}>"
