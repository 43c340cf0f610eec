"""Address-range allocator behind every device memory region's `MemManager`.

It hands out byte ranges of ``[base, base + size)``, knows nothing of chunks or
transports, and deals in plain ints, so it can be checked exhaustively against a model.

Algorithm: best fit over an explicitly kept free list, with immediate coalescing.

- ``_fstarts``: start addresses of the free blocks, sorted (neighbour lookup on free and
  containment lookup for fixed-address allocation, both by `bisect`).
- ``_fsize``: free block start -> size.
- ``_fkeys``: one int per free block, ``size << 64 | start``, sorted: the size-ordered index
  that best fit searches (the smallest block that fits, lowest address among equals).
- ``_alloc``: allocated start -> size.

Complexity with F free blocks and A live allocations: `alloc`, `alloc_at` and `free` do
O(log F) comparisons (bisect) plus at most a few list inserts/deletes, which are O(F)
pointer moves done by one C ``memmove`` (about 8*F bytes: microseconds even at F = 10^5);
the allocated set is a dict (O(1)). F is the number of *holes*, not of live chunks: a
region with 10^4 live chunks allocated back to back has one free block. Alignment: best
fit scans at most 8 too-small-once-aligned candidates, then jumps to the blocks that fit at
any alignment (size >= nbytes + alignment - 1); only when there are none does it keep
scanning, so it fails (out of memory) exactly when no free block can hold the request.
`allocations()` sorts A entries (O(A log A)); it is for introspection, not hot paths.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from itertools import pairwise

from xrt._checks import hex_range
from xrt.errors import ErrorCode, XrtError

_SHIFT = 64
_LOW = (1 << _SHIFT) - 1
_SCAN = 8  # misaligned candidates tried before jumping to blocks that always fit


class RangeAllocator:
    """Allocates byte ranges of ``[base, base + size)``.

    Args:
        base: First address.
        size: Bytes managed (>= 0); ``base + size`` must not exceed 2**64.
        name: Region name for error messages.
    """

    __slots__ = ("_alloc", "_fkeys", "_fsize", "_fstarts", "_used", "base", "name", "size")

    def __init__(self, base: int, size: int, name: str = "") -> None:
        if base < 0 or size < 0 or base + size > 1 << _SHIFT:
            raise XrtError(ErrorCode.OUT_OF_RANGE, f"region {hex_range(base, size)} is not 64-bit")
        self.base = base
        self.size = size
        self.name = name
        self._alloc: dict[int, int] = {}
        self._used = 0
        self._fstarts: list[int] = [base] if size else []
        self._fsize: dict[int, int] = {base: size} if size else {}
        self._fkeys: list[int] = [size << _SHIFT | base] if size else []

    # -- queries ---------------------------------------------------------------------------

    @property
    def used_bytes(self) -> int:
        """Bytes allocated."""
        return self._used

    @property
    def free_bytes(self) -> int:
        """Bytes not allocated."""
        return self.size - self._used

    @property
    def largest_free(self) -> int:
        """Size of the largest free block (0 when full)."""
        return self._fkeys[-1] >> _SHIFT if self._fkeys else 0

    @property
    def count(self) -> int:
        """Number of live allocations."""
        return len(self._alloc)

    def size_at(self, addr: int) -> int | None:
        """Size of the allocation starting at `addr`, or None."""
        return self._alloc.get(addr)

    def allocations(self) -> list[tuple[int, int]]:
        """``(start, size)`` of every allocation, in address order."""
        return sorted(self._alloc.items())

    def free_blocks(self) -> list[tuple[int, int]]:
        """``(start, size)`` of every free block, in address order."""
        return [(s, self._fsize[s]) for s in self._fstarts]

    # -- allocation ------------------------------------------------------------------------

    def alloc(self, nbytes: int, alignment: int = 1) -> int:
        """Allocate `nbytes` (>= 1) at an address that is a multiple of `alignment`.

        Returns:
            The start address.

        Raises:
            XrtError: 11003 when no free block can hold the request (out of memory).
        """
        keys = self._fkeys
        mask = alignment - 1
        n = len(keys)
        i = bisect_left(keys, nbytes << _SHIFT)
        tries = 0
        while i < n:
            key = keys[i]
            start = key & _LOW
            size = key >> _SHIFT
            aligned = (start + mask) & ~mask
            if aligned + nbytes <= start + size:
                break
            tries += 1
            if tries == _SCAN:
                # Blocks of nbytes + alignment - 1 bytes or more fit at any alignment: jump
                # to the smallest of them if there is one (else keep scanning, so that the
                # search fails only when no block fits at all).
                j = bisect_left(keys, (nbytes + mask) << _SHIFT)
                if i + 1 < j < n:
                    i = j
                    continue
            i += 1
        else:
            raise XrtError(
                ErrorCode.OUT_OF_RANGE,
                f"out of memory in region {self.name!r}: cannot allocate {nbytes} B aligned to "
                f"{alignment} (free {self.free_bytes} B in {n} blocks, "
                f"largest {self.largest_free} B)",
            )
        del keys[i]
        self._split(start, size, aligned, nbytes)
        return aligned

    def alloc_at(self, addr: int, nbytes: int) -> None:
        """Allocate exactly ``[addr, addr + nbytes)`` (nbytes >= 1).

        Raises:
            XrtError: 11003 when the range leaves the region or overlaps an allocation.
        """
        end = addr + nbytes
        if addr < self.base or end > self.base + self.size:
            raise XrtError(
                ErrorCode.OUT_OF_RANGE,
                f"{hex_range(addr, nbytes)} is outside region {self.name!r} "
                f"{hex_range(self.base, self.size)}",
            )
        j = bisect_right(self._fstarts, addr) - 1
        if j >= 0:
            start = self._fstarts[j]
            size = self._fsize[start]
            if end <= start + size:
                key = size << _SHIFT | start
                del self._fkeys[bisect_left(self._fkeys, key)]
                self._split(start, size, addr, nbytes)
                return
        other = self._overlapping(addr, end)
        raise XrtError(
            ErrorCode.OUT_OF_RANGE,
            f"{hex_range(addr, nbytes)} overlaps the allocated chunk "
            f"{hex_range(other[0], other[1])} in region {self.name!r}",
        )

    def _overlapping(self, addr: int, end: int) -> tuple[int, int]:
        # Error path only: a linear scan keeps the hot paths free of a third sorted list.
        for s, n in sorted(self._alloc.items()):
            if s < end and addr < s + n:
                return s, n
        raise AssertionError("range is neither free nor allocated")  # pragma: no cover

    def _split(self, start: int, size: int, at: int, nbytes: int) -> None:
        # Carve [at, at + nbytes) out of the free block [start, start + size) whose size
        # key is already removed from _fkeys.
        fstarts = self._fstarts
        j = bisect_left(fstarts, start)
        front = at - start
        tail_start = at + nbytes
        tail = start + size - tail_start
        if front:
            self._fsize[start] = front
            insort(self._fkeys, front << _SHIFT | start)
            if tail:
                fstarts.insert(j + 1, tail_start)
        else:
            del self._fsize[start]
            if tail:
                fstarts[j] = tail_start
            else:
                del fstarts[j]
        if tail:
            self._fsize[tail_start] = tail
            insort(self._fkeys, tail << _SHIFT | tail_start)
        self._alloc[at] = nbytes
        self._used += nbytes

    def free(self, addr: int) -> int:
        """Free the allocation starting at `addr` and return its size.

        Raises:
            XrtError: 11012 when nothing is allocated at `addr` (a double free, or a pointer
                into the middle of a chunk).
        """
        size = self._alloc.pop(addr, None)
        if size is None:
            raise XrtError(
                ErrorCode.WRONG_ORDER,
                f"free of {addr:#x} in region {self.name!r}: no chunk starts there "
                f"(already freed, or never allocated)",
            )
        self._used -= size
        fstarts = self._fstarts
        fsize = self._fsize
        keys = self._fkeys
        end = addr + size
        j = bisect_left(fstarts, addr)
        new_start = addr
        new_size = size
        merged_prev = False
        if j > 0:
            ps = fstarts[j - 1]
            psz = fsize[ps]
            if ps + psz == addr:
                del keys[bisect_left(keys, psz << _SHIFT | ps)]
                new_start = ps
                new_size += psz
                merged_prev = True
        if j < len(fstarts) and fstarts[j] == end:
            nsz = fsize.pop(end)
            del keys[bisect_left(keys, nsz << _SHIFT | end)]
            new_size += nsz
            if merged_prev:
                del fstarts[j]
            else:
                fstarts[j] = addr
        elif not merged_prev:
            fstarts.insert(j, addr)
        fsize[new_start] = new_size
        insort(keys, new_size << _SHIFT | new_start)
        return size

    def check(self) -> None:
        """Assert the internal invariants (for tests): sorted, disjoint, coalesced, complete."""
        assert self._fstarts == sorted(self._fstarts)
        assert sorted(self._fsize) == self._fstarts
        assert self._fkeys == sorted(s << _SHIFT | f for f, s in self._fsize.items())
        spans = sorted([*self._alloc.items(), *self._fsize.items()])
        pos = self.base
        for s, n in spans:
            assert s == pos and n > 0, (s, n, pos)
            pos += n
        assert pos == self.base + self.size
        for (s1, n1), (s2, _) in pairwise(self.free_blocks()):
            assert s1 + n1 < s2, "free blocks left uncoalesced"
        assert self._used == sum(self._alloc.values())
