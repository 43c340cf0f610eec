"""MemRegion and MemChunk beyond the transport contract: chunk I/O with every buffer type,
copies between regions, deferred and concurrent frees, deleters, host memory, transports
that misbehave."""

from __future__ import annotations

import gc
import threading
import warnings

import numpy as np
import pytest

import xrt.memory.regions
from xrt import ErrorCode, HostMemRegion, MemChunk, MemPtr, MemRegion, PtrKind, XrtError
from xrt.testing.memory_transport import MemoryMemRegion


def raises(code: ErrorCode) -> pytest.RaisesContext:  # type: ignore[type-arg]
    return pytest.raises(XrtError, check=lambda e: e.code == code)


@pytest.fixture(params=[True, False], ids=["visible", "hooks"])
def region(request: pytest.FixtureRequest) -> MemoryMemRegion:
    return MemoryMemRegion("plddr", 0x8000_0000, 1 << 20, host_visible=request.param)


def test_chunk_io_with_every_buffer_type(region: MemRegion) -> None:
    c = region.malloc(64)
    c.write(b"0123456789")
    c.write(memoryview(b"AB"), 2)
    c.write(np.array([0x44434241], dtype="<u4"), 10)  # "ABCD"
    c.write(bytearray(b"xyz"), 14, 2)
    assert c.tobytes(0, 16) == b"01AB456789ABCDxy"
    out = bytearray(4)
    c.read(out, 2)
    assert out == b"AB45"
    arr = np.zeros(2, dtype=np.uint16)
    c.read(arr, 0)
    assert arr.tobytes() == b"01AB"
    ptr_dest = bytearray(8)
    c.read(MemPtr(ptr_dest, offset=4), 0, 4)
    assert ptr_dest == b"\0\0\0\x0001AB"
    strided = np.arange(16, dtype=np.uint8)[::2]
    c.write(strided, 20)
    assert c.tobytes(20, 8) == bytes(range(0, 16, 2))
    f32 = np.zeros((2, 2), dtype=np.float32)
    c.write(np.float32([[1.5, -2], [3, 4]]), 32)
    c.read(f32, 32)
    assert f32.tolist() == [[1.5, -2.0], [3.0, 4.0]]


def test_chunk_io_errors(region: MemRegion) -> None:
    c = region.malloc(16)
    with raises(ErrorCode.OUT_OF_RANGE):
        c.write(b"x" * 17)
    with raises(ErrorCode.OUT_OF_RANGE):
        c.write(b"x", 16)
    with raises(ErrorCode.OUT_OF_RANGE):
        c.read(bytearray(4), 13)
    with raises(ErrorCode.OUT_OF_RANGE):
        c.read(bytearray(4), 0, 5)
    with raises(ErrorCode.OUT_OF_RANGE):
        c.tobytes(-1)
    with raises(ErrorCode.OUT_OF_RANGE):
        c.tobytes(0, 17)
    with raises(ErrorCode.WRONG_TYPE):
        c.read(b"readonly")
    with raises(ErrorCode.WRONG_TYPE):
        c.read(np.zeros(8, np.uint8)[::2])
    with raises(ErrorCode.WRONG_TYPE):
        c.write("text")  # type: ignore[arg-type]
    with raises(ErrorCode.WRONG_TYPE):
        c.write(b"x", 1.0)  # type: ignore[arg-type]
    with raises(ErrorCode.WRONG_TYPE):
        c.copy_from(b"not a chunk")  # type: ignore[arg-type]
    with raises(ErrorCode.WRONG_ORDER):
        MemChunk()
    with raises(ErrorCode.WRONG_ORDER):
        MemChunk(region, MemPtr(0), 16)


def test_copy_from_any_region_to_any_region(region: MemRegion) -> None:
    other = MemoryMemRegion("udma", 0x1000_0000, 1 << 16, host_visible=True)
    host = HostMemRegion()
    payload = bytes(range(256)) * 4
    h = host.malloc(len(payload))
    h.write(payload)
    d = region.malloc(len(payload))
    d.copy_from(h)
    u = other.malloc(len(payload) + 10)
    u.copy_from(d, dest_offset=10)
    h2 = host.malloc(100)
    h2.copy_from(u, src_offset=10 + 50, nbytes=100)
    assert h2.tobytes() == payload[50:150]
    same = region.malloc(len(payload))
    same.copy_from(d, src_offset=1, nbytes=len(payload) - 1)
    assert same.tobytes(0, len(payload) - 1) == payload[1:]
    with raises(ErrorCode.OUT_OF_RANGE):
        h2.copy_from(u)  # 1034 bytes do not fit 100
    with raises(ErrorCode.OUT_OF_RANGE):
        d.copy_from(h, src_offset=1025)


def test_free_through_the_region(region: MemRegion) -> None:
    a, b, c = region.malloc(8), region.malloc(8), region.malloc(8)
    region.free(a)
    region.free(b.begin)
    region.free(c.begin.addr)
    assert a.is_freed and b.is_freed and c.is_freed
    assert region.mem_manager.chunk_count == 0
    with raises(ErrorCode.WRONG_ORDER):
        region.free(a)
    with raises(ErrorCode.WRONG_ORDER):
        region.free(region.base + 8)
    other = MemoryMemRegion("x", 0, 4096)
    foreign = other.malloc(4)
    with raises(ErrorCode.WRONG_TYPE):
        region.free(foreign)
    with raises(ErrorCode.WRONG_TYPE):
        region.free("0x0")  # type: ignore[arg-type]


def test_min_alignment_applies_to_every_chunk() -> None:
    r = MemoryMemRegion("ddr", 0x1000, 1 << 16, min_alignment=64)
    for n in (1, 3, 65):
        assert r.malloc(n, False, 1).begin.addr % 64 == 0
    with raises(ErrorCode.OUT_OF_RANGE):
        r.malloc(MemPtr(0x1000 + 0x800 + 8), 8)
    assert r.malloc(MemPtr(0x1000 + 0x800), 8).begin.addr == 0x1800


def test_region_construction_errors() -> None:
    with raises(ErrorCode.WRONG_TYPE):
        MemoryMemRegion("", 0, 16)
    with raises(ErrorCode.OUT_OF_RANGE):
        MemoryMemRegion("x", -1, 16)
    with raises(ErrorCode.OUT_OF_RANGE):
        MemoryMemRegion("x", (1 << 64) - 8, 16)
    with raises(ErrorCode.OUT_OF_RANGE):
        MemoryMemRegion("x", 0, 16, min_alignment=48)


def test_a_chunk_dying_while_its_manager_is_busy_is_freed_afterwards() -> None:
    r = MemoryMemRegion("r", 0, 4096)
    m = r.mem_manager
    deleted: list[MemPtr] = []
    c = r.malloc(MemPtr(0x100), 64, deleted.append)
    m._lock.acquire()  # as if another thread, or this one, were inside the manager
    try:
        del c  # the finalizer cannot take the lock: it queues the release
        assert deleted == [] and len(m._pending) == 1
    finally:
        m._lock.release()
    assert m.chunk_count == 0, "introspection drains the queue first"
    assert deleted == [MemPtr(0x100)]
    assert r.malloc(MemPtr(0x100), 64).begin.addr == 0x100


def test_chunks_in_reference_cycles_are_freed_by_the_collector() -> None:
    r = MemoryMemRegion("r", 0, 4096)

    class Holder:
        pass

    h = Holder()
    h.me = h  # type: ignore[attr-defined]
    h.chunk = r.malloc(100)  # type: ignore[attr-defined]
    del h
    gc.collect()
    assert r.mem_manager.chunk_count == 0


def test_concurrent_allocation_and_freeing() -> None:
    r = MemoryMemRegion("r", 0, 1 << 24, host_visible=False)
    errors: list[BaseException] = []

    def worker(seed: int) -> None:
        rng = np.random.default_rng(seed)
        kept: list[MemChunk] = []
        try:
            for _ in range(1500):
                c = r.malloc(int(rng.integers(1, 512)), True, int(2 ** rng.integers(0, 7)))
                c.write(bytes([seed]) * c.size)
                kept.append(c)
                if len(kept) > 20:
                    victim = kept.pop(int(rng.integers(0, len(kept))))
                    assert victim.tobytes() == bytes([seed]) * victim.size
                    if rng.random() < 0.5:
                        victim.free()
                    del victim  # the other half frees itself
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(s,)) for s in range(1, 5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    gc.collect()
    r.mem_manager._check()  # type: ignore[attr-defined]
    assert r.mem_manager.chunk_count == 0 and r.mem_manager.used_bytes == 0


def test_deleter_failures() -> None:
    r = MemoryMemRegion("r", 0, 4096)

    def bad(ptr: MemPtr) -> None:
        raise RuntimeError("deleter broke")

    c = r.malloc(MemPtr(0), 16, bad)
    with pytest.raises(RuntimeError, match="deleter broke"):
        c.free()
    assert c.is_freed and r.mem_manager.chunk_count == 0
    d = r.malloc(MemPtr(0), 16, bad)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        del d
        gc.collect()
    assert any("deleter broke" in str(w.message) for w in caught)
    assert r.mem_manager.chunk_count == 0


def test_host_region() -> None:
    host = HostMemRegion("host", capacity=4096)
    c = host.malloc(100, True, 256)
    assert c.begin.kind is PtrKind.CPTR and c.begin.host_address % 256 == 0
    assert host.host_visible and host.contains(c.begin, 100) and not host.contains(c.end, 1)
    view = c.view()
    c.write(b"hello")
    assert bytes(view[:5]) == b"hello"
    c.free()
    assert bytes(view[:5]) == b"hello", "a view keeps the freed buffer alive: no dangling"
    with raises(ErrorCode.OUT_OF_RANGE):
        host.malloc(4097)
    with raises(ErrorCode.WRONG_TYPE):
        host.read(bytearray(1), 0x1000)
    with raises(ErrorCode.WRONG_TYPE):
        host.write(0x1000, b"x")
    with raises(ErrorCode.WRONG_TYPE):
        host.ptr(0)
    with raises(ErrorCode.WRONG_TYPE):
        host.mem_manager.get_chunk(0x1000, 1)
    buf = bytearray(b"adopt me")
    adopted = host.malloc(MemPtr(buf, offset=2), 4)
    assert adopted.tobytes() == b"opt "
    adopted.write(b"OPT!")
    assert buf == b"adOPT!me"
    assert host.mem_manager.get_chunk(MemPtr(buf, offset=2), 4) is adopted
    with raises(ErrorCode.OUT_OF_RANGE):
        host.malloc(MemPtr(buf, offset=5), 2)
    with raises(ErrorCode.OUT_OF_RANGE):
        host.malloc(MemPtr(buf, offset=6), 3)
    with raises(ErrorCode.WRONG_TYPE):
        host.malloc(MemPtr(0x1000), 4)
    ro = host.malloc(MemPtr(b"readonly"), 4)
    assert ro.tobytes() == b"read"
    with raises(ErrorCode.WRONG_TYPE):
        ro.write(b"x")


def test_copies_through_the_host_go_piece_by_piece(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(xrt.memory.regions, "_PIECE", 1000)
    a = MemoryMemRegion("a", 0, 1 << 16, host_visible=False)
    b = MemoryMemRegion("b", 1 << 20, 1 << 16, host_visible=False)
    data = bytes(np.random.default_rng(0).integers(0, 256, 10_000, dtype=np.uint8))
    a.write(0, data)
    for dst, src in ((300, 0), (0, 300)):  # overlapping, both directions
        a.write(0, data)
        a.memcpy(dst, src, 9_000)
        out = bytearray(9_000)
        a.read(out, dst)
        assert bytes(out) == data[src : src + 9_000]
    a.write(0, data)
    b.memcpy(b.base + 7, a, 0, 10_000)
    out = bytearray(10_000)
    b.read(out, b.base + 7)
    assert bytes(out) == data
    assert a.reads >= 10 and b.writes >= 10


def test_misbehaving_transports_raise_device_internal() -> None:
    class Short(MemoryMemRegion):
        def _read(self, addr: int, nbytes: int) -> bytes:
            return super()._read(addr, nbytes)[:-1]

    class BadMap(MemoryMemRegion):
        def _host_map(self) -> memoryview | None:
            return memoryview(bytearray(10))

    s = Short("s", 0, 4096, host_visible=False)
    with raises(ErrorCode.DEVICE_INTERNAL):
        s.read(bytearray(8), 0)
    with raises(ErrorCode.DEVICE_INTERNAL):
        BadMap("m", 0, 4096).read(bytearray(8), 0)


def test_region_views_and_pointers() -> None:
    r = MemoryMemRegion("udma", 0x1000, 4096, host_visible=True)
    p = r.ptr(0x1010)
    assert p.kind is PtrKind.BOTH and p.addr == 0x1010 and p.offset == 0x10
    p.cptr()[:2] = b"hi"
    out = bytearray(2)
    r.read(out, 0x1010)
    assert out == b"hi"
    v = r.view(0x1010, 2)
    assert bytes(v) == b"hi"
    assert r.ptr(r.end).addr == r.end
    hidden = MemoryMemRegion("ddr", 0, 4096, host_visible=False)
    assert hidden.ptr(16).kind is PtrKind.ADDR
    with raises(ErrorCode.WRONG_TYPE):
        hidden.view(0, 1)
    assert "udma" in repr(r) and "0x1000" in repr(r)


def test_malloc_forms_and_keywords() -> None:
    r = MemoryMemRegion("r", 0, 1 << 16)
    assert r.malloc(16, alignment=256).begin.addr % 256 == 0
    kept = r.malloc(16, auto_free=False)
    assert not kept.auto_free
    fixed = r.malloc(MemPtr(0x8000), nbytes=32, auto_free=False)
    assert fixed.begin.addr == 0x8000 and not fixed.auto_free
    for args, kwargs in (
        ((MemPtr(0x100),), {}),
        ((16, True, 1, 5), {}),
        ((16,), {"bogus": 1}),
        ((16, True), {"auto_free": False}),
        ((MemPtr(0x100), 16), {"alignment": 64}),
    ):
        with raises(ErrorCode.WRONG_TYPE):
            r.malloc(*args, **kwargs)


def test_host_to_host_copies() -> None:
    host = HostMemRegion("h")
    other = HostMemRegion("h2")
    a = host.malloc(16)
    b = other.malloc(16)
    a.write(b"0123456789abcdef")
    host.memcpy(a.begin + 4, a.begin, 8)  # overlapping, inside one buffer
    assert a.tobytes() == b"012301234567cdef"
    b.copy_from(a)
    assert b.tobytes() == a.tobytes()
    other.memcpy(b.begin, host, a.begin + 8, 8)
    assert b.tobytes() == b"4567cdef4567cdef"
    assert bytes(host.view(a.begin + 2, 3)) == b"230"
    with raises(ErrorCode.OUT_OF_RANGE):
        host.memcpy(a.begin + 10, a.begin, 8)
