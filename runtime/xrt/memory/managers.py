"""Memory managers (the manual's ``MemManager``): they allocate a region's chunks and answer
questions about them.

Every region has one (``region.mem_manager``): `MemManager.all_chunks`,
`MemManager.get_chunk`, used and free bytes, the largest free block. Each kind of region
brings its manager: regions with physical addresses a best-fit allocator with coalescing
(`xrt.memory.regions`, over `xrt._allocator`, whose docstring gives the complexity), host
memory its own (`xrt.memory.host`). What a manager asks of its region is `ManagedRegion`.

Thread safety: allocation, freeing and introspection hold the manager's lock. A chunk
freed automatically from a finalizer that runs while its manager is busy (another thread,
or the garbage collector inside an allocation) is queued and released by the next manager
operation; introspection always drains that queue first, so it never reports a dead chunk.
Reads and writes take no lock: concurrent access to the same bytes is the caller's business,
as in C.
"""

from __future__ import annotations

import threading
import warnings
import weakref
from abc import ABC, abstractmethod
from collections import deque
from typing import Protocol

from xrt._checks import as_size
from xrt.errors import ErrorCode, XrtError
from xrt.memory.chunk import ChunkRegion, Deleter, MemChunk
from xrt.memptr import MemPtr

__all__ = ["ManagedRegion", "MemManager"]


class ManagedRegion(ChunkRegion, Protocol):
    """What a memory manager asks of its region (`MemRegion` is the one): its range, for
    `MemManager.info`, besides what the chunks it makes ask of it (`ChunkRegion`)."""

    @property
    def base(self) -> int: ...
    @property
    def size(self) -> int: ...


class MemManager(ABC):
    """Allocates a region's chunks and answers questions about them (the manual's
    ``MemManager``). Get one from `MemRegion.mem_manager`.
    """

    def __init__(self, region: ManagedRegion) -> None:
        self._region = region
        self._lock = threading.Lock()
        # key -> (chunk, or a weak reference to it for auto-free chunks; begin). The record
        # keeps `begin` (and so a host buffer) alive until the chunk is released, so a key
        # is never reused while its old record exists.
        self._chunks: dict[int, tuple[MemChunk | weakref.ref[MemChunk], MemPtr]] = {}
        self._pending: deque[tuple[int, Deleter | None, MemPtr]] = deque()

    @property
    def region(self) -> ManagedRegion:
        """The region this manager allocates from (a `MemRegion`)."""
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
            chunk = MemChunk._new(self, self._region, ptr, nbytes, key, auto_free, deleter)
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
