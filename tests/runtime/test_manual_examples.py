"""The examples of the Icraft XRT manual's data-structure chapter, done in Python.

The manual is `../shared/seeds/000_15ee72ecd555691c.txt`. The tests named ``test_manual_*``
translate its examples line by line (sections 1.5, 2.1 and 2.6: each ``REQUIRE`` is an
assert); the others were written before the manual's text was available, from its
descriptions, and remain as further examples of the same behaviour.
"""

from __future__ import annotations

import gc
import io
import threading
from collections.abc import Iterator

import numpy as np
import pytest

from xrt import (
    Device,
    ErrorCode,
    HostDevice,
    MemPtr,
    PtrKind,
    QuantParams,
    Tensor,
    TensorType,
    XrtError,
)
from xrt.testing.memory_transport import MemoryDevice


@pytest.fixture
def board() -> Iterator[MemoryDevice]:
    """Stands in for ``Device::Open("axi://ql100aiu?npu=0x40000000&dma=0x80000000")``."""
    import xrt.testing.memory_transport  # noqa: F401 - registers mem://

    dev = Device.open("mem://ql100aiu?npu=0x40000000&dma=0x80000000")
    assert isinstance(dev, MemoryDevice)
    yield dev
    dev.close()


def test_memptr_example() -> None:
    """MemPtr: a C pointer, a physical address, both; the null pointer; arithmetic."""
    buf = bytearray(1024)
    cptr = MemPtr(buf)  # PtrType::CPTR
    addr = MemPtr(0x4000_0000)  # PtrType::ADDR
    both = MemPtr(buf, 0x1000_0000)  # PtrType::BOTH
    assert (cptr.kind, addr.kind, both.kind) == (PtrKind.CPTR, PtrKind.ADDR, PtrKind.BOTH)
    assert addr.addr == 0x4000_0000 and both.addr == 0x1000_0000
    assert bytes(both.cptr()[:4]) == bytes(4)
    with pytest.raises(XrtError):  # addr() of a CPTR pointer throws
        _ = cptr.addr
    with pytest.raises(XrtError):  # cptr() of an ADDR pointer throws
        _ = addr.cptr()
    null = MemPtr.null()
    assert null.is_null and not addr.is_null and not MemPtr(0).is_null
    end = addr + 256
    assert end.addr == 0x4000_0100 and end - addr == 256 and end > addr
    assert (both + 16).cptr().obj is buf and (both + 16) - both == 16


def test_memchunk_example(board: Device) -> None:
    """MemChunk: malloc from a region, write, read back, copy between chunks, free."""
    region = board.default_mem_region()
    chunk = region.malloc(1024)
    assert chunk.size == 1024 and chunk.is_on(region) and chunk.region is region
    data = np.arange(256, dtype=np.uint32)
    chunk.write(data)
    out = np.zeros(256, dtype=np.uint32)
    chunk.read(out)
    assert np.array_equal(out, data)
    host_chunk = HostDevice.default_region().malloc(1024)
    host_chunk.copy_from(chunk)
    assert host_chunk.tobytes() == data.tobytes()
    chunk.free()
    with pytest.raises(XrtError) as e:
        chunk.read(out)
    assert e.value.code == ErrorCode.WRONG_ORDER


def test_shared_ownership_example(board: Device) -> None:
    """Two tensors sharing one chunk: it is freed only when both are gone."""
    region = board.default_mem_region()
    ttype = TensorType("SInt8", [1, 16, 16, 8], "NHWC")
    chunk = region.malloc(ttype.bytes())
    begin = chunk.begin
    t1 = Tensor(ttype, chunk)
    t2 = Tensor(ttype, chunk)
    del chunk  # only the tensors hold it now
    manager = region.mem_manager
    assert manager.get_chunk(begin, ttype.bytes()) is not None
    del t1
    gc.collect()
    assert manager.get_chunk(begin, ttype.bytes()) is t2.chunk, "t2 still holds it"
    del t2
    gc.collect()
    assert manager.get_chunk(begin, ttype.bytes()) is None
    assert manager.used_bytes == 0


def test_fixed_address_with_deleter_example(board: Device) -> None:
    """malloc(begin, size, deleter): memory at a known address, released by a custom
    deleter when the chunk is freed (here: automatically, with its last reference)."""
    region = board.get_mem_region("udma")
    released: list[MemPtr] = []
    chunk = region.malloc(MemPtr(region.base + 0x1000), 4096, released.append)
    assert chunk.begin.addr == region.base + 0x1000
    assert chunk.begin.kind is PtrKind.BOTH, "udma is host-visible"
    del chunk
    gc.collect()
    assert released == [MemPtr(region.base + 0x1000)]
    never_auto = region.malloc(64, auto_free=False)
    where = never_auto.begin
    del never_auto
    gc.collect()
    assert region.mem_manager.get_chunk(where, 64) is not None, "auto_free=False: kept"
    region.free(where)


def test_tensor_example(board: Device) -> None:
    """Tensor: a type, no data, malloc on the host, fill, to the device and back."""
    ttype = TensorType("FP32", [1, 2, 2, 3], "NHWC")
    t = Tensor(ttype)
    assert not t.has_data()
    t.malloc_on(HostDevice.default_region())
    t.fill(lambda i: i * 0.5)
    on_device = t.to(board.default_mem_region())
    assert on_device is not t and on_device.is_on(board.default_mem_region())
    assert t.to(HostDevice.default_region()) is t, "already there: no copy"
    back = on_device.to(HostDevice.default_region())
    assert np.array_equal(back.numpy(), np.arange(12, dtype=np.float32).reshape(1, 2, 2, 3) / 2)
    assert ttype.bytes() == 48 and on_device.nbytes == 48


def test_readiness_example(board: Device) -> None:
    """A tensor the NPU is still writing: not ready until the readiness function says so;
    waiting with a timeout returns False while it is not."""
    npu = board.get_reg_region("npu")
    scratch = npu.regmap.register("SCRATCH").offset  # type: ignore[union-attr]
    npu.write(scratch, 0, relative=True)

    def done(dev: Device | None) -> bool:
        assert dev is board
        return dev.read_reg(scratch, True, region="npu") == 1

    out = Tensor(TensorType("SInt8", [16]), board.malloc(16), check_func=done)
    assert not out.is_ready()
    assert out.wait_for_ready(0.02) is False
    timer = threading.Timer(0.05, lambda: npu.write(scratch, 1, relative=True))
    timer.start()
    try:
        assert out.wait_for_ready(5.0, 0.001) is True
    finally:
        timer.join()
    assert out.is_ready()


def test_dump_example() -> None:
    """dump(os, format): H may become S, Q may become F, never the reverse."""
    q = Tensor.from_numpy(np.array([[-2, 0, 3]], np.int8), quant=QuantParams(0.5, 0))
    s = io.BytesIO()
    q.dump(s, "SQT")
    assert s.getvalue().decode().splitlines()[1:] == ["-2", "0", "3"]
    s = io.BytesIO()
    q.dump(s, "SFB")  # Q -> F: dequantized
    assert np.frombuffer(s.getvalue(), "<f4").tolist() == [-1.0, 0.0, 1.5]
    f = Tensor.from_numpy(np.array([1.0], np.float32))
    with pytest.raises(XrtError) as e:
        f.dump(io.BytesIO(), "SQB")  # F -> Q: never
    assert e.value.code == ErrorCode.WRONG_TYPE
    with pytest.raises(XrtError):
        f.dump(io.BytesIO(), "HFB")  # S -> H: never
    assert f.dump(io.BytesIO(), "HQB", fallback=True) == "SFB"


def test_memory_introspection_example(board: Device) -> None:
    """The memory manager: all chunks, one chunk by begin and size, region information."""
    region = board.default_mem_region()
    manager = region.mem_manager
    a = region.malloc(1000)
    b = region.malloc(2000, True, 4096)
    assert manager.all_chunks() == sorted([a, b], key=lambda c: c.begin.addr)
    assert manager.get_chunk(b.begin, 2000) is b
    assert manager.get_chunk(b.begin, 1999) is None
    info = manager.info()
    assert info["chunks"] == 2 and info["used"] == 3000
    assert info["free"] == region.size - 3000 and info["largest_free"] <= info["free"]
    a.free()
    assert manager.all_chunks() == [b]


# --- The manual's own examples, line by line -------------------------------------------------


def test_manual_2_1_memptr() -> None:
    """Manual 2.1: null pointers, the three kinds, arithmetic and comparisons."""
    null_ptr1 = MemPtr.null()  # MemPtr::Init()
    null_ptr2 = MemPtr()  # MemPtr(nullptr)
    null_ptr3 = MemPtr.null()  # MemPtr::NullPtr()
    assert null_ptr1.is_null and null_ptr2.is_null and null_ptr3.is_null

    tmp = bytearray(8)  # char tmp[8]
    c_ptr1 = MemPtr(tmp)
    assert c_ptr1.kind is PtrKind.CPTR
    assert c_ptr1.cptr().obj is tmp and c_ptr1.offset == 0  # c_ptr1.cptr() == tmp
    assert not c_ptr1.is_null

    addr = 0x40000000
    addr_ptr1 = MemPtr(addr)
    assert addr_ptr1.kind is PtrKind.ADDR
    assert addr_ptr1.addr == addr
    assert not addr_ptr1.is_null

    both_ptr1 = MemPtr(tmp, addr)
    assert both_ptr1.kind is PtrKind.BOTH
    assert both_ptr1.cptr().obj is tmp and both_ptr1.offset == 0
    assert both_ptr1.addr == addr
    assert not both_ptr1.is_null

    both_ptr2 = 40 + both_ptr1
    assert both_ptr2 - both_ptr1 == 40
    assert both_ptr1 - both_ptr2 == -40
    assert both_ptr2 - 40 == both_ptr1
    assert both_ptr1 < both_ptr2
    assert both_ptr1 <= both_ptr2
    assert both_ptr2 > both_ptr1
    assert both_ptr2 >= both_ptr1


def test_manual_2_6_tensor() -> None:
    """Manual 2.6: tensors over chunks, `to`, from parameters, shared chunks with a custom
    deleter, and a readiness function with waitForReady."""
    host_mregion = HostDevice.default_region()  # HostDevice::MemRegion()
    ttype1 = TensorType("FP32", [1, 416, 416, 3], "NHWC")
    chunk1 = host_mregion.malloc(ttype1.bytes())
    tensor1 = Tensor(ttype1, chunk1)
    data1 = tensor1.data_ptr
    assert data1 == chunk1.begin
    assert tensor1.is_ready()
    assert tensor1.is_on(host_mregion)
    assert tensor1.region is host_mregion

    # to() on the region the tensor is already on: no copy, the same tensor.
    tensor2 = tensor1.to(host_mregion)
    assert tensor2 is tensor1

    # A tensor from parameters (xir::Params(ttype1).fill(i -> float(i))).
    weight = np.arange(ttype1.numel(), dtype=np.float32).reshape(ttype1.shape)
    tensor3 = Tensor.from_numpy(weight, layout="NHWC")
    assert tensor3.dtype == ttype1.dtype
    tensor1.fill(lambda i: i, vectorized=True)
    assert tensor1.numpy().tobytes() == tensor3.numpy().tobytes()  # memcmp(...) == 0

    chunk2_is_deleted = []
    ttype2 = TensorType("SInt8", [8], "*")
    tensor5 = Tensor(ttype2)
    assert not tensor5.has_data()
    tensor4 = Tensor(ttype2)
    assert not tensor4.has_data()
    buf = bytearray(8)  # char buf[8]
    chunk2 = host_mregion.malloc(MemPtr(buf), 8, lambda begin: chunk2_is_deleted.append(True))
    tensor4.set_data(chunk2)
    tensor5.set_data(chunk2)
    del chunk2
    assert tensor4.has_data()
    del tensor4  # tensor5 still holds chunk2
    gc.collect()
    assert not chunk2_is_deleted
    del tensor5  # the last reference: the deleter runs
    gc.collect()
    assert chunk2_is_deleted == [True]

    ttype3 = TensorType("FP16", [1, 2, 3, 4], "NHWC")
    checked_ready = False

    def check_func(device: Device | None) -> bool:
        return checked_ready

    # A tensor built with a readiness function is not ready until it says so.
    tensor6 = Tensor(ttype3, check_func).malloc_on(HostDevice.default_region())
    assert not tensor6.is_ready()
    assert not tensor6.wait_for_ready(0.010, 0.001)  # 1000ms, 1ms in the manual
    checked_ready = True
    tensor6.wait_for_ready(1.0)
    assert tensor6.is_ready()


def test_manual_1_5_memory_allocation_info() -> None:
    """Manual 1.5: every chunk allocated on plddr, and one chunk by begin and size."""
    import xrt.testing.memory_transport  # noqa: F401 - registers mem://

    # Device::Open("axi://ql100aiu?npu=0x40000000&dma=0x80000000"), plddr from address 0.
    with Device.open("mem://ql100aiu?npu=0x40000000&dma=0x80000000") as buyi_device:
        plddr_region = buyi_device.get_mem_region("plddr")
        chunk1 = plddr_region.malloc(1024)
        chunk2 = plddr_region.malloc(MemPtr(8192), 1024)
        pl_chunks = plddr_region.mem_manager.all_chunks()  # getAllMemChunk()
        assert set(pl_chunks) == {chunk1, chunk2}
        unique_chunk = plddr_region.mem_manager.get_chunk(MemPtr(4096), 1024)
        assert unique_chunk is None  # nothing allocated there: nullopt
        assert plddr_region.mem_manager.get_chunk(MemPtr(8192), 1024) is chunk2
