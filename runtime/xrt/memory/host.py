"""Host memory (the manual's ``HostMemRegion``): chunks the OS allocates, with the same
bookkeeping as device memory.

`HostMemRegion` has no physical addresses: its chunks are numpy-allocated buffers addressed
by host pointers. `_HostManager` keeps their books, keyed by host virtual address.
"""

from __future__ import annotations

import os
from bisect import bisect_left, bisect_right, insort

import numpy as np

from xrt._checks import as_size, hex_range
from xrt.errors import ErrorCode, XrtError
from xrt.memory.managers import MemManager
from xrt.memory.regions import MemRegion
from xrt.memptr import MemPtr, PtrKind

__all__ = ["HostMemRegion"]


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
