"""`MemChunk`: the handle of a contiguous block allocated from a `MemRegion` (the manual's
``MemChunk``).

Only `MemRegion.malloc` makes chunks; the region's `MemManager` keeps their books. A chunk
allocated with ``auto_free=True`` (the default) is freed when its last reference goes, so
chunks can be shared (two tensors over one chunk free it when both are gone);
``auto_free=False`` chunks stay allocated, and listed by their manager, until freed
explicitly. Data access goes through the region, whose checks and transport hooks apply.

This module sits below the region and the manager: what a chunk asks of them is declared
here (`ChunkRegion`, `ChunkBooks`), and `MemRegion` and `MemManager` are what fill them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from xrt._checks import BufferLike, as_size
from xrt.accessor import SelfAccessor
from xrt.errors import ErrorCode, XrtError
from xrt.memory._views import _dest_view, _src_view
from xrt.memptr import MemPtr

__all__ = ["ChunkBooks", "ChunkRegion", "Deleter", "MemChunk"]

Deleter = Callable[[MemPtr], None]
"""Custom deleter of a fixed-address chunk: called with the chunk's begin when it is freed."""


class ChunkRegion(Protocol):
    """What a chunk asks of the region it was allocated from (`MemRegion` is the one): its
    name, and its checked data access, which the chunk's own methods go through."""

    @property
    def name(self) -> str: ...
    def read(
        self, dest: BufferLike | MemPtr, src: MemPtr | int, nbytes: int | None = None
    ) -> None: ...
    def write(
        self, dest: MemPtr | int, src: BufferLike | MemPtr, nbytes: int | None = None
    ) -> None: ...
    def memcpy(self, dest: MemPtr | int, *args: Any) -> None: ...
    def view(self, ptr: MemPtr | int, nbytes: int) -> memoryview: ...


class ChunkBooks(Protocol):
    """What a chunk asks of the memory manager that keeps its books (`MemManager`): to free
    it now, or, from its finalizer, once the manager's lock allows (package-internal)."""

    def _free_chunk(self, chunk: MemChunk) -> None: ...
    def _release_dead(self, key: int, deleter: Deleter | None, begin: MemPtr) -> None: ...


class MemChunk(SelfAccessor):
    """A contiguous block of memory allocated from a region (only `MemRegion.malloc` makes one).

    Attributes are read-only: `begin` (a `MemPtr`), `size` (bytes), `region`. A chunk
    called returns itself: the manual's ``tensor.chunk()`` reads as ``tensor.chunk``.
    Offsets in `read`, `write` and `copy_from` are relative to `begin`.
    """

    __slots__ = (
        "__weakref__",
        "_auto_free",
        "_begin",
        "_books",
        "_deleter",
        "_freed",
        "_key",
        "_region",
        "_size",
    )

    _region: ChunkRegion
    _books: ChunkBooks
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
        books: ChunkBooks,
        region: ChunkRegion,
        begin: MemPtr,
        size: int,
        key: int,
        auto_free: bool,
        deleter: Deleter | None,
    ) -> MemChunk:
        c = object.__new__(cls)
        c._books = books
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
                self._books._release_dead(self._key, self._deleter, self._begin)
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
    def region(self) -> ChunkRegion:
        """The region the chunk was allocated from (a `MemRegion`)."""
        return self._region

    @property
    def auto_free(self) -> bool:
        """True when the chunk is freed automatically with its last reference."""
        return self._auto_free

    @property
    def is_freed(self) -> bool:
        """True once the chunk has been freed; every data access then raises 11012."""
        return self._freed

    def is_on(self, region: ChunkRegion) -> bool:
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
        self._books._free_chunk(self)
