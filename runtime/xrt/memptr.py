"""Memory pointers (the manual's ``MemPtr``).

A `MemPtr` says where bytes are. It has one of three kinds (the manual's ``PtrType``):

- `PtrKind.CPTR`: a host ("C") pointer: a host buffer and an offset into it. Python has no
  raw pointers, so the pointer keeps the buffer (bytes, bytearray, numpy array, mmap...)
  alive and can never dangle; its `host_address` is the real virtual address of the byte.
- `PtrKind.ADDR`: a physical address on the device's bus, with no host mapping.
- `PtrKind.BOTH`: a physical address whose bytes the host can also reach through a buffer
  (host-visible memory such as the ``udma`` region or a shared-memory file).

`MemPtr.null()` (also ``MemPtr()``) is the null pointer, and only it is null: physical
address 0 is a valid, non-null address.

Arithmetic: ``ptr + n`` and ``ptr - n`` move every coordinate the pointer has by `n` bytes
(a host part may not leave its buffer; one past the end is allowed, as in C); ``p - q``
is the byte distance between two pointers of the same space.

Comparison and hashing: pointers that carry a physical address (ADDR, BOTH) are compared
by that address, so ``MemPtr(0x1000) == region_chunk.begin`` holds for a BOTH chunk at
0x1000. Host-only pointers (CPTR, and null at host address 0) are compared by host address.
Pointers of the two spaces are never equal, and ordering or subtracting them raises
XrtError 11010.
"""

from __future__ import annotations

from enum import IntEnum
from typing import overload

import numpy as np

from xrt._checks import ADDR_LIMIT, BufferLike, as_int, byte_view
from xrt.accessor import AccessorInt
from xrt.errors import ErrorCode, XrtError

__all__ = ["MemPtr", "PtrKind"]


class PtrKind(IntEnum):
    """Kind of a `MemPtr` (values as the manual's ``PtrType``)."""

    CPTR = 0
    """Host pointer: a buffer and an offset."""
    ADDR = 1
    """Physical address only."""
    BOTH = 2
    """Physical address and a host mapping of it."""


def _buffer_address(buf: memoryview) -> int:
    """Virtual address of ``buf[0]``."""
    return int(np.frombuffer(buf, dtype=np.uint8).__array_interface__["data"][0])


class MemPtr:
    """A pointer to device or host memory; immutable, hashable.

    ``MemPtr(addr)`` makes an ADDR pointer, ``MemPtr(buffer)`` a CPTR pointer to the start
    of `buffer`, ``MemPtr(buffer, addr)`` a BOTH pointer, ``MemPtr()`` the null pointer.
    `offset` moves the host part into the buffer.

    Args:
        cptr: A host buffer (anything with the buffer protocol), or an int taken as `addr`
            when `addr` is not given (the manual's ``MemPtr(addr)``).
        addr: Physical address of the pointed-to byte, 0 <= addr < 2**64.
        offset: Byte offset of the pointer into `cptr` (0 <= offset <= len(cptr)); for a
            BOTH pointer, ``cptr[offset]`` is the host view of physical address `addr`.

    Raises:
        XrtError: 11010 for wrong types, 11003 for an address or offset out of range.
    """

    __slots__ = ("_addr", "_buf", "_haddr", "_kind", "_off")

    _kind: PtrKind
    _addr: int | None
    _buf: memoryview | None
    _off: int
    _haddr: int  # host address of _buf[0]; -1 until computed

    @overload
    def __init__(self) -> None: ...
    @overload
    def __init__(self, cptr: int) -> None: ...
    @overload
    def __init__(self, cptr: BufferLike, addr: int | None = None, offset: int = 0) -> None: ...
    @overload
    def __init__(self, *, addr: int) -> None: ...

    def __init__(
        self,
        cptr: BufferLike | int | None = None,
        addr: int | None = None,
        offset: int = 0,
    ) -> None:
        if isinstance(cptr, int | np.integer) and not isinstance(cptr, bool) and addr is None:
            cptr, addr = None, int(cptr)
        buf = None
        if cptr is not None:
            # A pointer never points at a copy: the buffer must be contiguous as it is.
            writable = not _is_readonly(cptr)
            buf = byte_view(cptr, writable=writable, what="MemPtr buffer", copy_ok=False)
        off = as_int(offset, "MemPtr offset")
        if addr is not None:
            addr = as_int(addr, "MemPtr address")
            if not 0 <= addr < ADDR_LIMIT:
                raise XrtError(
                    ErrorCode.OUT_OF_RANGE, f"physical address {addr:#x} is not a 64-bit address"
                )
        if buf is None:
            if off != 0:
                raise XrtError(ErrorCode.OUT_OF_RANGE, "offset needs a host buffer")
            kind = PtrKind.CPTR if addr is None else PtrKind.ADDR
        else:
            if not 0 <= off <= len(buf):
                raise XrtError(
                    ErrorCode.OUT_OF_RANGE,
                    f"offset {off} is outside the {len(buf)}-byte buffer",
                )
            kind = PtrKind.CPTR if addr is None else PtrKind.BOTH
        self._kind = kind
        self._addr = addr
        self._buf = buf
        self._off = off
        self._haddr = -1

    @classmethod
    def null(cls) -> MemPtr:
        """The null pointer (the manual's ``MemPtr::NullPtr()``)."""
        return _NULL

    @classmethod
    def _make(
        cls,
        kind: PtrKind,
        addr: int | None,
        buf: memoryview | None,
        off: int = 0,
        haddr: int = -1,
    ) -> MemPtr:
        # Unchecked constructor for the runtime's own hot paths (arguments already valid).
        p = object.__new__(cls)
        p._kind = kind
        p._addr = addr
        p._buf = buf
        p._off = off
        p._haddr = haddr
        return p

    # -- what the pointer is ---------------------------------------------------------------

    @property
    def kind(self) -> PtrKind:
        """CPTR, ADDR or BOTH (the manual's ``ptype()``); the null pointer is a CPTR."""
        return self._kind

    @property
    def is_null(self) -> bool:
        """True only for the null pointer."""
        return self._buf is None and self._addr is None

    @property
    def has_addr(self) -> bool:
        """True for ADDR and BOTH pointers."""
        return self._addr is not None

    @property
    def has_host(self) -> bool:
        """True for CPTR (non-null) and BOTH pointers."""
        return self._buf is not None

    @property
    def addr(self) -> AccessorInt:
        """The physical address (``ptr.addr()`` too, the manual's form); XrtError 11010 for
        host-only and null pointers."""
        if self._addr is None:
            raise XrtError(ErrorCode.WRONG_TYPE, f"{self!r} has no physical address")
        return AccessorInt(self._addr)

    @property
    def buffer(self) -> memoryview:
        """The whole host buffer the pointer points into (flat bytes); 11010 if none."""
        if self._buf is None:
            raise XrtError(ErrorCode.WRONG_TYPE, f"{self!r} has no host buffer")
        return self._buf

    @property
    def offset(self) -> AccessorInt:
        """Offset of the pointer into its host buffer (0 when there is none)."""
        return AccessorInt(self._off)

    def cptr(self) -> memoryview:
        """The host bytes from the pointer to the end of its buffer (the manual's ``cptr()``).

        A method, as in the manual (a property until 0.1: ``ptr.cptr[...]`` is now
        ``ptr.cptr()[...]``); `host_bytes` gives a bounded view.

        Raises:
            XrtError: 11010 for ADDR and null pointers; 11003 when the pointer was moved
                outside its buffer.
        """
        buf = self.buffer
        if not 0 <= self._off <= len(buf):
            raise XrtError(
                ErrorCode.OUT_OF_RANGE,
                f"{self!r} points outside its {len(buf)}-byte host buffer",
            )
        return buf[self._off :]

    @property
    def host_address(self) -> int:
        """Virtual address of the pointed-to host byte (0 for null); 11010 for ADDR."""
        if self._buf is None:
            if self._addr is None:
                return 0
            raise XrtError(ErrorCode.WRONG_TYPE, f"{self!r} has no host address")
        if self._haddr < 0:
            self._haddr = _buffer_address(self._buf)
        return self._haddr + self._off

    def host_bytes(self, nbytes: int) -> memoryview:
        """The `nbytes` host bytes at the pointer; XrtError 11003 past the buffer's end."""
        buf = self.buffer
        if not (self._off >= 0 and 0 <= nbytes <= len(buf) - self._off):
            raise XrtError(
                ErrorCode.OUT_OF_RANGE,
                f"{nbytes} bytes at {self!r} run past the end of its {len(buf)}-byte buffer",
            )
        return buf[self._off : self._off + nbytes]

    # -- arithmetic ------------------------------------------------------------------------

    def _moved(self, delta: int) -> MemPtr:
        if self.is_null:
            raise XrtError(ErrorCode.WRONG_TYPE, "pointer arithmetic on the null MemPtr")
        addr = self._addr
        if addr is not None:
            addr += delta
            if not 0 <= addr < ADDR_LIMIT:
                raise XrtError(
                    ErrorCode.OUT_OF_RANGE,
                    f"{self!r} moved by {delta} leaves the 64-bit address space",
                )
        # Like a C pointer (the manual moves an 8-byte buffer's pointer by 40), a host
        # pointer may point outside its buffer; only reaching bytes through it is checked.
        off = self._off + delta if self._buf is not None else self._off
        return MemPtr._make(self._kind, addr, self._buf, off, self._haddr)

    def __add__(self, other: object) -> MemPtr:
        if isinstance(other, bool) or not isinstance(other, int | np.integer):
            return NotImplemented
        return self._moved(int(other))

    __radd__ = __add__

    @overload
    def __sub__(self, other: int) -> MemPtr: ...
    @overload
    def __sub__(self, other: MemPtr) -> int: ...

    def __sub__(self, other: object) -> MemPtr | int:
        if isinstance(other, MemPtr):
            if self.is_null or other.is_null:
                raise XrtError(ErrorCode.WRONG_TYPE, "pointer arithmetic on the null MemPtr")
            if self._space() != other._space():
                raise XrtError(
                    ErrorCode.WRONG_TYPE,
                    f"cannot subtract {other!r} from {self!r}: one is physical, one host-only",
                )
            return self._position() - other._position()
        if isinstance(other, bool) or not isinstance(other, int | np.integer):
            return NotImplemented
        return self._moved(-int(other))

    # -- comparison ------------------------------------------------------------------------

    def _space(self) -> int:
        return 1 if self._addr is not None else 0

    def _position(self) -> int:
        return self._addr if self._addr is not None else self.host_address

    def _ordered_with(self, other: MemPtr) -> tuple[int, int]:
        if self._space() != other._space():
            raise XrtError(
                ErrorCode.WRONG_TYPE,
                f"cannot order {self!r} and {other!r}: one is physical, one host-only",
            )
        return self._position(), other._position()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MemPtr):
            return NotImplemented
        return self._space() == other._space() and self._position() == other._position()

    def __hash__(self) -> int:
        return hash((self._space(), self._position()))

    def __lt__(self, other: MemPtr) -> bool:
        if not isinstance(other, MemPtr):
            return NotImplemented
        a, b = self._ordered_with(other)
        return a < b

    def __le__(self, other: MemPtr) -> bool:
        if not isinstance(other, MemPtr):
            return NotImplemented
        a, b = self._ordered_with(other)
        return a <= b

    def __gt__(self, other: MemPtr) -> bool:
        if not isinstance(other, MemPtr):
            return NotImplemented
        a, b = self._ordered_with(other)
        return a > b

    def __ge__(self, other: MemPtr) -> bool:
        if not isinstance(other, MemPtr):
            return NotImplemented
        a, b = self._ordered_with(other)
        return a >= b

    def __bool__(self) -> bool:
        """False only for the null pointer, as in C."""
        return not self.is_null

    def __repr__(self) -> str:
        if self.is_null:
            return "MemPtr(null)"
        parts = []
        if self._addr is not None:
            parts.append(f"addr={self._addr:#x}")
        if self._buf is not None:
            parts.append(f"cptr={self.host_address:#x} (+{self._off} in {len(self._buf)} B buffer)")
        return f"MemPtr({', '.join(parts)})"


def _is_readonly(obj: object) -> bool:
    if isinstance(obj, np.ndarray):
        return not obj.flags.writeable
    try:
        return memoryview(obj).readonly  # type: ignore[arg-type]
    except TypeError:
        return True


_NULL = MemPtr._make(PtrKind.CPTR, None, None)
