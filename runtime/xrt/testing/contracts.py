"""Contract checks every transport must pass: the behaviour of `MemRegion`, `RegRegion` and
`Device` that the runtime relies on, whatever carries the bytes (memory, gRPC, mmap).

Each check is a plain function taking a *factory* and raising AssertionError (or an
unexpected exception) on failure; it needs no test framework. Run a suite with pytest by
parametrizing over it::

    from xrt.testing.contracts import MEM_REGION_CHECKS, check_id

    @pytest.mark.parametrize("check", MEM_REGION_CHECKS, ids=check_id)
    def test_mem_region(check, make_region):
        check(make_region)

Factories:

- `MEM_REGION_CHECKS` take ``make_region() -> MemRegion``: a fresh, open, empty region
  (no live chunks) of at least 64 KiB, with min_alignment <= 64 and a base that is a
  multiple of it. Several calls may be made per check and must return distinct regions
  (cross-region copies are tested between two).
- `REG_REGION_CHECKS` take ``make_target() -> RegTarget``: an open register region plus the
  offset of a side-effect-free read/write 32-bit register (e.g. the NPU's ``SCRATCH``) and,
  optionally, a constant read-only register.
- `DEVICE_CHECKS` take ``make_device() -> Device``: a freshly opened device the check
  closes itself.

Cleaning up what factories opened (connections, leases) is the caller's business.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import pairwise

import numpy as np

from xrt.device import Device
from xrt.errors import ErrorCode, XrtError
from xrt.memory import HostMemRegion, MemRegion
from xrt.memptr import MemPtr, PtrKind
from xrt.registers import RegMaskedWrite, RegPoll, RegRead, RegRegion, RegWrite

__all__ = [
    "DEVICE_CHECKS",
    "MEM_REGION_CHECKS",
    "REG_REGION_CHECKS",
    "RegTarget",
    "check_id",
    "expect_error",
    "run_checks",
]

MIN_REGION_BYTES = 64 << 10


@dataclass
class RegTarget:
    """What the register checks need to know about a register region.

    Attributes:
        region: The region under test (open).
        scratch: Offset of a plain 32-bit read/write register without side effects.
        constant: ``(offset, value)`` of a read-only register with a fixed value, if any.
    """

    region: RegRegion
    scratch: int
    constant: tuple[int, int] | None = None


MemRegionFactory = Callable[[], MemRegion]
RegTargetFactory = Callable[[], RegTarget]
DeviceFactory = Callable[[], Device]


@contextmanager
def expect_error(code: ErrorCode) -> Iterator[None]:
    """Assert that the block raises XrtError with `code`."""
    try:
        yield
    except XrtError as exc:
        assert exc.code == code, f"expected XrtError {int(code)}, got {exc}"
        assert exc.message, "an XrtError must say what was wrong"
    else:
        raise AssertionError(f"expected XrtError {int(code)} ({code.name}), nothing raised")


def check_id(check: Callable[..., object]) -> str:
    """A readable test id for a check (``write_read_roundtrip``)."""
    return check.__name__.removeprefix("check_")


def run_checks(checks: tuple[Callable[..., None], ...], factory: Callable[[], object]) -> dict:
    """Run checks outside pytest; returns ``{check name: exception}`` for the failures."""
    failures = {}
    for check in checks:
        try:
            check(factory)
        except Exception as exc:
            failures[check_id(check)] = exc
    return failures


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


# -- RegRegion -----------------------------------------------------------------------------


def check_reg_roundtrip(make_target: RegTargetFactory) -> None:
    """The scratch register holds what is written, through absolute and relative addresses."""
    t = make_target()
    r = t.region
    for v in (0, 0xFFFF_FFFF, 0x1234_5678, 0x8000_0001):
        r.write(r.base + t.scratch, v)
        assert r.read(r.base + t.scratch) == v
        assert r.read(t.scratch, relative=True) == v
    r.write(t.scratch, 0xCAFE_F00D, relative=True)
    assert r.read(r.base + t.scratch) == 0xCAFE_F00D


def check_reg_constant(make_target: RegTargetFactory) -> None:
    """A read-only constant register reads its value, and a write leaves it unchanged.

    The bus may ignore the write (a register model) or refuse it: the generated CSR blocks
    answer SLVERR to a write of a read-only register, which a transport reports as
    XrtError 11014. Either way the value stays.
    """
    t = make_target()
    if t.constant is None:
        return
    off, value = t.constant
    r = t.region
    assert r.read(off, relative=True) == value
    try:
        r.write(off, value ^ 0xFFFF_FFFF, relative=True)
    except XrtError as exc:
        assert exc.code == ErrorCode.DEVICE_INTERNAL, f"a refused write must raise 11014: {exc}"
        assert exc.message, "an XrtError must say what was wrong"
    assert r.read(off, relative=True) == value


def check_reg_bad_access(make_target: RegTargetFactory) -> None:
    """Misaligned or out-of-range addresses and values not fitting 32 bits raise 11003;
    wrong types raise 11010; nothing reaches the device."""
    t = make_target()
    r = t.region
    r.write(t.scratch, 0x55, relative=True)
    for bad in (r.base + t.scratch + 1, r.base + t.scratch + 2, r.base - 4, r.end, r.end + 4):
        with expect_error(ErrorCode.OUT_OF_RANGE):
            r.read(bad)
        with expect_error(ErrorCode.OUT_OF_RANGE):
            r.write(bad, 0)
    for bad in (-4, r.size, t.scratch + 1):
        with expect_error(ErrorCode.OUT_OF_RANGE):
            r.read(bad, relative=True)
    for value in (-1, 1 << 32):
        with expect_error(ErrorCode.OUT_OF_RANGE):
            r.write(t.scratch, value, relative=True)
    with expect_error(ErrorCode.WRONG_TYPE):
        r.read(float(r.base + t.scratch))  # type: ignore[arg-type]
    with expect_error(ErrorCode.WRONG_TYPE):
        r.write(r.base + t.scratch, True)
    with expect_error(ErrorCode.WRONG_TYPE):
        r.write(r.base + t.scratch, 1.5)  # type: ignore[arg-type]
    assert r.read(t.scratch, relative=True) == 0x55


def check_reg_batch(make_target: RegTargetFactory) -> None:
    """A batch runs its ops in order and returns one result per op."""
    t = make_target()
    r = t.region
    a = r.base + t.scratch
    results = r.execute(
        [
            RegWrite(a, 0x0000_00F0),
            RegRead(a),
            RegMaskedWrite(a, 0x0000_0A0F, 0x0000_0F0F),
            RegRead(a),
            RegPoll(a, 0x0000_0FFF, 0x0000_0AFF, max_polls=5),
            RegWrite(a, 7),
        ]
    )
    assert results == [None, 0xF0, None, 0xAFF, 0xAFF, None]
    assert r.read(a) == 7
    assert r.execute([]) == []
    rel = r.execute([RegWrite(t.scratch, 9), RegRead(t.scratch)], relative=True)
    assert rel == [None, 9]
    with r.batch(relative=True) as b:
        b.write(t.scratch, 0x1111)
        i = b.read(t.scratch)
    assert b.results is not None and b.results[i] == 0x1111


def check_reg_batch_checked_first(make_target: RegTargetFactory) -> None:
    """A batch with one bad op raises before any op runs."""
    t = make_target()
    r = t.region
    r.write(t.scratch, 1, relative=True)
    bad_ops = (
        RegWrite(r.end, 0),
        RegWrite(r.base + t.scratch + 2, 0),
        RegMaskedWrite(r.base + t.scratch, 1 << 32, 1),
        RegPoll(r.base + t.scratch, 0x1, 0x3, max_polls=1),
        RegPoll(r.base + t.scratch, 0x1, 0x1, max_polls=0),
    )
    for bad in bad_ops:
        with expect_error(ErrorCode.OUT_OF_RANGE):
            r.execute([RegWrite(r.base + t.scratch, 2), bad])
        assert r.read(t.scratch, relative=True) == 1, f"{bad!r} let earlier ops run"
    with expect_error(ErrorCode.WRONG_TYPE):
        r.execute([RegWrite(r.base + t.scratch, 2), "read"])  # type: ignore[list-item]
    with expect_error(ErrorCode.WRONG_TYPE):
        r.execute(RegRead(r.base + t.scratch))  # type: ignore[arg-type]
    assert r.read(t.scratch, relative=True) == 1


def check_reg_poll_timeout(make_target: RegTargetFactory) -> None:
    """A poll whose condition never holds raises 11015 (by count and by time); the ops
    before it have run, the ones after it have not."""
    t = make_target()
    r = t.region
    a = r.base + t.scratch
    r.write(a, 0)
    with expect_error(ErrorCode.TIMEOUT):
        r.execute([RegWrite(a, 5), RegPoll(a, 0xF, 0x6, max_polls=3), RegWrite(a, 9)])
    assert r.read(a) == 5
    with expect_error(ErrorCode.TIMEOUT):
        r.poll(a, 0xF, 0x6, timeout_s=0.02, interval_s=0.005)
    assert r.poll(a, 0xF, 0x5, timeout_s=0.0) == 5


def check_reg_named_access(make_target: RegTargetFactory) -> None:
    """With a map whose register at the scratch offset is plain read/write, named access
    reads and writes the same bits as raw access."""
    t = make_target()
    r = t.region
    if r.regmap is None:
        with expect_error(ErrorCode.WRONG_ORDER):
            _ = r.regs
        return
    info = r.regmap.at(t.scratch)
    if info is None:
        return
    reg = r.regs[info.name]
    assert reg.address == r.base + t.scratch
    reg.write(0x0BAD_F00D)
    assert r.read(t.scratch, relative=True) == 0x0BAD_F00D == reg.read()
    f = info.fields[0]
    reg.modify(**{f.name: 1})
    assert f.extract(r.read(t.scratch, relative=True)) == 1
    with expect_error(ErrorCode.WRONG_TYPE):
        _ = r.regs.NO_SUCH_REGISTER_XYZ


REG_REGION_CHECKS: tuple[Callable[[RegTargetFactory], None], ...] = (
    check_reg_roundtrip,
    check_reg_constant,
    check_reg_bad_access,
    check_reg_batch,
    check_reg_batch_checked_first,
    check_reg_poll_timeout,
    check_reg_named_access,
)


# -- Device --------------------------------------------------------------------------------


def check_device_regions(make_device: DeviceFactory) -> None:
    """Regions are reachable by name and as defaults; unknown names raise 11010."""
    with make_device() as dev:
        for name, region in dev.mem_regions.items():
            assert dev.get_mem_region(name) is region and region.device is dev
        for name, region in dev.reg_regions.items():
            assert dev.get_reg_region(name) is region and region.device is dev
        if dev.mem_regions:
            assert dev.default_mem_region() in dev.mem_regions.values()
            c = dev.malloc(64)
            assert c.is_on(dev.default_mem_region())
            c.free()
        else:
            with expect_error(ErrorCode.WRONG_TYPE):
                dev.default_mem_region()
        if dev.reg_regions:
            assert dev.default_reg_region() in dev.reg_regions.values()
        else:
            with expect_error(ErrorCode.WRONG_TYPE):
                dev.default_reg_region()
        with expect_error(ErrorCode.WRONG_TYPE):
            dev.get_mem_region("no-such-region")
        with expect_error(ErrorCode.WRONG_TYPE):
            dev.get_reg_region("no-such-region")


def check_device_close(make_device: DeviceFactory) -> None:
    """close() is idempotent; afterwards the device and its regions raise 11012."""
    dev = make_device()
    mems = list(dev.mem_regions.values())
    regs = list(dev.reg_regions.values())
    chunk = mems[0].malloc(16) if mems else None
    with dev:
        pass
    assert dev.closed
    dev.close()
    with expect_error(ErrorCode.WRONG_ORDER):
        dev.get_mem_region("anything")
    for m in mems:
        assert m.closed
        with expect_error(ErrorCode.WRONG_ORDER):
            m.read(bytearray(1), m.base)
        with expect_error(ErrorCode.WRONG_ORDER):
            m.malloc(1)
    for r in regs:
        assert r.closed
        with expect_error(ErrorCode.WRONG_ORDER):
            r.read(r.base)
        with expect_error(ErrorCode.WRONG_ORDER):
            r.execute([RegRead(r.base)])
    if chunk is not None:
        with expect_error(ErrorCode.WRONG_ORDER):
            chunk.write(b"x")


def check_device_irq(make_device: DeviceFactory) -> None:
    """wait_irq: 11012 on devices without an interrupt line, a bool on the others."""
    with make_device() as dev:
        with expect_error(ErrorCode.OUT_OF_RANGE):
            dev.wait_irq(-1)
        if dev.has_irq:
            assert isinstance(dev.wait_irq(0.0), bool)
        else:
            with expect_error(ErrorCode.WRONG_ORDER):
                dev.wait_irq(0.0)


DEVICE_CHECKS: tuple[Callable[[DeviceFactory], None], ...] = (
    check_device_regions,
    check_device_close,
    check_device_irq,
)
