"""`MemRegion`: a named range of device memory and its transport hooks (the manual's
``MemRegion``).

A `MemRegion` is a named range of physical addresses ``[base, base + size)`` on a device:
device DDR, a host-visible DMA buffer, on-chip memory. Its public methods check every
argument once (types, ranges, state) and then call a few small hooks that a transport
implements, in the manner of cocotbext-axi's ``address_space.py`` (what every region shares
lives in `xrt.region.Region`). The hooks, all with absolute physical addresses that are
already checked:

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

Chunks (`xrt.memory.chunk`) come from `MemRegion.malloc`; the region's memory manager
(`xrt.memory.managers`; here `_RangeManager`, a best-fit allocator over physical
addresses) keeps their books.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any, overload

from xrt._allocator import RangeAllocator
from xrt._checks import BufferLike, as_alignment, as_bool, as_int, as_size, byte_view
from xrt.errors import ErrorCode, XrtError
from xrt.memory._views import _dest_view, _src_view
from xrt.memory.chunk import Deleter, MemChunk
from xrt.memory.managers import MemManager
from xrt.memptr import MemPtr, PtrKind
from xrt.region import Region

__all__ = ["MemRegion"]

_PIECE = 16 << 20  # bytes per step when a copy has to go through a host buffer

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


class MemRegion(Region):
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
        super().__init__(name, base, size)
        self._min_alignment = as_alignment(min_alignment, "min_alignment")
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
        if not self._spans(addr, nbytes):
            err = self._outside(f"{what} of {nbytes} B at {addr:#x}")
            if 0 <= addr < self._base and addr + nbytes <= self._size:
                # The manual's examples (1.5: MemPtr(8192) on plddr) use a board whose PL
                # DDR the NPU sees from address 0; this device's starts elsewhere.
                err = XrtError(
                    err.code,
                    f"{err.message}: addresses are physical, and {self._name!r} begins at "
                    f"{self._base:#x} (at offset {addr:#x} into it: "
                    f"MemPtr({self._base + addr:#x}))",
                )
            raise err
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

    # -- what it is (name, base, size, end, device, closed: see `Region`) -------------------

    @property
    def min_alignment(self) -> int:
        """Alignment every chunk gets at least."""
        return self._min_alignment

    @property
    def host_visible(self) -> bool:
        """True when the host reaches the region's bytes directly (zero-copy views)."""
        return self.host_map is not None

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


class _RangeManager(MemManager):
    """Manager of a region with physical addresses: a best-fit range allocator."""

    _region: MemRegion  # its addresses become pointers through the region (`MemRegion._ptr`)

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
