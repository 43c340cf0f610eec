"""Memory regions, their chunks and their memory managers (the manual's ``MemRegion``,
``MemChunk`` and ``MemManager``).

A `MemRegion` is a named range of physical addresses ``[base, base + size)`` on a device:
device DDR, a host-visible DMA buffer, on-chip memory. Its public methods check every
argument once (types, ranges, state) and then call a few small hooks that a transport
implements, in the manner of cocotbext-axi's ``address_space.py``. The hooks, all with
absolute physical addresses that are already checked:

========================================  =====================================================
hook                                      contract
========================================  =====================================================
``_read(addr, nbytes) -> bytes-like``     return exactly `nbytes` bytes read at `addr`
                                          (required)
``_write(addr, data: memoryview)``        write all of `data` (flat bytes) at `addr` (required)
``_host_map() -> memoryview | None``      a writable flat byte view of the whole region when
                                          the host can reach it directly (host memory, an mmap,
                                          a shared-memory file); None otherwise (default).
                                          Called once; the view must stay valid while the
                                          region is open. When given, the region's reads,
                                          writes and copies use it instead of _read/_write,
                                          and chunks get BOTH pointers and zero-copy views.
``_memcpy(dst, src, nbytes)``             copy inside the region with memmove semantics
                                          (optional; default through the host in pieces)
``_memcpy_from(dst, src_region, src,      copy from another region with physical addresses
nbytes)``                                 (optional; default through the host in pieces; a
                                          transport may do it on the device, e.g. by DMA)
``_close()``                              release transport resources (optional)
========================================  =====================================================

Every region has a `MemManager` (``region.mem_manager``) that allocates chunks and answers
questions about them (`MemManager.all_chunks`, `MemManager.get_chunk`, used and free
bytes, the largest free block). Device regions use a best-fit allocator with coalescing
(`xrt._allocator`, whose docstring gives the complexity); the host region lets the OS
allocate and keeps the same bookkeeping.

`MemChunk` objects are made only by `MemRegion.malloc`. A chunk allocated with
``auto_free=True`` (the default) is freed when its last reference goes, so chunks can be
shared (two tensors over one chunk free it when both are gone); ``auto_free=False`` chunks
stay allocated, and listed by their manager, until freed explicitly.

Thread safety: allocation, freeing and introspection hold the manager's lock. A chunk
freed automatically from a finalizer that runs while its manager is busy (another thread,
or the garbage collector inside an allocation) is queued and released by the next manager
operation; introspection always drains that queue first, so it never reports a dead chunk.
Reads and writes take no lock: concurrent access to the same bytes is the caller's business,
as in C.
"""

from __future__ import annotations

import os
import threading
import warnings
import weakref
from abc import ABC, abstractmethod
from bisect import bisect_left, bisect_right, insort
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, overload

import numpy as np

from xrt._allocator import RangeAllocator
from xrt._checks import (
    ADDR_LIMIT,
    BufferLike,
    as_alignment,
    as_bool,
    as_int,
    as_size,
    byte_view,
    hex_range,
)
from xrt.errors import ErrorCode, XrtError
from xrt.memptr import MemPtr, PtrKind

if TYPE_CHECKING:
    from xrt.device import Device

__all__ = ["HostMemRegion", "MemChunk", "MemManager", "MemRegion"]

Deleter = Callable[[MemPtr], None]
"""Custom deleter of a fixed-address chunk: called with the chunk's begin when it is freed."""

_PIECE = 16 << 20  # bytes per step when a copy has to go through a host buffer


class MemChunk:
    """A contiguous block of memory allocated from a region (only `MemRegion.malloc` makes one).

    Attributes are read-only: `begin` (a `MemPtr`), `size` (bytes), `region`.
    Offsets in `read`, `write` and `copy_from` are relative to `begin`.
    """

    __slots__ = (
        "__weakref__",
        "_auto_free",
        "_begin",
        "_deleter",
        "_freed",
        "_key",
        "_region",
        "_size",
    )

    _region: MemRegion
    _begin: MemPtr
    _size: int
    _key: int
    _auto_free: bool
    _deleter: Deleter | None
    _freed: bool

    def __init__(self, *args: object, **kwargs: object) -> None:
        raise XrtError(
            ErrorCode.WRONG_ORDER, "MemChunk objects are made by MemRegion.malloc, not directly"
        )

    @classmethod
    def _new(
        cls,
        region: MemRegion,
        begin: MemPtr,
        size: int,
        key: int,
        auto_free: bool,
        deleter: Deleter | None,
    ) -> MemChunk:
        c = object.__new__(cls)
        c._region = region
        c._begin = begin
        c._size = size
        c._key = key
        c._auto_free = auto_free
        c._deleter = deleter
        c._freed = False
        return c

    def __copy__(self) -> MemChunk:
        return self  # a chunk is a handle: copies are the same chunk

    def __deepcopy__(self, memo: dict[int, object]) -> MemChunk:
        return self

    def __reduce__(self) -> tuple[object, ...]:
        raise XrtError(ErrorCode.WRONG_TYPE, "a MemChunk cannot be pickled: it is device memory")

    def __del__(self) -> None:
        try:
            if self._auto_free and not self._freed:
                self._freed = True
                self._region._mem_manager._release_dead(self._key, self._deleter, self._begin)
        except Exception:  # a finalizer must not raise (e.g. at interpreter shutdown)
            pass

    # -- what it is ------------------------------------------------------------------------

    @property
    def begin(self) -> MemPtr:
        """Pointer to the first byte (ADDR, BOTH for host-visible regions, CPTR for host)."""
        return self._begin

    @property
    def size(self) -> int:
        """Size in bytes (the manual's ``byte_size``)."""
        return self._size

    @property
    def end(self) -> MemPtr:
        """Pointer one past the last byte."""
        return self._begin + self._size

    @property
    def region(self) -> MemRegion:
        """The region the chunk was allocated from."""
        return self._region

    @property
    def auto_free(self) -> bool:
        """True when the chunk is freed automatically with its last reference."""
        return self._auto_free

    @property
    def is_freed(self) -> bool:
        """True once the chunk has been freed; every data access then raises 11012."""
        return self._freed

    def is_on(self, region: MemRegion) -> bool:
        """True when the chunk belongs to `region`."""
        return self._region is region

    def __len__(self) -> int:
        return self._size

    def __repr__(self) -> str:
        state = " freed" if self._freed else ""
        return f"<MemChunk {self._size} B at {self._begin!r} on {self._region.name!r}{state}>"

    # -- data ------------------------------------------------------------------------------

    def _check_live(self) -> None:
        if self._freed:
            raise XrtError(
                ErrorCode.WRONG_ORDER, f"use of a freed chunk ({self._size} B at {self._begin!r})"
            )

    def _span(
        self, offset: object, nbytes: int | None, room: int | None, what: str
    ) -> tuple[int, int]:
        off = as_size(offset, f"{what} offset")
        if off > self._size:
            raise XrtError(
                ErrorCode.OUT_OF_RANGE,
                f"{what} offset {off} is past the end of a {self._size}-byte chunk",
            )
        if nbytes is None:
            n = self._size - off if room is None else room
        else:
            n = as_size(nbytes, f"{what} size")
        if off + n > self._size:
            raise XrtError(
                ErrorCode.OUT_OF_RANGE,
                f"{what} of {n} B at offset {off} runs past the end of a {self._size}-byte chunk",
            )
        if room is not None and n > room:
            raise XrtError(
                ErrorCode.OUT_OF_RANGE, f"{what} of {n} B does not fit a {room}-byte buffer"
            )
        return off, n

    def read(self, dest: BufferLike | MemPtr, offset: int = 0, nbytes: int | None = None) -> None:
        """Copy `nbytes` (default: the size of `dest`) from ``begin + offset`` into `dest`.

        Args:
            dest: A writable buffer (bytearray, memoryview, numpy array) or a host MemPtr.
            offset: Byte offset into the chunk.
            nbytes: Bytes to copy.

        Raises:
            XrtError: 11003 past the chunk's end or `dest`'s size, 11010 for a read-only or
                non-contiguous `dest`, 11012 on a freed chunk.
        """
        self._check_live()
        dv = _dest_view(dest, "read destination")
        off, n = self._span(offset, nbytes, len(dv), "read")
        self._region.read(dv, self._begin + off, n)

    def write(self, src: BufferLike | MemPtr, offset: int = 0, nbytes: int | None = None) -> None:
        """Copy `nbytes` (default: all of `src`) from `src` to ``begin + offset``.

        Args:
            src: bytes, bytearray, memoryview, numpy array (any layout) or a host MemPtr.
            offset: Byte offset into the chunk.
            nbytes: Bytes to copy.

        Raises:
            XrtError: 11003 past the chunk's end or `src`'s size, 11010 for a non-buffer,
                11012 on a freed chunk.
        """
        self._check_live()
        sv = _src_view(src, "write source")
        off, n = self._span(offset, nbytes, len(sv), "write")
        self._region.write(self._begin + off, sv, n)

    def tobytes(self, offset: int = 0, nbytes: int | None = None) -> bytes:
        """Return a copy of `nbytes` (default: to the end) from ``begin + offset``."""
        self._check_live()
        off, n = self._span(offset, nbytes, None, "read")
        out = bytearray(n)
        self._region.read(out, self._begin + off, n)
        return bytes(out)

    def view(self, offset: int = 0, nbytes: int | None = None) -> memoryview:
        """Zero-copy writable view of the chunk's bytes (host-visible regions only).

        The view aliases the memory: after `free` it may show another chunk's data (host
        region chunks keep their buffer alive, so a view never dangles).

        Raises:
            XrtError: 11010 when the region is not host-visible, 11012 on a freed chunk.
        """
        self._check_live()
        off, n = self._span(offset, nbytes, None, "view")
        return self._region.view(self._begin + off, n)

    def copy_from(
        self,
        src: MemChunk,
        *,
        src_offset: int = 0,
        dest_offset: int = 0,
        nbytes: int | None = None,
    ) -> None:
        """Copy bytes from another chunk (any region) into this one.

        Args:
            src: Source chunk.
            src_offset: Offset into `src`.
            dest_offset: Offset into this chunk.
            nbytes: Bytes to copy; default: the rest of `src` from `src_offset`.

        Raises:
            XrtError: 11003 past either chunk's end, 11010 when `src` is no chunk, 11012 when
                either chunk is freed.
        """
        if not isinstance(src, MemChunk):
            raise XrtError(
                ErrorCode.WRONG_TYPE, f"copy_from needs a MemChunk, got {type(src).__name__}"
            )
        self._check_live()
        src._check_live()
        s_off, n = src._span(src_offset, nbytes, None, "copy source")
        d_off, _ = self._span(dest_offset, n, None, "copy destination")
        self._region.memcpy(self._begin + d_off, src._region, src._begin + s_off, n)

    def free(self) -> None:
        """Free the chunk now (calling its deleter, if it has one).

        Raises:
            XrtError: 11012 when the chunk is already freed.
        """
        self._region._mem_manager._free_chunk(self)


_DEFAULTS: dict[str, Any] = {"deleter": None, "auto_free": True, "alignment": 1}


def _bind(form: str, names: tuple[str, ...], required: int, args: tuple, kwargs: dict) -> list[Any]:
    """Bind the arguments of one of malloc's two forms; XrtError 11010 on a mismatch."""
    if len(args) > len(names) or any(k not in names for k in kwargs):
        raise XrtError(ErrorCode.WRONG_TYPE, f"bad arguments {args!r} {kwargs!r} for {form}")
    values = list(args)
    for name in names[len(args) :]:
        if name in kwargs:
            values.append(kwargs[name])
        elif name in _DEFAULTS and names.index(name) >= required:
            values.append(_DEFAULTS[name])
        else:
            raise XrtError(ErrorCode.WRONG_TYPE, f"{form} needs {name}")
    if any(k in names[: len(args)] for k in kwargs):
        raise XrtError(ErrorCode.WRONG_TYPE, f"an argument given twice to {form}")
    return values


def _dest_view(dest: object, what: str) -> memoryview:
    if isinstance(dest, MemPtr):
        view = dest.cptr
        if view.readonly:
            raise XrtError(ErrorCode.WRONG_TYPE, f"{what} {dest!r} points to read-only memory")
        return view
    return byte_view(dest, writable=True, what=what)


def _src_view(src: object, what: str) -> memoryview:
    if isinstance(src, MemPtr):
        return src.cptr
    return byte_view(src, writable=False, what=what)


class MemManager(ABC):
    """Allocates a region's chunks and answers questions about them (the manual's
    ``MemManager``). Get one from `MemRegion.mem_manager`.
    """

    def __init__(self, region: MemRegion) -> None:
        self._region = region
        self._lock = threading.Lock()
        # key -> (chunk, or a weak reference to it for auto-free chunks; begin). The record
        # keeps `begin` (and so a host buffer) alive until the chunk is released, so a key
        # is never reused while its old record exists.
        self._chunks: dict[int, tuple[MemChunk | weakref.ref[MemChunk], MemPtr]] = {}
        self._pending: deque[tuple[int, Deleter | None, MemPtr]] = deque()

    @property
    def region(self) -> MemRegion:
        """The region this manager allocates from."""
        return self._region

    # -- subclass hooks --------------------------------------------------------------------

    @abstractmethod
    def _reserve(self, nbytes: int, alignment: int) -> tuple[int, MemPtr]:
        """Reserve `nbytes` (may be 0) aligned to `alignment`; return (key, begin)."""

    @abstractmethod
    def _reserve_at(self, begin: MemPtr, nbytes: int) -> tuple[int, MemPtr]:
        """Reserve `nbytes` exactly at `begin` (refusing overlaps); return (key, begin)."""

    @abstractmethod
    def _unreserve(self, key: int) -> None:
        """Release the reservation `key`."""

    @abstractmethod
    def _key_of(self, ptr: MemPtr | int) -> int:
        """The key a chunk beginning at `ptr` would have (for lookups)."""

    @abstractmethod
    def _stats(self) -> tuple[int, int, int]:
        """(used, free, largest free block) in bytes; called with the lock held."""

    # -- locking and deferred releases -----------------------------------------------------

    def _drain_locked(self) -> list[tuple[Deleter, MemPtr]]:
        deleters = []
        pending = self._pending
        while pending:
            key, deleter, begin = pending.popleft()
            record = self._chunks.get(key)
            if record is not None and record[1] is begin:  # that very chunk, still held
                del self._chunks[key]
                self._unreserve(key)
                if deleter is not None:
                    deleters.append((deleter, begin))
        return deleters

    def _drain(self) -> None:
        # Called after our lock is released, and from finalizers: never blocks.
        while self._pending:
            if not self._lock.acquire(blocking=False):
                return  # the holder drains when it releases the lock
            try:
                deleters = self._drain_locked()
            finally:
                self._lock.release()
            _run_deleters(deleters, raise_first=False)

    def _release_dead(self, key: int, deleter: Deleter | None, begin: MemPtr) -> None:
        self._pending.append((key, deleter, begin))
        self._drain()

    # -- allocation and free (called by MemRegion / MemChunk after argument checks) --------

    def _new_chunk(
        self,
        nbytes: int,
        alignment: int,
        auto_free: bool,
        begin: MemPtr | None = None,
        deleter: Deleter | None = None,
    ) -> MemChunk:
        with self._with_lock():
            if begin is None:
                key, ptr = self._reserve(nbytes, alignment)
            else:
                key, ptr = self._reserve_at(begin, nbytes)
            chunk = MemChunk._new(self._region, ptr, nbytes, key, auto_free, deleter)
            self._chunks[key] = (weakref.ref(chunk) if auto_free else chunk, ptr)
        return chunk

    def _free_chunk(self, chunk: MemChunk) -> None:
        with self._with_lock():
            if chunk._freed:
                raise XrtError(
                    ErrorCode.WRONG_ORDER,
                    f"double free of the {chunk._size}-byte chunk at {chunk._begin!r} "
                    f"in region {self._region.name!r}",
                )
            chunk._freed = True
            del self._chunks[chunk._key]
            self._unreserve(chunk._key)
        if chunk._deleter is not None:
            _run_deleters([(chunk._deleter, chunk._begin)], raise_first=True)

    def _live(self, record: tuple[MemChunk | weakref.ref[MemChunk], MemPtr]) -> MemChunk | None:
        obj = record[0]
        chunk = obj if isinstance(obj, MemChunk) else obj()
        if chunk is None or chunk._freed:
            return None
        return chunk

    def _with_lock(self) -> _Locked:
        return _Locked(self)

    # -- introspection ---------------------------------------------------------------------

    def all_chunks(self) -> list[MemChunk]:
        """Every live chunk of the region, in address order (the manual's ``getAllMemChunk``)."""
        with self._with_lock():
            chunks = [self._live(rec) for _, rec in sorted(self._chunks.items())]
        return [c for c in chunks if c is not None]

    def get_chunk(self, begin: MemPtr | int, nbytes: int) -> MemChunk | None:
        """The live chunk that begins at `begin` and is `nbytes` long, else None
        (the manual's ``getMemChunk``).

        Raises:
            XrtError: 11010 for a pointer of the wrong kind, 11003 for a negative size.
        """
        n = as_size(nbytes, "chunk size")
        key = self._key_of(begin)
        with self._with_lock():
            rec = self._chunks.get(key)
            chunk = None if rec is None else self._live(rec)
        if chunk is None or chunk._size != n:
            return None
        return chunk

    @property
    def chunk_count(self) -> int:
        """Number of live chunks."""
        with self._with_lock():
            return len(self._chunks)

    @property
    def used_bytes(self) -> int:
        """Bytes held by live chunks (a zero-byte chunk holds one, to own its address)."""
        with self._with_lock():
            return self._stats()[0]

    @property
    def free_bytes(self) -> int:
        """Bytes still available."""
        with self._with_lock():
            return self._stats()[1]

    @property
    def largest_free_block(self) -> int:
        """The largest single allocation that could succeed now (alignment 1)."""
        with self._with_lock():
            return self._stats()[2]

    def info(self) -> dict[str, int]:
        """A summary (the manual's ``getMemRegionInfo``): base, size, chunks, used, free and
        largest free block, in bytes."""
        with self._with_lock():
            used, free, largest = self._stats()
            return {
                "base": self._region.base,
                "size": self._region.size,
                "chunks": len(self._chunks),
                "used": used,
                "free": free,
                "largest_free": largest,
            }

    def __repr__(self) -> str:
        return f"<{type(self).__name__} of {self._region.name!r}>"


class _Locked:
    """Holds a manager's lock; releases the chunks that died meanwhile on entry, and runs
    their deleters (outside the lock) on exit, whether or not the block raised."""

    __slots__ = ("_deleters", "_m")

    def __init__(self, manager: MemManager) -> None:
        self._m = manager
        self._deleters: list[tuple[Deleter, MemPtr]] = []

    def __enter__(self) -> None:
        m = self._m
        m._lock.acquire()
        if m._pending:
            try:
                self._deleters = m._drain_locked()
            except BaseException:
                m._lock.release()
                raise

    def __exit__(self, *exc: object) -> None:
        m = self._m
        m._lock.release()
        if self._deleters:
            _run_deleters(self._deleters, raise_first=False)
        if m._pending:
            m._drain()


def _run_deleters(deleters: list[tuple[Deleter, MemPtr]], *, raise_first: bool) -> None:
    """Call deleters outside any lock. An explicit free re-raises the first failure; a
    failure during an automatic free becomes a RuntimeWarning (nobody could catch it)."""
    error: Exception | None = None
    for deleter, begin in deleters:
        try:
            deleter(begin)
        except Exception as exc:
            if raise_first and error is None:
                error = exc
            else:
                warnings.warn(
                    f"deleter {deleter!r} of the chunk at {begin!r} failed: {exc!r}",
                    RuntimeWarning,
                    stacklevel=2,
                )
    if error is not None:
        raise error


class _RangeManager(MemManager):
    """Manager of a region with physical addresses: a best-fit range allocator."""

    def __init__(self, region: MemRegion) -> None:
        super().__init__(region)
        self._ranges = RangeAllocator(region.base, region.size, region.name)

    def _reserve(self, nbytes: int, alignment: int) -> tuple[int, MemPtr]:
        addr = self._ranges.alloc(nbytes or 1, alignment)
        return addr, self._region._ptr(addr)

    def _reserve_at(self, begin: MemPtr, nbytes: int) -> tuple[int, MemPtr]:
        addr = begin.addr
        self._ranges.alloc_at(addr, nbytes or 1)
        return addr, self._region._ptr(addr)

    def _unreserve(self, key: int) -> None:
        self._ranges.free(key)

    def _key_of(self, ptr: MemPtr | int) -> int:
        if isinstance(ptr, MemPtr):
            return ptr.addr
        return as_int(ptr, "chunk address")

    def _stats(self) -> tuple[int, int, int]:
        r = self._ranges
        return r.used_bytes, r.free_bytes, r.largest_free

    def _check(self) -> None:
        # Test helper: allocator invariants plus agreement with the chunk records.
        with self._with_lock():
            self._ranges.check()
            assert sorted(self._chunks) == [a for a, _ in self._ranges.allocations()]


class MemRegion(ABC):
    """A named range of device memory ``[base, base + size)`` (the manual's ``MemRegion``).

    Subclasses (transports) implement the hooks listed in the module docstring; the public
    methods below check their arguments once and never pass a bad address to a hook.

    Args:
        name: Region name (``"plddr"``, ``"udma"``...).
        base: Physical address of the first byte.
        size: Size in bytes.
        min_alignment: Alignment every chunk gets at least (a power of two), e.g. the DMA
            engine's bus width.

    Raises:
        XrtError: 11003 when the range is not inside the 64-bit address space.
    """

    _physical = True  # addresses are physical (False only for host memory)

    def __init__(self, name: str, base: int, size: int, *, min_alignment: int = 1) -> None:
        if not isinstance(name, str) or not name:
            raise XrtError(ErrorCode.WRONG_TYPE, f"region name must be a non-empty str: {name!r}")
        self._name = name
        self._base = as_size(base, "region base")
        self._size = as_size(size, "region size")
        if self._base + self._size > ADDR_LIMIT:
            raise XrtError(
                ErrorCode.OUT_OF_RANGE,
                f"region {name!r} {hex_range(self._base, self._size)} exceeds 64-bit addresses",
            )
        self._min_alignment = as_alignment(min_alignment, "min_alignment")
        self._device: Device | None = None
        self._closed = False
        self._map: memoryview | None = None
        self._map_known = False
        self._mem_manager: MemManager = self._make_manager()

    def _make_manager(self) -> MemManager:
        return _RangeManager(self)

    # -- transport hooks -------------------------------------------------------------------

    @abstractmethod
    def _read(self, addr: int, nbytes: int) -> bytes | bytearray | memoryview:
        """Return exactly `nbytes` bytes read at physical address `addr` (checked)."""

    @abstractmethod
    def _write(self, addr: int, data: memoryview) -> None:
        """Write all of `data` (flat bytes) at physical address `addr` (checked)."""

    def _host_map(self) -> memoryview | None:
        """A writable flat byte view of the whole region, or None when not host-visible."""
        return None

    def _memcpy(self, dst: int, src: int, nbytes: int) -> None:
        """Copy inside the region with memmove semantics (both ranges checked)."""
        m = self.host_map
        if m is not None:
            m[dst - self._base : dst - self._base + nbytes] = m[
                src - self._base : src - self._base + nbytes
            ]
            return
        # Through the host, piece by piece; backwards when the ranges overlap that way.
        starts = range(0, nbytes, _PIECE)
        if src < dst < src + nbytes:
            starts = starts[::-1]
        for off in starts:
            n = min(_PIECE, nbytes - off)
            data = bytes(self._get_bytes(src + off, n))
            self._write(dst + off, memoryview(data))

    def _memcpy_from(self, dst: int, src_region: MemRegion, src: int, nbytes: int) -> None:
        """Copy from another region with physical addresses (both ranges checked).

        The default goes through the host (directly between mappings when both regions are
        host-visible). A transport overrides it to copy on the device, and calls
        ``super()._memcpy_from(...)`` for region pairs it cannot handle.
        """
        mine = self.host_map
        if mine is not None:
            src_region._get(src, mine[dst - self._base : dst - self._base + nbytes])
            return
        theirs = src_region.host_map
        if theirs is not None:
            self._put(dst, theirs[src - src_region._base : src - src_region._base + nbytes])
            return
        piece = bytearray(min(nbytes, _PIECE))
        pv = memoryview(piece)
        for off in range(0, nbytes, _PIECE):
            n = min(_PIECE, nbytes - off)
            src_region._get(src + off, pv[:n])
            self._write(dst + off, pv[:n])

    def _close(self) -> None:  # noqa: B027 - optional hook, empty by design
        """Release transport resources when the device closes."""

    # -- plumbing between checks and hooks -------------------------------------------------

    @property
    def host_map(self) -> memoryview | None:
        """The region's host mapping (see `_host_map`), or None."""
        if not self._map_known:
            m = self._host_map()
            if m is not None:
                m = byte_view(m, writable=True, what=f"host map of region {self._name!r}")
                if len(m) != self._size:
                    raise XrtError(
                        ErrorCode.DEVICE_INTERNAL,
                        f"transport of region {self._name!r} mapped {len(m)} B, region has "
                        f"{self._size} B",
                    )
            self._map = m
            self._map_known = True
        return self._map

    def _get_bytes(self, addr: int, nbytes: int) -> memoryview:
        data = self._read(addr, nbytes)
        mv = byte_view(data, writable=False, what="transport read result")
        if len(mv) != nbytes:
            raise XrtError(
                ErrorCode.DEVICE_INTERNAL,
                f"transport of region {self._name!r} returned {len(mv)} B for a read of "
                f"{nbytes} B at {addr:#x}",
            )
        return mv

    def _get(self, addr: int, dest: memoryview) -> None:
        """Copy region bytes at `addr` into host memory `dest` (len(dest) bytes)."""
        m = self.host_map
        n = len(dest)
        if m is not None:
            dest[:] = m[addr - self._base : addr - self._base + n]
        elif n:
            dest[:] = self._get_bytes(addr, n)

    def _put(self, addr: int, src: memoryview) -> None:
        """Copy host memory `src` to region bytes at `addr`."""
        m = self.host_map
        n = len(src)
        if m is not None:
            m[addr - self._base : addr - self._base + n] = src
        elif n:
            self._write(addr, src)

    def _ptr(self, addr: int) -> MemPtr:
        """MemPtr for a checked physical address: BOTH when host-visible, else ADDR."""
        m = self.host_map
        if m is None:
            return MemPtr._make(PtrKind.ADDR, addr, None)
        return MemPtr._make(PtrKind.BOTH, addr, m, addr - self._base)

    def _check_open(self) -> None:
        if self._closed:
            raise XrtError(
                ErrorCode.WRONG_ORDER, f"region {self._name!r} is closed (its device was closed)"
            )

    def _locate(self, ptr: object, nbytes: int, what: str) -> int:
        """Check that ``[ptr, ptr + nbytes)`` lies in the region; return the address."""
        if isinstance(ptr, MemPtr):
            if not ptr.has_addr:
                raise XrtError(
                    ErrorCode.WRONG_TYPE,
                    f"{what}: region {self._name!r} takes physical addresses, got {ptr!r}",
                )
            addr = ptr.addr
        else:
            addr = as_int(ptr, f"{what} address")
        if addr < self._base or addr + nbytes > self._base + self._size:
            raise XrtError(
                ErrorCode.OUT_OF_RANGE,
                f"{what} of {nbytes} B at {addr:#x} is outside region {self._name!r} "
                f"{hex_range(self._base, self._size)}",
            )
        return addr

    def _host_bytes(self, ptr: object, nbytes: int, what: str, writable: bool) -> memoryview:
        """For host memory: the `nbytes` bytes a host pointer points to."""
        if not isinstance(ptr, MemPtr) or not ptr.has_host:
            raise XrtError(
                ErrorCode.WRONG_TYPE,
                f"{what}: region {self._name!r} is host memory and takes host pointers "
                f"(MemPtr with a buffer), got {ptr!r}",
            )
        view = ptr.host_bytes(nbytes)
        if writable and view.readonly:
            raise XrtError(ErrorCode.WRONG_TYPE, f"{what}: {ptr!r} points to read-only memory")
        return view

    # -- what it is ------------------------------------------------------------------------

    @property
    def name(self) -> str:
        """Region name."""
        return self._name

    @property
    def base(self) -> int:
        """Physical address of the first byte."""
        return self._base

    @property
    def size(self) -> int:
        """Size in bytes."""
        return self._size

    @property
    def end(self) -> int:
        """Physical address one past the last byte."""
        return self._base + self._size

    @property
    def min_alignment(self) -> int:
        """Alignment every chunk gets at least."""
        return self._min_alignment

    @property
    def device(self) -> Device | None:
        """The device the region belongs to (None for a free-standing region)."""
        return self._device

    @property
    def host_visible(self) -> bool:
        """True when the host reaches the region's bytes directly (zero-copy views)."""
        return self.host_map is not None

    @property
    def closed(self) -> bool:
        """True once the region's device has been closed."""
        return self._closed

    @property
    def mem_manager(self) -> MemManager:
        """The region's memory manager (the manual's ``memManager()``)."""
        return self._mem_manager

    def contains(self, ptr: MemPtr | int, nbytes: int = 1) -> bool:
        """True when ``[ptr, ptr + nbytes)`` lies inside the region."""
        try:
            self._locate(ptr, as_size(nbytes, "size"), "range")
        except XrtError:
            return False
        return True

    def ptr(self, addr: int) -> MemPtr:
        """A MemPtr for physical address `addr` of this region (BOTH when host-visible).

        Raises:
            XrtError: 11003 when `addr` is outside ``[base, end]``.
        """
        return self._ptr(self._locate(addr, 0, "pointer"))

    def __repr__(self) -> str:
        return (
            f"<{type(self).__name__} {self._name!r} {hex_range(self._base, self._size)}"
            f"{' closed' if self._closed else ''}>"
        )

    # -- data ------------------------------------------------------------------------------

    def read(self, dest: BufferLike | MemPtr, src: MemPtr | int, nbytes: int | None = None) -> None:
        """Copy `nbytes` (default: the size of `dest`) from region address `src` into `dest`.

        Args:
            dest: A writable host buffer (bytearray, memoryview, numpy array) or host MemPtr.
            src: Where to read: a MemPtr with a physical address, or an int address.
            nbytes: Bytes to copy.

        Raises:
            XrtError: 11003 when the range leaves the region or `dest`, 11010 for wrong types
                or a read-only `dest`, 11012 after the device was closed.
        """
        self._check_open()
        dv = _dest_view(dest, "read destination")
        n = len(dv) if nbytes is None else as_size(nbytes, "read size")
        if n > len(dv):
            raise XrtError(
                ErrorCode.OUT_OF_RANGE, f"read of {n} B does not fit a {len(dv)}-byte destination"
            )
        if self._physical:
            self._get(self._locate(src, n, "read"), dv[:n])
        else:
            dv[:n] = self._host_bytes(src, n, "read", writable=False)

    def write(
        self, dest: MemPtr | int, src: BufferLike | MemPtr, nbytes: int | None = None
    ) -> None:
        """Copy `nbytes` (default: all of `src`) from host `src` to region address `dest`.

        Args:
            dest: Where to write: a MemPtr with a physical address, or an int address.
            src: bytes, bytearray, memoryview, numpy array (any layout) or a host MemPtr.
            nbytes: Bytes to copy.

        Raises:
            XrtError: 11003 when the range leaves the region or `src`, 11010 for wrong types,
                11012 after the device was closed.
        """
        self._check_open()
        sv = _src_view(src, "write source")
        n = len(sv) if nbytes is None else as_size(nbytes, "write size")
        if n > len(sv):
            raise XrtError(
                ErrorCode.OUT_OF_RANGE, f"write of {n} B exceeds the {len(sv)}-byte source"
            )
        if self._physical:
            self._put(self._locate(dest, n, "write"), sv[:n])
        else:
            self._host_bytes(dest, n, "write", writable=True)[:] = sv[:n]

    @overload
    def memcpy(self, dest: MemPtr | int, src: MemPtr | int, nbytes: int, /) -> None: ...
    @overload
    def memcpy(
        self, dest: MemPtr | int, src_region: MemRegion, src: MemPtr | int, nbytes: int, /
    ) -> None: ...

    def memcpy(self, dest: MemPtr | int, *args: Any) -> None:
        """Copy bytes to `dest` in this region, from this region or another one.

        ``memcpy(dest, src, nbytes)`` copies inside the region (overlapping ranges are fine:
        memmove semantics); ``memcpy(dest, src_region, src, nbytes)`` copies from another
        region (through the host unless the transport knows a faster way).

        Raises:
            XrtError: 11003 when a range leaves its region, 11010 for wrong arguments,
                11012 after a device was closed.
        """
        if len(args) == 2:
            src_region, (src, nbytes) = self, args
        elif len(args) == 3:
            src_region, src, nbytes = args
            if not isinstance(src_region, MemRegion):
                raise XrtError(
                    ErrorCode.WRONG_TYPE,
                    f"memcpy source region must be a MemRegion, got {type(src_region).__name__}",
                )
        else:
            raise XrtError(
                ErrorCode.WRONG_TYPE,
                "memcpy takes (dest, src, nbytes) or (dest, src_region, src, nbytes), "
                f"got {1 + len(args)} arguments",
            )
        self._check_open()
        src_region._check_open()
        n = as_size(nbytes, "memcpy size")
        if self._physical and src_region._physical:
            d = self._locate(dest, n, "memcpy destination")
            s = src_region._locate(src, n, "memcpy source")
            if n == 0:
                return
            if src_region is self:
                self._memcpy(d, s, n)
            else:
                self._memcpy_from(d, src_region, s, n)
        elif self._physical:
            sv = src_region._host_bytes(src, n, "memcpy source", writable=False)
            self._put(self._locate(dest, n, "memcpy destination"), sv)
        elif src_region._physical:
            dv = self._host_bytes(dest, n, "memcpy destination", writable=True)
            src_region._get(src_region._locate(src, n, "memcpy source"), dv)
        else:
            dv = self._host_bytes(dest, n, "memcpy destination", writable=True)
            dv[:] = src_region._host_bytes(src, n, "memcpy source", writable=False)

    def view(self, ptr: MemPtr | int, nbytes: int) -> memoryview:
        """Zero-copy writable view of `nbytes` at `ptr` (host-visible regions only).

        Raises:
            XrtError: 11010 when the region is not host-visible, 11003 out of range.
        """
        self._check_open()
        n = as_size(nbytes, "view size")
        if not self._physical:
            return self._host_bytes(ptr, n, "view", writable=False)
        addr = self._locate(ptr, n, "view")
        m = self.host_map
        if m is None:
            raise XrtError(
                ErrorCode.WRONG_TYPE,
                f"region {self._name!r} is not host-visible: no zero-copy view; use read()",
            )
        return m[addr - self._base : addr - self._base + n]

    # -- allocation ------------------------------------------------------------------------

    @overload
    def malloc(self, nbytes: int, auto_free: bool = True, alignment: int = 1) -> MemChunk: ...
    @overload
    def malloc(
        self,
        begin: MemPtr,
        nbytes: int,
        deleter: Deleter | None = None,
        auto_free: bool = True,
    ) -> MemChunk: ...

    def malloc(self, nbytes_or_begin: int | MemPtr, *args: Any, **kwargs: Any) -> MemChunk:
        """Allocate a chunk: ``malloc(nbytes, auto_free=True, alignment=1)`` anywhere, or
        ``malloc(begin, nbytes, deleter=None, auto_free=True)`` at a fixed place.

        Args:
            nbytes_or_begin: Size in bytes, or a MemPtr to allocate at (a physical address;
                for host memory, a host pointer whose buffer the chunk then adopts).
            nbytes: (fixed form) Size in bytes.
            auto_free: Free the chunk when its last reference goes (else only by `free`;
                the manager keeps it listed until then).
            alignment: Power of two the start address is a multiple of (at least the
                region's `min_alignment`).
            deleter: (fixed form) Called with the chunk's begin when it is freed.

        Returns:
            The new chunk.

        Raises:
            XrtError: 11003 for a bad size or alignment, out-of-range or overlapping fixed
                addresses, and out of memory; 11010 for wrong types; 11012 after close.
        """
        if isinstance(nbytes_or_begin, MemPtr):
            form = "malloc(begin, nbytes, deleter=None, auto_free=True)"
            a = _bind(form, ("nbytes", "deleter", "auto_free"), 1, args, kwargs)
            return self._malloc_at(nbytes_or_begin, *a)
        form = "malloc(nbytes, auto_free=True, alignment=1)"
        a = _bind(form, ("auto_free", "alignment"), 0, args, kwargs)
        return self._malloc_size(nbytes_or_begin, *a)

    def _malloc_size(self, nbytes: int, auto_free: bool = True, alignment: int = 1) -> MemChunk:
        self._check_open()
        n = as_size(nbytes, "malloc size")
        af = as_bool(auto_free, "auto_free")
        align = max(as_alignment(alignment), self._min_alignment)
        return self._mem_manager._new_chunk(n, align, af)

    def _malloc_at(
        self,
        begin: MemPtr,
        nbytes: int,
        deleter: Deleter | None = None,
        auto_free: bool = True,
    ) -> MemChunk:
        self._check_open()
        n = as_size(nbytes, "malloc size")
        af = as_bool(auto_free, "auto_free")
        if deleter is not None and not callable(deleter):
            raise XrtError(ErrorCode.WRONG_TYPE, f"deleter must be callable, got {deleter!r}")
        if self._physical:
            addr = self._locate(begin, n, "malloc")
            if addr % self._min_alignment:
                raise XrtError(
                    ErrorCode.OUT_OF_RANGE,
                    f"malloc at {addr:#x}: region {self._name!r} needs chunks aligned to "
                    f"{self._min_alignment}",
                )
        else:
            self._host_bytes(begin, n, "malloc", writable=False)
        return self._mem_manager._new_chunk(n, 1, af, begin=begin, deleter=deleter)

    def free(self, target: MemChunk | MemPtr | int) -> None:
        """Free a chunk of this region, given the chunk or its begin.

        Raises:
            XrtError: 11012 for a double free or when no chunk begins at `target`, 11010
                for a chunk of another region or a wrong type.
        """
        if isinstance(target, MemChunk):
            if target._region is not self:
                raise XrtError(
                    ErrorCode.WRONG_TYPE,
                    f"{target!r} belongs to region {target._region.name!r}, not {self._name!r}",
                )
            target.free()
            return
        key = self._mem_manager._key_of(target)  # type: ignore[arg-type]
        manager = self._mem_manager
        with manager._with_lock():
            rec = manager._chunks.get(key)
            chunk = None if rec is None else manager._live(rec)
        if chunk is None:
            raise XrtError(
                ErrorCode.WRONG_ORDER,
                f"free of {target!r} in region {self._name!r}: no live chunk begins there "
                f"(already freed, or never allocated)",
            )
        chunk.free()


class _HostManager(MemManager):
    """Manager of host memory: the OS allocates (numpy), this keeps the books.

    Keys are host virtual addresses; a sorted list of chunk starts lets fixed-place
    allocations (adopting a caller's buffer) refuse overlaps in O(log n).
    """

    def __init__(self, region: HostMemRegion) -> None:
        super().__init__(region)
        self._capacity = region._capacity
        self._starts: list[int] = []
        self._sizes: dict[int, int] = {}
        self._used = 0

    def _record(self, key: int, nbytes: int) -> None:
        insort(self._starts, key)
        self._sizes[key] = nbytes
        self._used += nbytes

    def _check_capacity(self, nbytes: int, alignment: int) -> None:
        if self._capacity is not None and self._used + nbytes > self._capacity:
            raise XrtError(
                ErrorCode.OUT_OF_RANGE,
                f"out of memory in region {self._region.name!r}: cannot allocate {nbytes} B "
                f"aligned to {alignment} (capacity {self._capacity} B, used {self._used} B)",
            )

    def _reserve(self, nbytes: int, alignment: int) -> tuple[int, MemPtr]:
        held = nbytes or 1
        self._check_capacity(held, alignment)
        try:
            raw = np.zeros(held + alignment - 1, dtype=np.uint8)
        except (MemoryError, ValueError) as exc:
            raise XrtError(
                ErrorCode.OUT_OF_RANGE,
                f"out of memory in region {self._region.name!r}: the OS refused {nbytes} B ({exc})",
            ) from None
        addr = int(raw.__array_interface__["data"][0])
        skip = -addr % alignment
        view = memoryview(raw)[skip : skip + nbytes]
        key = addr + skip
        self._record(key, held)
        return key, MemPtr._make(PtrKind.CPTR, None, view, 0, key)

    def _reserve_at(self, begin: MemPtr, nbytes: int) -> tuple[int, MemPtr]:
        held = nbytes or 1
        key = begin.host_address
        i = bisect_right(self._starts, key)
        clash = None
        if i > 0 and self._starts[i - 1] + self._sizes[self._starts[i - 1]] > key:
            clash = self._starts[i - 1]
        elif i < len(self._starts) and self._starts[i] < key + held:
            clash = self._starts[i]
        if clash is not None:
            raise XrtError(
                ErrorCode.OUT_OF_RANGE,
                f"host range {hex_range(key, held)} overlaps the chunk "
                f"{hex_range(clash, self._sizes[clash])} in region {self._region.name!r}",
            )
        self._check_capacity(held, 1)
        self._record(key, held)
        return key, begin

    def _unreserve(self, key: int) -> None:
        del self._starts[bisect_left(self._starts, key)]
        self._used -= self._sizes.pop(key)

    def _key_of(self, ptr: MemPtr | int) -> int:
        if not isinstance(ptr, MemPtr) or not ptr.has_host:
            raise XrtError(
                ErrorCode.WRONG_TYPE,
                f"host region {self._region.name!r} is addressed by host pointers, got {ptr!r}",
            )
        return ptr.host_address

    def _stats(self) -> tuple[int, int, int]:
        if self._capacity is not None:
            free = self._capacity - self._used
        else:
            free = _available_host_memory()
        return self._used, free, free


def _host_memory_total() -> int:
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        return 1 << 40


def _available_host_memory() -> int:
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        return _host_memory_total()


class HostMemRegion(MemRegion):
    """Host memory (the manual's ``HostMemRegion``): chunks are numpy-allocated buffers.

    Host memory has no physical addresses: chunk pointers are host pointers (CPTR) and
    `read`, `write`, `memcpy` and fixed-place `malloc` take host MemPtrs. Fresh chunks are
    zeroed, and every chunk is host-visible (`MemChunk.view` is zero-copy and keeps the
    buffer alive, so views never dangle).

    Args:
        name: Region name.
        capacity: Bytes this region may hand out in total (None: as much as the OS gives).
        min_alignment: Host address alignment of every chunk (default 64, a cache line).

    `base` is 0 and `size` is the capacity (or the machine's physical memory).
    """

    _physical = False

    def __init__(
        self, name: str = "host", *, capacity: int | None = None, min_alignment: int = 64
    ) -> None:
        self._capacity = None if capacity is None else as_size(capacity, "capacity")
        size = _host_memory_total() if self._capacity is None else self._capacity
        super().__init__(name, 0, size, min_alignment=min_alignment)

    def _make_manager(self) -> MemManager:
        return _HostManager(self)

    def _read(self, addr: int, nbytes: int) -> bytes:
        raise XrtError(ErrorCode.WRONG_TYPE, "host memory has no physical addresses")

    def _write(self, addr: int, data: memoryview) -> None:
        raise XrtError(ErrorCode.WRONG_TYPE, "host memory has no physical addresses")

    @property
    def host_visible(self) -> bool:
        return True

    def contains(self, ptr: MemPtr | int, nbytes: int = 1) -> bool:
        """True when `ptr` lies inside a live chunk of this region."""
        if not isinstance(ptr, MemPtr) or not ptr.has_host:
            return False
        n = as_size(nbytes, "size")
        key = ptr.host_address
        m = self._mem_manager
        assert isinstance(m, _HostManager)
        with m._with_lock():
            i = bisect_right(m._starts, key) - 1
            return i >= 0 and key + n <= m._starts[i] + m._sizes[m._starts[i]]

    def ptr(self, addr: int) -> MemPtr:
        raise XrtError(ErrorCode.WRONG_TYPE, "host memory has no physical addresses")
