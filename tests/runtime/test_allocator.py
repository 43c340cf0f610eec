"""The memory manager: unit tests and property-based tests against a simple model.

Two levels: the address-range allocator alone (`xrt._allocator.RangeAllocator`), and whole
regions with real chunks, data, fixed addresses and automatic frees. Each random sequence
is checked after every step: live chunks never overlap, no byte is lost (used + free =
size, free blocks and allocations tile the region), every result agrees with the model
(an allocation succeeds exactly when some free gap can hold it, aligned), and the data
written into each chunk survives everything done to the others.
"""

from __future__ import annotations

from itertools import pairwise

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    invariant,
    precondition,
    rule,
)

from xrt import ErrorCode, MemChunk, MemPtr, XrtError
from xrt._allocator import RangeAllocator
from xrt.memory import HostMemRegion
from xrt.testing.memory_transport import MemoryMemRegion

SETTINGS = settings(max_examples=150, stateful_step_count=50, deadline=None)


def gaps(live: dict[int, int], base: int, size: int) -> list[tuple[int, int]]:
    """Free gaps of the model: (start, size) in address order."""
    out, pos = [], base
    for s in sorted(live):
        if s > pos:
            out.append((pos, s - pos))
        pos = s + live[s]
    if pos < base + size:
        out.append((pos, base + size - pos))
    return out


def fits(live: dict[int, int], base: int, size: int, n: int, align: int) -> bool:
    for s, g in gaps(live, base, size):
        a = (s + align - 1) // align * align
        if a + n <= s + g:
            return True
    return False


# -- unit tests ----------------------------------------------------------------------------


def test_best_fit_and_coalescing() -> None:
    a = RangeAllocator(0x1000, 1000, "t")
    x = a.alloc(100)
    y = a.alloc(200)
    z = a.alloc(100)
    assert (x, y, z) == (0x1000, 0x1000 + 100, 0x1000 + 300)
    a.free(y)  # hole of 200 between x and z, tail of 600
    assert a.alloc(150) == y, "best fit takes the 200-byte hole, not the big tail"
    a.free(y)
    a.free(x)
    a.free(z)
    assert a.free_blocks() == [(0x1000, 1000)], "frees coalesce back into one block"
    a.check()


def test_alignment_is_absolute() -> None:
    a = RangeAllocator(0x1003, 10000)
    p = a.alloc(10, 4096)
    assert p % 4096 == 0 and p >= 0x1003
    q = a.alloc(1, 1)
    assert q == 0x1003, "the gap in front of an aligned chunk stays usable"
    a.check()


def test_misaligned_holes_do_not_make_search_linear_or_wrong() -> None:
    # Many 16-byte holes at odd addresses (none can hold 16 aligned to 16), one big tail.
    a = RangeAllocator(1, 100_000)
    starts = [a.alloc(16) for _ in range(2000)]
    for s in starts[::2]:
        a.free(s)
    a.check()
    p = a.alloc(16, 16)
    assert p % 16 == 0 and p > starts[-1]
    # With no big block left, a lucky hole is still found (the search is complete).
    b = RangeAllocator(0, 64)
    b.alloc_at(0, 8)
    b.alloc_at(24, 40)  # free: [8, 24): 16 bytes at 8
    assert b.alloc(8, 16) == 16


def test_errors() -> None:
    a = RangeAllocator(0x100, 0x100, "plddr")
    with pytest.raises(XrtError) as e:
        a.alloc(0x101)
    assert e.value.code == ErrorCode.OUT_OF_RANGE and "out of memory" in e.value.message
    a.alloc_at(0x180, 0x10)
    for addr, n in ((0xFF, 2), (0x1F8, 0x10), (0x17F, 2), (0x18F, 1), (0x170, 0x40)):
        with pytest.raises(XrtError) as e:
            a.alloc_at(addr, n)
        assert e.value.code == ErrorCode.OUT_OF_RANGE
    with pytest.raises(XrtError) as e:
        a.alloc_at(0x170, 0x20)
    assert "overlaps the allocated chunk [0x180, 0x190)" in e.value.message
    with pytest.raises(XrtError) as e:
        a.free(0x181)
    assert e.value.code == ErrorCode.WRONG_ORDER
    a.free(0x180)
    with pytest.raises(XrtError) as e:
        a.free(0x180)
    assert e.value.code == ErrorCode.WRONG_ORDER
    empty = RangeAllocator(0, 0)
    with pytest.raises(XrtError):
        empty.alloc(1)
    assert empty.largest_free == 0
    with pytest.raises(XrtError):
        RangeAllocator((1 << 64) - 1, 2)


def test_ten_thousand_live_chunks_stay_consistent() -> None:
    region = MemoryMemRegion("big", 0, 1 << 30, host_visible=False)
    chunks = [region.malloc(64 + (i % 7) * 8, True, 8) for i in range(10_000)]
    for c in chunks[::3]:
        c.free()
    chunks = [c for c in chunks if not c.is_freed]
    chunks += [region.malloc(100) for _ in range(1000)]
    m = region.mem_manager
    m._check()  # type: ignore[attr-defined]
    assert m.chunk_count == len(chunks)
    assert m.used_bytes == sum(c.size for c in chunks)


# -- the allocator against a model ---------------------------------------------------------


class AllocatorMachine(RuleBasedStateMachine):
    BASE = 0x1000
    SIZE = 4096

    def __init__(self) -> None:
        super().__init__()
        self.a = RangeAllocator(self.BASE, self.SIZE, "m")
        self.live: dict[int, int] = {}

    @rule(n=st.integers(1, 600), align_log=st.integers(0, 8))
    def alloc(self, n: int, align_log: int) -> None:
        align = 1 << align_log
        possible = fits(self.live, self.BASE, self.SIZE, n, align)
        try:
            p = self.a.alloc(n, align)
        except XrtError as e:
            assert e.code == ErrorCode.OUT_OF_RANGE
            assert not possible, "allocation failed although a gap could hold it"
            return
        assert possible
        assert p % align == 0 and p >= self.BASE and p + n <= self.BASE + self.SIZE
        for s, k in self.live.items():
            assert p + n <= s or s + k <= p, "overlap"
        self.live[p] = n

    @rule(off=st.integers(-8, 4100), n=st.integers(1, 300))
    def alloc_at(self, off: int, n: int) -> None:
        p = self.BASE + off
        ok = (
            p >= self.BASE
            and p + n <= self.BASE + self.SIZE
            and all(p + n <= s or s + k <= p for s, k in self.live.items())
        )
        try:
            self.a.alloc_at(p, n)
        except XrtError as e:
            assert e.code == ErrorCode.OUT_OF_RANGE and not ok
            return
        assert ok
        self.live[p] = n

    @precondition(lambda self: self.live)
    @rule(data=st.data())
    def free(self, data: st.DataObject) -> None:
        p = data.draw(st.sampled_from(sorted(self.live)))
        assert self.a.free(p) == self.live.pop(p)

    @rule(off=st.integers(0, 4096))
    def free_bad(self, off: int) -> None:
        p = self.BASE + off
        if p in self.live:
            return
        with pytest.raises(XrtError) as e:
            self.a.free(p)
        assert e.value.code == ErrorCode.WRONG_ORDER

    @invariant()
    def consistent(self) -> None:
        a = self.a
        a.check()
        assert a.allocations() == sorted(self.live.items())
        assert a.used_bytes == sum(self.live.values())
        assert a.used_bytes + a.free_bytes == self.SIZE
        g = gaps(self.live, self.BASE, self.SIZE)
        assert a.free_blocks() == g
        assert a.largest_free == max((k for _, k in g), default=0)


TestAllocatorMachine = AllocatorMachine.TestCase
TestAllocatorMachine.settings = SETTINGS


# -- whole regions: chunks, data, fixed addresses, automatic frees -------------------------


class RegionMachine(RuleBasedStateMachine):
    """A region with real chunks; every chunk holds a byte pattern naming it.

    The bundle holds keys, not chunks: `live` holds the only reference to each chunk, so
    dropping it really is the last reference going.
    """

    keys = Bundle("keys")
    SIZE = 8192

    def __init__(self) -> None:
        super().__init__()
        self.region = MemoryMemRegion("r", 0x10_0000, self.SIZE, host_visible=False)
        self.live: dict[int, tuple[MemChunk, int]] = {}  # key -> (chunk, pattern byte)
        self.freed: dict[int, MemChunk] = {}
        self.counter = 0
        self.deleted: list[int] = []

    def _record(self, c: MemChunk) -> int:
        self.counter += 1
        pat = self.counter % 251 + 1
        c.write(bytes([pat]) * c.size)
        self.live[self.counter] = (c, pat)
        return self.counter

    def _model(self) -> dict[int, int]:
        return {c.begin.addr: max(c.size, 1) for c, _ in self.live.values()}

    @rule(target=keys, n=st.integers(0, 700), align_log=st.integers(0, 7))
    def malloc(self, n: int, align_log: int) -> int:
        align = 1 << align_log
        possible = fits(self._model(), self.region.base, self.SIZE, max(n, 1), align)
        try:
            c = self.region.malloc(n, True, align)
        except XrtError as e:
            assert e.code == ErrorCode.OUT_OF_RANGE and not possible
            return 0
        assert possible and c.begin.addr % align == 0
        return self._record(c)

    @rule(target=keys, off=st.integers(0, 8200), n=st.integers(1, 400))
    def malloc_fixed(self, off: int, n: int) -> int:
        p = self.region.base + off
        model = self._model()
        ok = off + n <= self.SIZE and all(p + n <= s or s + k <= p for s, k in model.items())
        try:
            c = self.region.malloc(MemPtr(p), n, lambda ptr: self.deleted.append(ptr.addr))
        except XrtError as e:
            assert e.code == ErrorCode.OUT_OF_RANGE and not ok
            return 0
        assert ok and c.begin.addr == p
        return self._record(c)

    @rule(key=consumes(keys))
    def free(self, key: int) -> None:
        if key not in self.live:
            return
        c, _ = self.live.pop(key)
        c.free()
        assert c.is_freed
        self.freed[key] = c

    @rule(key=consumes(keys))
    def drop(self, key: int) -> None:
        """Forget the last reference: the chunk frees itself (calling its deleter)."""
        if key not in self.live:
            return
        c, _ = self.live.pop(key)
        addr, fixed = c.begin.addr, c._deleter is not None
        before = len(self.deleted)
        del c  # no gc.collect(): the last reference going frees it at once, by refcount
        assert all(x.begin.addr != addr for x in self.region.mem_manager.all_chunks())
        if fixed:
            assert self.deleted[before:] == [addr], "deleter not called exactly once"

    @precondition(lambda self: self.freed)
    @rule(data=st.data())
    def use_after_free(self, data: st.DataObject) -> None:
        c = self.freed[data.draw(st.sampled_from(sorted(self.freed)))]
        for op in (c.free, lambda: c.write(b"x"), lambda: c.tobytes()):
            with pytest.raises(XrtError) as e:
                op()
            assert e.value.code == ErrorCode.WRONG_ORDER

    @invariant()
    def consistent(self) -> None:
        m = self.region.mem_manager
        m._check()  # type: ignore[attr-defined]
        model = self._model()
        assert m.chunk_count == len(model)
        assert m.used_bytes == sum(model.values())
        assert m.used_bytes + m.free_bytes == self.SIZE
        assert m.largest_free_block == max(
            (k for _, k in gaps(model, self.region.base, self.SIZE)), default=0
        )
        listed = m.all_chunks()
        assert [c.begin.addr for c in listed] == sorted(model)
        for c, pat in self.live.values():
            assert c.tobytes() == bytes([pat]) * c.size, "a chunk's data was overwritten"
            assert m.get_chunk(c.begin, c.size) is c


TestRegionMachine = RegionMachine.TestCase
TestRegionMachine.settings = SETTINGS


class HostRegionMachine(RuleBasedStateMachine):
    """The host region: OS allocations plus adopted slices of a caller's buffer."""

    def __init__(self) -> None:
        super().__init__()
        self.region = HostMemRegion("h", capacity=1 << 16)
        self.buffer = bytearray(2048)
        self.live: list[MemChunk] = []

    @rule(n=st.integers(0, 5000), align_log=st.integers(0, 12))
    def malloc(self, n: int, align_log: int) -> None:
        used = sum(max(c.size, 1) for c in self.live)
        try:
            c = self.region.malloc(n, True, 1 << align_log)
        except XrtError as e:
            assert e.code == ErrorCode.OUT_OF_RANGE and used + max(n, 1) > 1 << 16
            return
        assert c.begin.host_address % max(1 << align_log, 64) == 0
        assert bytes(c.view()) == bytes(n), "fresh host chunks are zeroed"
        self.live.append(c)

    @rule(off=st.integers(0, 2048), n=st.integers(1, 300))
    def adopt(self, off: int, n: int) -> None:
        if off + n > len(self.buffer):
            with pytest.raises(XrtError) as e:
                self.region.malloc(MemPtr(self.buffer, offset=off), n)
            assert e.value.code == ErrorCode.OUT_OF_RANGE
            return
        mine = [c for c in self.live if c.begin.buffer.obj is self.buffer]
        clash = any(off < c.begin.offset + c.size and c.begin.offset < off + n for c in mine)
        try:
            c = self.region.malloc(MemPtr(self.buffer, offset=off), n)
        except XrtError as e:
            assert e.code == ErrorCode.OUT_OF_RANGE and clash
            return
        assert not clash
        c.write(b"\x5a" * n)
        assert self.buffer[off : off + n] == b"\x5a" * n, "adopted chunks alias the buffer"
        self.live.append(c)

    @precondition(lambda self: self.live)
    @rule(data=st.data())
    def free(self, data: st.DataObject) -> None:
        c = self.live.pop(data.draw(st.integers(0, len(self.live) - 1)))
        c.free()

    @invariant()
    def consistent(self) -> None:
        m = self.region.mem_manager
        assert m.chunk_count == len(self.live)
        assert m.used_bytes == sum(max(c.size, 1) for c in self.live)
        assert m.free_bytes == (1 << 16) - m.used_bytes
        spans = sorted((c.begin.host_address, max(c.size, 1)) for c in self.live)
        for (s1, n1), (s2, _) in pairwise(spans):
            assert s1 + n1 <= s2


TestHostRegionMachine = HostRegionMachine.TestCase
TestHostRegionMachine.settings = SETTINGS
