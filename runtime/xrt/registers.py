"""Register regions (the manual's ``RegRegion``), batches of register operations, and named
access through a generated register map.

A `RegRegion` is a block of 32-bit registers at physical addresses ``[base, base + size)``.
Addresses are absolute (``base + offset``) unless ``relative=True``; they must be 4-byte
aligned and inside the region, and values must fit 32 bits. The public methods check all
that once and then call the transport's hooks, all with absolute, checked addresses:

=====================================  =========================================================
hook                                   contract
=====================================  =========================================================
``_read32(addr) -> int``               one 32-bit bus read (required)
``_write32(addr, value)``              one 32-bit bus write (required)
``_batch(ops) -> list[int | None]``    run the checked ops in order, one result per op: the
                                       value read for `RegRead` and `RegPoll`, None for writes.
                                       A `RegPoll` whose condition never holds raises XrtError
                                       11015. Checked polls always carry `max_polls` or
                                       `timeout_s` (wall-clock seconds). Optional: the default
                                       loops over the ops with `_read32`/`_write32`; a remote
                                       transport overrides it to make one round trip
                                       (server-side read-modify-write and poll-until), and must
                                       then make each masked write atomic itself.
``_close()``                           release transport resources (optional)
=====================================  =========================================================

Batches: `RegRegion.execute` runs a list of `RegRead`, `RegWrite`, `RegMaskedWrite` and
`RegPoll` ops; `RegRegion.batch` builds one with names and fields::

    with npu.batch() as b:
        b.write(npu.regs.SCRATCH, 0x1234)
        b.modify("INT_ENABLE", SW=1)
        status = b.read("STATUS")
    print(b.results[status])

Named access (when a `RegisterBlockInfo` is attached)::

    npu.regs.SCRATCH.write(5)
    npu.regs.CTRL.modify(SW_IRQ=1)      # read-modify-write of the named fields only
    npu.regs.INT_STATUS.SW.write(1)     # field write (w1c: clears the bit, touches nothing else)
    npu.regs.STATUS.DMA_BUSY.read()
    dma.regs.STATUS.poll(DONE=1, timeout_s=2.0)

Field writes are read-modify-writes that know each field's access: plain read/write
fields not named keep their value; write-1-to-clear/set/toggle and single-pulse fields not
named are written 0 (so a write never clears a pending interrupt bit or fires a pulse by
accident); write-0-to-clear/set/toggle fields not named are written 1; read-only fields
are written 0 (ignored by hardware). When no field needs preserving the write is a plain
write with no read. A register with a write-only storage field, or a field that any write
changes (``wclr``/``wset``), refuses a partial modify: name those fields too.
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

from xrt._checks import as_bool, as_int, as_seconds, as_size, hex_range
from xrt.errors import ErrorCode, XrtError
from xrt.hw.regmap import FieldInfo, RegisterBlockInfo, RegisterInfo
from xrt.hw.regops import MASK32, RegMaskedWrite, RegOp, RegPoll, RegRead, RegWrite
from xrt.regtrace import env_trace_log

if TYPE_CHECKING:
    from xrt.device import Device

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
    "RegisterView",
]

DEFAULT_POLL_TIMEOUT_S = 1.0
"""Wall-clock limit of a poll that names neither `max_polls` nor `timeout_s`."""


class _UnknownNameError(XrtError, AttributeError):
    """An unknown register or field name (an XrtError 11010 that is also an AttributeError,
    so ``hasattr`` and ``getattr(..., default)`` work)."""


def _as_u32(value: object, what: str) -> int:
    v = as_int(value, what)
    if not 0 <= v <= MASK32:
        raise XrtError(ErrorCode.OUT_OF_RANGE, f"{what} {v:#x} does not fit 32 bits")
    return v


class RegRegion(ABC):
    """A block of 32-bit registers at ``[base, base + size)`` (the manual's ``RegRegion``).

    Args:
        name: Region name (``"npu"``, ``"dma"``).
        base: Physical address of the first register (4-byte aligned).
        size: Bytes of address space (a multiple of 4); default: the register map's size.
        regmap: Register map for named access (`regs`); may be attached later.

    Raises:
        XrtError: 11003 for a misaligned base or size, or a map larger than the region.
    """

    def __init__(
        self,
        name: str,
        base: int,
        size: int | None = None,
        *,
        regmap: RegisterBlockInfo | None = None,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise XrtError(ErrorCode.WRONG_TYPE, f"region name must be a non-empty str: {name!r}")
        self._name = name
        self._base = as_size(base, "region base")
        if size is None:
            if regmap is None:
                raise XrtError(
                    ErrorCode.OUT_OF_RANGE, f"register region {name!r} needs a size or a map"
                )
            size = (regmap.size + 3) & ~3
        self._size = as_size(size, "region size")
        if self._base % 4 or self._size % 4:
            raise XrtError(
                ErrorCode.OUT_OF_RANGE,
                f"register region {name!r} {hex_range(self._base, self._size)} is not 4-byte "
                f"aligned",
            )
        if self._base + self._size > 1 << 64:
            raise XrtError(ErrorCode.OUT_OF_RANGE, f"register region {name!r} exceeds 64 bits")
        self._device: Device | None = None
        self._closed = False
        # One bus access at a time through this region object, so that the default
        # read-modify-write of a masked write is atomic against other threads' accesses.
        self._bus = threading.RLock()
        self._regmap: RegisterBlockInfo | None = None
        self._regs: RegisterFile | None = None
        if regmap is not None:
            self.attach_regmap(regmap)

    # -- transport hooks -------------------------------------------------------------------

    @abstractmethod
    def _read32(self, addr: int) -> int:
        """One 32-bit read at absolute, aligned, in-range `addr`."""

    @abstractmethod
    def _write32(self, addr: int, value: int) -> None:
        """One 32-bit write of `value` (0 <= value < 2**32) at a checked `addr`."""

    def _batch(self, ops: Sequence[RegOp]) -> list[int | None]:
        """Run checked ops in order (see the module docstring); default: one by one."""
        results: list[int | None] = []
        for op in ops:
            if type(op) is RegRead:
                with self._bus:
                    results.append(self._read32(op.addr))
            elif type(op) is RegWrite:
                with self._bus:
                    self._write32(op.addr, op.value)
                results.append(None)
            elif type(op) is RegMaskedWrite:
                with self._bus:  # no other access through this region between read and write
                    old = self._read32(op.addr)
                    self._write32(op.addr, (old & ~op.mask) | (op.value & op.mask))
                results.append(None)
            elif type(op) is RegPoll:
                results.append(self._poll_loop(op, len(results)))
            else:  # pragma: no cover - execute() only passes the four op types
                raise XrtError(ErrorCode.WRONG_TYPE, f"unknown register op {op!r}")
        return results

    def _close(self) -> None:  # noqa: B027 - optional hook, empty by design
        """Release transport resources when the device closes."""

    def _poll_loop(self, op: RegPoll, index: int = 0) -> int:
        """The reference poll-until (for transports that run polls locally)."""
        start = time.monotonic()
        timeout = op.timeout_s
        if op.max_polls is None and timeout is None:
            timeout = DEFAULT_POLL_TIMEOUT_S
        polls = 0
        while True:
            with self._bus:
                value = self._read32(op.addr)
            polls += 1
            if value & op.mask == op.expected:
                return value
            elapsed = time.monotonic() - start
            if (op.max_polls is not None and polls >= op.max_polls) or (
                timeout is not None and elapsed >= timeout
            ):
                raise XrtError(
                    ErrorCode.TIMEOUT,
                    f"poll (op {index}) of {op.addr:#x} in region {self._name!r} for "
                    f"value & {op.mask:#x} == {op.expected:#x} gave up after {polls} reads in "
                    f"{elapsed:.3f} s; last value {value:#x}",
                )
            if op.interval_s > 0:
                time.sleep(op.interval_s)

    # -- what it is ------------------------------------------------------------------------

    @property
    def name(self) -> str:
        """Region name."""
        return self._name

    @property
    def base(self) -> int:
        """Physical address of the first register."""
        return self._base

    @property
    def size(self) -> int:
        """Bytes of address space."""
        return self._size

    @property
    def end(self) -> int:
        """Physical address one past the region."""
        return self._base + self._size

    @property
    def device(self) -> Device | None:
        """The device the region belongs to (None for a free-standing region)."""
        return self._device

    @property
    def closed(self) -> bool:
        """True once the region's device has been closed."""
        return self._closed

    @property
    def regmap(self) -> RegisterBlockInfo | None:
        """The attached register map, or None."""
        return self._regmap

    def attach_regmap(self, regmap: RegisterBlockInfo) -> None:
        """Attach a register map for named access through `regs`.

        Raises:
            XrtError: 11010 when `regmap` is no RegisterBlockInfo, 11003 when it does not fit.
        """
        if not isinstance(regmap, RegisterBlockInfo):
            raise XrtError(
                ErrorCode.WRONG_TYPE,
                f"regmap must be a RegisterBlockInfo, got {type(regmap).__name__}",
            )
        for reg in regmap:
            if reg.offset % 4 or reg.offset + 4 > self._size or reg.width != 32:
                raise XrtError(
                    ErrorCode.OUT_OF_RANGE,
                    f"register {regmap.name}.{reg.name} (offset {reg.offset:#x}, "
                    f"{reg.width} bits) does not fit region {self._name!r} of {self._size:#x} B",
                )
        self._regmap = regmap
        self._regs = RegisterFile(self, regmap)

    @property
    def regs(self) -> RegisterFile:
        """Named registers (``region.regs.CTRL``).

        Raises:
            XrtError: 11012 when no register map is attached.
        """
        if self._regs is None:
            raise XrtError(
                ErrorCode.WRONG_ORDER,
                f"register region {self._name!r} has no register map: attach_regmap() first",
            )
        return self._regs

    def __repr__(self) -> str:
        mapped = f" map={self._regmap.name!r}" if self._regmap is not None else ""
        closed = " closed" if self._closed else ""
        return (
            f"<{type(self).__name__} {self._name!r} "
            f"{hex_range(self._base, self._size)}{mapped}{closed}>"
        )

    # -- checks ----------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise XrtError(
                ErrorCode.WRONG_ORDER, f"region {self._name!r} is closed (its device was closed)"
            )

    def _addr(self, addr: object, relative: bool) -> int:
        a = as_int(addr, "register address")
        absolute = self._base + a if as_bool(relative, "relative") else a
        if absolute % 4:
            raise XrtError(
                ErrorCode.OUT_OF_RANGE,
                f"register address {absolute:#x} in region {self._name!r} is not 4-byte aligned",
            )
        if not self._base <= absolute < self._base + self._size:
            kind = "offset" if relative else "address"
            raise XrtError(
                ErrorCode.OUT_OF_RANGE,
                f"register {kind} {a:#x} is outside region {self._name!r} "
                f"{hex_range(self._base, self._size)}",
            )
        return absolute

    def _checked(self, op: object, relative: bool) -> RegOp:
        if isinstance(op, RegRead):
            return RegRead(self._addr(op.addr, relative))
        if isinstance(op, RegWrite):
            return RegWrite(self._addr(op.addr, relative), _as_u32(op.value, "register value"))
        if isinstance(op, RegMaskedWrite):
            return RegMaskedWrite(
                self._addr(op.addr, relative),
                _as_u32(op.value, "register value"),
                _as_u32(op.mask, "register mask"),
            )
        if isinstance(op, RegPoll):
            mask = _as_u32(op.mask, "poll mask")
            expected = _as_u32(op.expected, "poll expected value")
            if expected & ~mask:
                raise XrtError(
                    ErrorCode.OUT_OF_RANGE,
                    f"poll expects {expected:#x} under mask {mask:#x}: bits outside the mask "
                    f"can never match",
                )
            max_polls = None
            if op.max_polls is not None:
                max_polls = as_int(op.max_polls, "max_polls")
                if max_polls < 1:
                    raise XrtError(ErrorCode.OUT_OF_RANGE, f"max_polls must be >= 1: {max_polls}")
            timeout = None
            if op.timeout_s is not None:
                timeout = _seconds(op.timeout_s, "timeout_s")
            if max_polls is None and timeout is None:
                timeout = DEFAULT_POLL_TIMEOUT_S
            return RegPoll(
                self._addr(op.addr, relative),
                mask,
                expected,
                max_polls,
                timeout,
                _seconds(op.interval_s, "interval_s"),
            )
        raise XrtError(
            ErrorCode.WRONG_TYPE,
            f"register ops are RegRead, RegWrite, RegMaskedWrite or RegPoll, got {op!r}",
        )

    # -- trace (XRT_TRACE_REGISTERS) -------------------------------------------------------

    def _trace(self, ops: Sequence[RegOp], results: Sequence[int | None]) -> None:
        log = env_trace_log()
        if log is None:
            return
        device = self._device
        cycle = getattr(device, "cycles", None) if device is not None else None
        dev_name = str(getattr(device, "name", "") or "-")
        for op, res in zip(ops, results, strict=False):
            reg = self._regmap.at(op.addr - self._base) if self._regmap is not None else None
            name = f"{self._name}.{reg.name}" if reg else f"{self._name}+{op.addr - self._base:#x}"
            kind = {RegRead: "read", RegWrite: "write", RegMaskedWrite: "rmw"}.get(type(op), "poll")
            value = res if res is not None else getattr(op, "value", None)
            log.record(dev_name, kind, op.addr, value, cycle, name=name)

    # -- access ----------------------------------------------------------------------------

    def read(self, addr: int, relative: bool = False) -> int:
        """Read the 32-bit register at `addr` (absolute, or an offset if `relative`).

        Raises:
            XrtError: 11003 for a misaligned or out-of-range address, 11010 for wrong types,
                11012 after the device was closed.
        """
        self._check_open()
        a = self._addr(addr, relative)
        with self._bus:
            value = self._read32(a)
        if type(value) is not int or not 0 <= value <= MASK32:
            raise XrtError(
                ErrorCode.DEVICE_INTERNAL,
                f"transport of region {self._name!r} returned {value!r} for a 32-bit read",
            )
        self._trace((RegRead(a),), (value,))
        return value

    def write(self, addr: int, value: int, relative: bool = False) -> None:
        """Write `value` (0 <= value < 2**32) to the register at `addr`.

        Raises:
            XrtError: 11003 for a bad address or a value that does not fit 32 bits, 11010 for
                wrong types, 11012 after the device was closed.
        """
        self._check_open()
        a = self._addr(addr, relative)
        v = _as_u32(value, "register value")
        with self._bus:
            self._write32(a, v)
        self._trace((RegWrite(a, v),), (None,))

    def write_masked(self, addr: int, value: int, mask: int, relative: bool = False) -> None:
        """Read-modify-write the bits in `mask` (one `RegMaskedWrite`, one round trip)."""
        self.execute([RegMaskedWrite(addr, value, mask)], relative=relative)

    def poll(
        self,
        addr: int,
        mask: int,
        expected: int,
        *,
        max_polls: int | None = None,
        timeout_s: float | None = None,
        interval_s: float = 0.0,
        relative: bool = False,
    ) -> int:
        """Read `addr` until ``value & mask == expected`` and return that value.

        Raises:
            XrtError: 11015 when the condition does not hold within the limits (see `RegPoll`).
        """
        op = RegPoll(addr, mask, expected, max_polls, timeout_s, interval_s)
        result = self.execute([op], relative=relative)[0]
        assert result is not None
        return result

    def execute(self, ops: Sequence[RegOp], relative: bool = False) -> list[int | None]:
        """Run register ops in order as one batch (one round trip on remote transports).

        Every op is checked before any runs. Returns one result per op: the value read for
        `RegRead` and `RegPoll`, None for writes.

        Raises:
            XrtError: 11003/11010 for a bad op (nothing has run then), 11015 when a poll
                gives up (the ops before it have run, the ones after it have not), 11012
                after the device was closed.
        """
        self._check_open()
        if isinstance(ops, RegRead | RegWrite | RegMaskedWrite | RegPoll) or not isinstance(
            ops, Sequence
        ):
            raise XrtError(ErrorCode.WRONG_TYPE, f"execute takes a sequence of ops, got {ops!r}")
        if relative is False:
            # Absolute reads and writes of plain ints inside the region are used as they
            # are (frozen: what `_checked` would rebuild, equal): a third of the client's
            # Python per op of a batch. Anything else is checked and worded by `_checked`.
            lo, hi = self._base, self._base + self._size
            checked = []
            append = checked.append
            for op in ops:
                kind = type(op)
                if kind is RegRead:
                    a = op.addr
                    if type(a) is int and not a & 3 and lo <= a < hi:
                        append(op)
                        continue
                elif kind is RegWrite:
                    a, v = op.addr, op.value
                    if (
                        type(a) is int
                        and not a & 3
                        and lo <= a < hi
                        and type(v) is int
                        and 0 <= v <= MASK32
                    ):
                        append(op)
                        continue
                append(self._checked(op, relative))
        else:
            checked = [self._checked(op, relative) for op in ops]
        if not checked:
            return []
        results = list(self._batch(checked))
        if len(results) != len(checked):
            raise XrtError(
                ErrorCode.DEVICE_INTERNAL,
                f"transport of region {self._name!r} returned {len(results)} results for "
                f"{len(checked)} ops",
            )
        for op, res in zip(checked, results, strict=True):
            reads = type(op) is RegRead or type(op) is RegPoll
            ok = (type(res) is int and 0 <= res <= MASK32) if reads else res is None
            if not ok:
                raise XrtError(
                    ErrorCode.DEVICE_INTERNAL,
                    f"transport of region {self._name!r} returned {res!r} for {op!r}",
                )
        self._trace(checked, results)
        return results

    def batch(self, relative: bool = False) -> RegBatch:
        """A builder for a batch of ops that runs as one `execute` (see `RegBatch`)."""
        return RegBatch(self, relative=relative)


def _seconds(value: object, what: str) -> float:
    return as_seconds(value, what)


# -- named access --------------------------------------------------------------------------

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

    def __init__(self, region: RegRegion, regmap: RegisterBlockInfo) -> None:
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
                raise _UnknownNameError(
                    ErrorCode.WRONG_TYPE,
                    f"block {self._map.name!r} has no register {name!r} (registers: {known})",
                ) from None
            view = self._views.get(info.name) or RegisterView(self._region, info)
            self._views[name] = self._views[info.name] = view
        return view

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

    def __init__(self, region: RegRegion, info: RegisterInfo) -> None:
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
    def region(self) -> RegRegion:
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
        return RegWrite(self.address, _as_u32(value, f"value of {self._info.name}"))

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


# -- batch builder -------------------------------------------------------------------------

Target: TypeAlias = int | str | RegisterView


class RegBatch:
    """Collects register ops and runs them as one `RegRegion.execute`.

    Targets are int addresses (absolute, or offsets when the batch is relative), register
    names, or `RegisterView` objects. Each method returns the index of its result in
    `results`. Used as a context manager the batch runs on a clean exit.
    """

    def __init__(self, region: RegRegion, relative: bool = False) -> None:
        self._region = region
        self._relative = relative
        self.ops: list[RegOp] = []
        self.results: list[int | None] | None = None

    def _target(self, target: object) -> int:
        if isinstance(target, RegisterView):
            reg = target
        elif isinstance(target, str):
            reg = self._region.regs.register(target)
        else:
            a = as_int(target, "register address")
            return a
        return reg.offset if self._relative else reg.address

    def _add(self, op: RegOp) -> int:
        if self.results is not None:
            raise XrtError(ErrorCode.WRONG_ORDER, "this batch has already run")
        self.ops.append(op)
        return len(self.ops) - 1

    def _view(self, target: object) -> RegisterView:
        if isinstance(target, RegisterView):
            return target
        if isinstance(target, str):
            return self._region.regs.register(target)
        raise XrtError(
            ErrorCode.WRONG_TYPE, f"field access needs a register name or view, got {target!r}"
        )

    def _rebase(self, op: RegOp) -> RegOp:
        # Views produce absolute ops; a relative batch wants offsets.
        if not self._relative:
            return op
        off = op.addr - self._region.base
        if isinstance(op, RegWrite):
            return RegWrite(off, op.value)
        if isinstance(op, RegMaskedWrite):
            return RegMaskedWrite(off, op.value, op.mask)
        if isinstance(op, RegPoll):
            return RegPoll(off, op.mask, op.expected, op.max_polls, op.timeout_s, op.interval_s)
        return RegRead(off)

    def read(self, target: Target) -> int:
        """Add a read."""
        return self._add(RegRead(self._target(target)))

    def write(self, target: Target, value: int) -> int:
        """Add a whole-register write."""
        return self._add(RegWrite(self._target(target), value))

    def write_masked(self, target: Target, value: int, mask: int) -> int:
        """Add a raw masked read-modify-write."""
        return self._add(RegMaskedWrite(self._target(target), value, mask))

    def modify(self, target: str | RegisterView, **fields: int) -> int:
        """Add a named-field modify (see `RegisterView.modify`)."""
        return self._add(self._rebase(self._view(target).op_modify(**fields)))

    def poll(
        self,
        target: Target,
        mask: int | None = None,
        expected: int | None = None,
        *,
        max_polls: int | None = None,
        timeout_s: float | None = None,
        interval_s: float = 0.0,
        **fields: int,
    ) -> int:
        """Add a poll-until, by fields (needs a named target) or by `mask`/`expected`."""
        if fields:
            op = self._view(target).op_poll(
                max_polls=max_polls, timeout_s=timeout_s, interval_s=interval_s, **fields
            )
            return self._add(self._rebase(op))
        if mask is None or expected is None:
            raise XrtError(ErrorCode.WRONG_TYPE, "poll needs fields or both mask and expected")
        return self._add(
            RegPoll(self._target(target), mask, expected, max_polls, timeout_s, interval_s)
        )

    def run(self) -> list[int | None]:
        """Run the ops (once) and return their results."""
        if self.results is not None:
            raise XrtError(ErrorCode.WRONG_ORDER, "this batch has already run")
        self.results = self._region.execute(self.ops, relative=self._relative)
        return self.results

    def __enter__(self) -> RegBatch:
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        if exc_type is None and self.results is None:
            self.run()

    def __len__(self) -> int:
        return len(self.ops)
