"""`RegRegion`: a block of 32-bit registers and its transport hooks (the manual's
``RegRegion``), with the checked single accesses, polls and batch `execute`.

A `RegRegion` is a block of 32-bit registers at physical addresses ``[base, base + size)``.
Addresses are absolute (``base + offset``) unless ``relative=True``; they must be 4-byte
aligned and inside the region, and values must fit 32 bits. The manual's ``read`` and
``write`` take and give ``uint64_t``: ``width=64`` reads or writes a 64-bit quantity as
the NPU holds one, a LO/HI pair of 32-bit registers, LO then HI in one batch (the way a
driver does ``writeq`` on a 32-bit bus); with a register map attached, only at the low
register of one of its pairs (`xrt.hw.regmap.RegisterPair`). The public methods check all
that once and then call the transport's hooks, all with absolute, checked addresses (what
every region shares lives in `xrt.region.Region`):

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

`RegRegion.execute` runs a list of `RegRead`, `RegWrite`, `RegMaskedWrite` and `RegPoll`
ops (the records of `xrt.hw.regops`); `RegRegion.batch` builds one with names and fields
(`xrt.registers.batch`); ``region.regs`` gives named access once a register map is attached
(`xrt.registers.named`). With ``XRT_TRACE_REGISTERS`` set, every access is traced
(`xrt.regtrace`).
"""

from __future__ import annotations

import threading
import time
from abc import abstractmethod
from collections.abc import Sequence

from xrt._checks import as_bool, as_int, as_seconds, hex_range
from xrt.errors import ErrorCode, XrtError
from xrt.hw.regmap import RegisterBlockInfo
from xrt.hw.regops import MASK32, RegMaskedWrite, RegOp, RegPoll, RegRead, RegWrite
from xrt.region import Region
from xrt.registers._values import as_u32
from xrt.registers.batch import RegBatch
from xrt.registers.named import RegisterFile
from xrt.regtrace import env_trace_log

__all__ = ["DEFAULT_POLL_TIMEOUT_S", "RegRegion"]

DEFAULT_POLL_TIMEOUT_S = 1.0
"""Wall-clock limit of a poll that names neither `max_polls` nor `timeout_s`."""


class RegRegion(Region):
    """A block of 32-bit registers at ``[base, base + size)`` (the manual's ``RegRegion``).

    Args:
        name: Region name (``"npu"``, ``"dma"``).
        base: Physical address of the first register (4-byte aligned).
        size: Bytes of address space (a multiple of 4); default: the register map's size.
        regmap: Register map for named access (`regs`); may be attached later.

    Raises:
        XrtError: 11003 for a misaligned base or size, or a map larger than the region.
    """

    _kind = "register region"

    def __init__(
        self,
        name: str,
        base: int,
        size: int | None = None,
        *,
        regmap: RegisterBlockInfo | None = None,
    ) -> None:
        if size is None:
            if regmap is None:
                raise XrtError(
                    ErrorCode.OUT_OF_RANGE, f"register region {name!r} needs a size or a map"
                )
            size = (regmap.size + 3) & ~3
        super().__init__(name, base, size)
        if self._base % 4 or self._size % 4:
            raise XrtError(
                ErrorCode.OUT_OF_RANGE,
                f"register region {name!r} {hex_range(self._base, self._size)} is not 4-byte "
                f"aligned",
            )
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

    # -- what it is (name, base, size, end, device, closed: see `Region`) -------------------

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

    def _repr_details(self) -> str:
        return f" map={self._regmap.name!r}" if self._regmap is not None else ""

    # -- checks ----------------------------------------------------------------------------

    def _addr(self, addr: object, relative: bool) -> int:
        """Check a register address (or offset when `relative`); return it absolute."""
        a = as_int(addr, "register address")
        absolute = self._base + a if as_bool(relative, "relative") else a
        if absolute % 4:
            raise XrtError(
                ErrorCode.OUT_OF_RANGE,
                f"register address {absolute:#x} in region {self._name!r} is not 4-byte aligned",
            )
        if not self._spans(absolute, 4):
            raise self._outside(f"register {'offset' if relative else 'address'} {a:#x}")
        return absolute

    def _checked(self, op: object, relative: bool) -> RegOp:
        if isinstance(op, RegRead):
            return RegRead(self._addr(op.addr, relative))
        if isinstance(op, RegWrite):
            a = self._addr(op.addr, relative)
            return RegWrite(a, self._value(a, op.value, 32))
        if isinstance(op, RegMaskedWrite):
            a = self._addr(op.addr, relative)
            return RegMaskedWrite(
                a,
                self._value(a, op.value, 32),
                as_u32(op.mask, "register mask"),
            )
        if isinstance(op, RegPoll):
            mask = as_u32(op.mask, "poll mask")
            expected = as_u32(op.expected, "poll expected value")
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
                timeout = as_seconds(op.timeout_s, "timeout_s")
            if max_polls is None and timeout is None:
                timeout = DEFAULT_POLL_TIMEOUT_S
            return RegPoll(
                self._addr(op.addr, relative),
                mask,
                expected,
                max_polls,
                timeout,
                as_seconds(op.interval_s, "interval_s"),
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
        cycle = device.cycles if device is not None else None
        dev_name = (device.name if device is not None else None) or "-"
        for op, res in zip(ops, results, strict=False):
            reg = self._regmap.at(op.addr - self._base) if self._regmap is not None else None
            name = f"{self._name}.{reg.name}" if reg else f"{self._name}+{op.addr - self._base:#x}"
            kind = {RegRead: "read", RegWrite: "write", RegMaskedWrite: "rmw"}.get(type(op), "poll")
            value = res if res is not None else getattr(op, "value", None)
            log.record(dev_name, kind, op.addr, value, cycle, name=name)

    # -- access ----------------------------------------------------------------------------

    def _pair(self, addr: int, relative: bool, what: str) -> int:
        """Check a 64-bit (LO/HI pair) access at `addr`; return the low register's absolute
        address."""
        a = self._addr(addr, relative)
        if not self._spans(a, 8):
            raise self._outside(f"64-bit register at {a:#x} (8 bytes)")
        if self._regmap is not None and self._regmap.pair_at(a - self._base) is None:
            reg = self._regmap.at(a - self._base)
            pairs = ", ".join(self._regmap.pairs) or "none"
            raise XrtError(
                ErrorCode.OUT_OF_RANGE,
                f"{what} of 64 bits at {a:#x}: {self._reg_name(a)} is "
                f"{'a 32-bit register' if reg else 'no register'}, not the low half of one of "
                f"{self._regmap.name}'s 64-bit registers ({pairs})",
            )
        return a

    def _reg_name(self, addr: int) -> str:
        """``npu.SCRATCH`` for a mapped register, else ``npu+0x10``."""
        reg = self._regmap.at(addr - self._base) if self._regmap is not None else None
        return f"{self._name}.{reg.name}" if reg else f"{self._name}+{addr - self._base:#x}"

    def _value(self, addr: int, value: object, width: int) -> int:
        """Check a value for the register at `addr` of `width` bits, naming it if too wide."""
        v = as_int(value, "register value")
        if not 0 <= v < 1 << width:
            pair = " (a 64-bit quantity: write(addr, value, width=64) at its _LO register)"
            raise XrtError(
                ErrorCode.OUT_OF_RANGE,
                f"register value {v:#x} does not fit {self._reg_name(addr)} ({width} bits)"
                + (pair if width == 32 and v > 0 else ""),
            )
        return v

    def _width(self, width: object) -> int:
        if width not in (32, 64) or isinstance(width, bool):
            raise XrtError(ErrorCode.OUT_OF_RANGE, f"register width must be 32 or 64: {width!r}")
        return int(width)  # type: ignore[call-overload]  # checked above

    def read(self, addr: int, relative: bool = False, *, width: int = 32) -> int:
        """Read the 32-bit register at `addr` (absolute, or an offset if `relative`); with
        ``width=64`` the LO/HI pair at `addr`, LO then HI in one batch (see the module
        docstring).

        Raises:
            XrtError: 11003 for a misaligned or out-of-range address, or a 64-bit read not
                at a pair's low register; 11010 for wrong types, 11012 after the device was
                closed.
        """
        self._check_open()
        if self._width(width) == 64:
            a = self._pair(addr, relative, "read")
            lo, hi = self.execute([RegRead(a), RegRead(a + 4)])
            assert lo is not None and hi is not None
            return hi << 32 | lo
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

    def write(self, addr: int, value: int, relative: bool = False, *, width: int = 32) -> None:
        """Write `value` (0 <= value < 2**32) to the register at `addr`; with ``width=64``
        a value below 2**64 to the LO/HI pair at `addr`, LO then HI in one batch.

        Raises:
            XrtError: 11003 for a bad address or a value wider than the register (the
                message names it), 11010 for wrong types, 11012 after the device was closed.
        """
        self._check_open()
        if self._width(width) == 64:
            a = self._pair(addr, relative, "write")
            v = self._value(a, value, 64)
            self.execute([RegWrite(a, v & MASK32), RegWrite(a + 4, v >> 32)])
            return
        a = self._addr(addr, relative)
        v = self._value(a, value, 32)
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
