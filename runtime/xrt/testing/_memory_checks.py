"""The contract checks of `MemRegion` (`xrt.testing.contracts.MEM_REGION_CHECKS`): geometry,
data round trips and bounds, copies within and across regions, allocation, automatic
frees, running out of memory, introspection and host views."""

from __future__ import annotations

import random
from collections.abc import Callable
from itertools import pairwise

import numpy as np

from xrt.errors import ErrorCode
from xrt.memory import HostMemRegion, MemRegion
from xrt.memptr import MemPtr, PtrKind
from xrt.testing._check_tools import MemRegionFactory, expect_error

__all__ = ["MEM_REGION_CHECKS", "MIN_REGION_BYTES"]

MIN_REGION_BYTES = 64 << 10
"""The smallest region the checks are given."""


def _rand(n: int, seed: int) -> bytes:
    return random.Random(seed).randbytes(n)


def _aligned(r: MemRegion, offset: int) -> int:
    """The first address at or after ``base + offset`` that fixed-address malloc accepts."""
    a = r.min_alignment
    return (r.base + offset + a - 1) // a * a


# -- MemRegion -----------------------------------------------------------------------------


def check_geometry(make_region: MemRegionFactory) -> None:
    """A fresh region is open, at least 64 KiB, inside 64 bits and empty."""
    r = make_region()
    assert isinstance(r, MemRegion) and not r.closed
    assert isinstance(r.name, str) and r.name
    assert r.size >= MIN_REGION_BYTES, f"contract regions need >= 64 KiB, got {r.size}"
    assert r.base >= 0 and r.end == r.base + r.size <= 1 << 64
    m = r.mem_manager
    assert m.all_chunks() == [] and m.chunk_count == 0
    assert m.used_bytes == 0 and m.free_bytes == r.size and m.largest_free_block == r.size
    assert r.contains(r.base) and r.contains(r.end - 1) and not r.contains(r.end)
    assert r.contains(r.base, r.size) and not r.contains(r.base, r.size + 1)


def check_write_read_roundtrip(make_region: MemRegionFactory) -> None:
    """Bytes written at the start, inside and at the very end read back unchanged, through
    int addresses and MemPtrs, into bytearrays, memoryviews and numpy arrays."""
    r = make_region()
    for where, n in ((r.base, 17), (r.base + 4093, 1000), (r.end - 64, 64), (r.end - 1, 1)):
        data = _rand(n, where)
        r.write(where, data)
        out = bytearray(n)
        r.read(out, where)
        assert bytes(out) == data, f"roundtrip at {where:#x}"
        arr = np.zeros(n, dtype=np.uint8)
        r.read(arr, MemPtr(where), n)
        assert arr.tobytes() == data
        mv = memoryview(bytearray(n + 5))
        r.read(mv, r.ptr(where), n)
        assert mv[:n].tobytes() == data
    # A source of any numpy layout, and a partial write.
    src = np.arange(64, dtype=np.uint32).reshape(8, 8)[:, ::2]
    r.write(r.base + 128, src)
    back = np.zeros(32, dtype=np.uint32)
    r.read(back, r.base + 128)
    assert np.array_equal(back, src.reshape(-1))
    r.write(r.base + 128, b"\xff" * 100, 3)
    got = bytearray(8)
    r.read(got, r.base + 128)
    assert bytes(got) == b"\xff\xff\xff" + back.tobytes()[3:8]


def check_zero_length(make_region: MemRegionFactory) -> None:
    """Zero-byte reads, writes and copies are valid anywhere in [base, end]."""
    r = make_region()
    r.write(r.end, b"")
    r.read(bytearray(), r.end)
    r.read(bytearray(4), r.base, 0)
    r.memcpy(r.end, r.base, 0)


def check_bounds(make_region: MemRegionFactory) -> None:
    """Every access leaving the region, or its host buffer, raises 11003."""
    r = make_region()
    with expect_error(ErrorCode.OUT_OF_RANGE):
        r.write(r.end - 3, b"abcd")
    with expect_error(ErrorCode.OUT_OF_RANGE):
        r.read(bytearray(2), r.end - 1)
    with expect_error(ErrorCode.OUT_OF_RANGE):
        r.read(bytearray(1), r.end)
    if r.base > 0:
        with expect_error(ErrorCode.OUT_OF_RANGE):
            r.read(bytearray(1), r.base - 1)
    with expect_error(ErrorCode.OUT_OF_RANGE):
        r.read(bytearray(4), r.base, -1)
    with expect_error(ErrorCode.OUT_OF_RANGE):
        r.read(bytearray(4), r.base, 5)
    with expect_error(ErrorCode.OUT_OF_RANGE):
        r.write(r.base, b"ab", 3)
    with expect_error(ErrorCode.OUT_OF_RANGE):
        r.memcpy(r.base, r.end - 8, 16)
    with expect_error(ErrorCode.OUT_OF_RANGE):
        r.memcpy(r.end - 8, r.base, 16)
    with expect_error(ErrorCode.OUT_OF_RANGE):
        r.ptr(r.end + 1)
    with expect_error(ErrorCode.OUT_OF_RANGE):
        r.view(r.end, 1)


def check_argument_types(make_region: MemRegionFactory) -> None:
    """Wrong types raise 11010: float and str addresses, host-only pointers, read-only
    destinations, non-buffers, a bad source region."""
    r = make_region()
    with expect_error(ErrorCode.WRONG_TYPE):
        r.write(float(r.base), b"a")  # type: ignore[arg-type]
    with expect_error(ErrorCode.WRONG_TYPE):
        r.read(bytearray(1), str(r.base))  # type: ignore[arg-type]
    with expect_error(ErrorCode.WRONG_TYPE):
        r.write(MemPtr(bytearray(4)), b"a")
    with expect_error(ErrorCode.WRONG_TYPE):
        r.read(b"immutable", r.base)
    with expect_error(ErrorCode.WRONG_TYPE):
        r.write(r.base, 12345)  # type: ignore[arg-type]
    with expect_error(ErrorCode.WRONG_TYPE):
        r.read(bytearray(1), r.base, 1.0)  # type: ignore[arg-type]
    with expect_error(ErrorCode.WRONG_TYPE):
        r.memcpy(r.base, "plddr", r.base, 1)  # type: ignore[call-overload]
    with expect_error(ErrorCode.WRONG_TYPE):
        r.memcpy(r.base)  # type: ignore[call-overload]


def check_memcpy_same_region(make_region: MemRegionFactory) -> None:
    """memcpy inside a region copies like memmove, overlapping either way."""
    r = make_region()
    data = _rand(4096, 1)
    r.write(r.base, data)
    r.memcpy(r.base + 8192, r.base, 4096)
    got = bytearray(4096)
    r.read(got, r.base + 8192)
    assert bytes(got) == data
    r.memcpy(r.ptr(r.base + 100), r.ptr(r.base), 4096)  # forward overlap
    r.read(got, r.base + 100)
    assert bytes(got) == data
    r.write(r.base, data)
    r.memcpy(r.base, r.base + 100, 3996)  # backward overlap
    got2 = bytearray(3996)
    r.read(got2, r.base)
    assert bytes(got2) == data[100:]


def check_memcpy_cross_region(make_region: MemRegionFactory) -> None:
    """memcpy between two regions and between a region and host memory moves the bytes."""
    a = make_region()
    b = make_region()
    host = HostMemRegion("contract-host")
    data = _rand(40000, 2)
    a.write(a.base + 12, data)
    b.memcpy(b.base + 300, a, a.base + 12, len(data))
    got = bytearray(len(data))
    b.read(got, b.base + 300)
    assert bytes(got) == data
    hc = host.malloc(len(data))
    host.memcpy(hc.begin, b, b.base + 300, len(data))
    assert hc.tobytes() == data
    hc.write(data[::-1])
    a.memcpy(a.base, host, hc.begin, len(data))
    a.read(got, a.base)
    assert bytes(got) == data[::-1]
    with expect_error(ErrorCode.OUT_OF_RANGE):
        a.memcpy(a.base, host, hc.begin, len(data) + 1)


def check_large_transfer(make_region: MemRegionFactory) -> None:
    """A transfer of most of the region (odd size, odd address) round-trips intact."""
    r = make_region()
    n = min(r.size - 3, 3 << 20) - 1
    data = np.frombuffer(_rand(n, 3), dtype=np.uint8)
    r.write(r.base + 3, data)
    out = np.empty(n, dtype=np.uint8)
    r.read(out, r.base + 3)
    assert np.array_equal(out, data)


def check_malloc_and_free(make_region: MemRegionFactory) -> None:
    """Chunks lie inside the region, are aligned, never overlap, hold their data, and free
    returns their bytes; a second free and use after free raise 11012."""
    r = make_region()
    m = r.mem_manager
    chunks = []
    for i, (n, align) in enumerate([(1, 1), (100, 8), (4096, 4096), (0, 1), (333, 64)]):
        c = r.malloc(n, True, align)
        assert c.size == n and c.region is r and c.is_on(r) and not c.is_freed
        assert c.begin.kind in (PtrKind.ADDR, PtrKind.BOTH)
        assert c.begin.addr % max(align, r.min_alignment) == 0
        assert r.contains(c.begin, n)
        c.write(bytes([i + 1]) * n)
        chunks.append(c)
    spans = sorted((c.begin.addr, max(c.size, 1)) for c in chunks)
    for (s1, n1), (s2, _) in pairwise(spans):
        assert s1 + n1 <= s2, "chunks overlap"
    for i, c in enumerate(chunks):
        assert c.tobytes() == bytes([i + 1]) * c.size
    assert m.chunk_count == len(chunks)
    assert m.used_bytes >= sum(c.size for c in chunks)
    for c in chunks:
        c.free()
        assert c.is_freed
    assert m.used_bytes == 0 and m.chunk_count == 0 and m.free_bytes == r.size
    c = chunks[1]
    with expect_error(ErrorCode.WRONG_ORDER):
        c.free()
    with expect_error(ErrorCode.WRONG_ORDER):
        c.write(b"x")
    with expect_error(ErrorCode.WRONG_ORDER):
        c.read(bytearray(1))
    with expect_error(ErrorCode.WRONG_ORDER):
        r.free(c.begin)


def check_malloc_arguments(make_region: MemRegionFactory) -> None:
    """Bad malloc arguments raise: negative size and bad alignment 11003, wrong types 11010."""
    r = make_region()
    with expect_error(ErrorCode.OUT_OF_RANGE):
        r.malloc(-1)
    with expect_error(ErrorCode.OUT_OF_RANGE):
        r.malloc(16, True, 3)
    with expect_error(ErrorCode.OUT_OF_RANGE):
        r.malloc(16, True, 0)
    with expect_error(ErrorCode.WRONG_TYPE):
        r.malloc(16.0)  # type: ignore[call-overload]
    with expect_error(ErrorCode.WRONG_TYPE):
        r.malloc(16, 1)  # type: ignore[call-overload]
    with expect_error(ErrorCode.WRONG_TYPE):
        r.malloc(MemPtr(r.base), 16, "not callable")  # type: ignore[call-overload]
    assert r.mem_manager.chunk_count == 0


def check_malloc_fixed_address(make_region: MemRegionFactory) -> None:
    """malloc(begin, n) takes exactly that range, refuses overlaps and ranges outside the
    region (11003), and calls its deleter once when freed."""
    r = make_region()
    calls: list[MemPtr] = []
    at = _aligned(r, 4096)
    c = r.malloc(MemPtr(at), 256, calls.append)
    assert c.begin.addr == at and c.size == 256
    assert r.mem_manager.get_chunk(MemPtr(at), 256) is c
    for begin, n in ((at, 1), (at + 255, 10), (at - 10, 11), (at - 100, 1000)):
        with expect_error(ErrorCode.OUT_OF_RANGE):
            r.malloc(MemPtr(begin), n)
    with expect_error(ErrorCode.OUT_OF_RANGE):
        r.malloc(MemPtr(r.end - r.min_alignment), 2 * r.min_alignment)
    d = r.malloc(MemPtr(at + 256), 64)  # adjacent is fine
    assert d.begin.addr == at + 256
    c.free()
    assert calls == [c.begin]
    d.free()
    assert calls == [c.begin]
    e = r.malloc(MemPtr(at), 256)  # the range is free again
    e.free()


def check_auto_free(make_region: MemRegionFactory) -> None:
    """An auto_free chunk is freed (deleter included) with its last reference; an
    auto_free=False chunk stays listed until freed explicitly."""
    import gc

    r = make_region()
    m = r.mem_manager
    calls: list[MemPtr] = []
    at = _aligned(r, 64)
    c = r.malloc(MemPtr(at), 64, calls.append)
    alias = c
    del c
    assert m.chunk_count == 1 and not calls
    del alias
    gc.collect()
    assert m.chunk_count == 0 and m.used_bytes == 0
    assert calls == [MemPtr(at)]
    kept = r.malloc(128, False)
    addr = kept.begin.addr
    del kept
    gc.collect()
    again = m.get_chunk(addr, 128)
    assert again is not None and not again.auto_free
    r.free(addr)
    assert again.is_freed and m.chunk_count == 0


def check_out_of_memory(make_region: MemRegionFactory) -> None:
    """Running out of memory raises 11003 and leaves the region usable."""
    r = make_region()
    with expect_error(ErrorCode.OUT_OF_RANGE):
        r.malloc(r.size + 1)
    big = r.malloc(r.size - 1024)
    with expect_error(ErrorCode.OUT_OF_RANGE):
        r.malloc(2048)
    small = r.malloc(512)
    assert r.mem_manager.free_bytes == 512
    big.free()
    r.malloc(2048).free()
    small.free()
    assert r.mem_manager.used_bytes == 0


def check_introspection(make_region: MemRegionFactory) -> None:
    """all_chunks lists live chunks in address order; get_chunk finds exact (begin, size)."""
    r = make_region()
    m = r.mem_manager
    cs = [r.malloc(n) for n in (10, 20, 30)]
    listed = m.all_chunks()
    assert [c.begin.addr for c in listed] == sorted(c.begin.addr for c in cs)
    assert {id(c) for c in listed} == {id(c) for c in cs}
    assert m.get_chunk(cs[1].begin, 20) is cs[1]
    assert m.get_chunk(cs[1].begin.addr, 20) is cs[1]
    assert m.get_chunk(cs[1].begin, 21) is None
    assert m.get_chunk(cs[1].begin + 1, 19) is None
    info = m.info()
    assert info["chunks"] == 3 and info["used"] == m.used_bytes >= 60
    assert info["free"] == r.size - info["used"]
    cs[1].free()
    assert m.get_chunk(cs[1].begin, 20) is None
    assert [c.size for c in m.all_chunks()] == [10, 30]


def check_host_view(make_region: MemRegionFactory) -> None:
    """Host-visible regions give BOTH pointers and zero-copy views that see every write;
    other regions give ADDR pointers and refuse views with 11010."""
    r = make_region()
    c = r.malloc(256)
    if r.host_visible:
        assert c.begin.kind is PtrKind.BOTH
        v = c.view()
        c.write(b"\x11" * 256)
        assert v.tobytes() == b"\x11" * 256
        v[:4] = b"abcd"
        assert c.tobytes(0, 4) == b"abcd"
        out = bytearray(4)
        r.read(out, c.begin)
        assert out == b"abcd"
    else:
        assert c.begin.kind is PtrKind.ADDR
        with expect_error(ErrorCode.WRONG_TYPE):
            c.view()


MEM_REGION_CHECKS: tuple[Callable[[MemRegionFactory], None], ...] = (
    check_geometry,
    check_write_read_roundtrip,
    check_zero_length,
    check_bounds,
    check_argument_types,
    check_memcpy_same_region,
    check_memcpy_cross_region,
    check_large_transfer,
    check_malloc_and_free,
    check_malloc_arguments,
    check_malloc_fixed_address,
    check_auto_free,
    check_out_of_memory,
    check_introspection,
    check_host_view,
)
