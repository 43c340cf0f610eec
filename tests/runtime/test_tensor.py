"""Tensor: data or none, numpy both ways for every dtype, regions, fill, readiness, hardware
layouts and every dump format on every kind of tensor."""

from __future__ import annotations

import io
from datetime import timedelta
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from xrt import (
    ChannelTiled,
    DataType,
    Device,
    ErrorCode,
    HostDevice,
    QuantParams,
    Tensor,
    TensorType,
    XrtError,
)
from xrt.tensor import DUMP_FORMATS
from xrt.testing.memory_transport import MemoryMemRegion


def raises(code: ErrorCode) -> pytest.RaisesContext:  # type: ignore[type-arg]
    return pytest.raises(XrtError, check=lambda e: e.code == code)


@pytest.fixture
def ddr() -> MemoryMemRegion:
    return MemoryMemRegion("plddr", 0x1_0000_0000, 1 << 22, host_visible=False, min_alignment=64)


def sample(dt: DataType, shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dt is DataType.BOOL:
        return rng.integers(0, 2, shape).astype(bool)
    if dt.is_float:
        return rng.standard_normal(shape).astype(dt.numpy)
    info = np.iinfo(dt.numpy)
    return rng.integers(max(info.min, -1000), min(info.max, 1000), shape).astype(dt.numpy)


def test_a_tensor_without_data() -> None:
    t = Tensor(TensorType("FP32", [1, 3], "NC"))
    assert not t.has_data() and t.chunk is None and t.region is None
    assert not t.is_ready() and "no data" in repr(t)
    for op in (t.numpy, lambda: t.data_ptr, lambda: t.fill(0), lambda: t.wait_for_ready(0)):
        with raises(ErrorCode.WRONG_ORDER):
            op()
    with raises(ErrorCode.WRONG_TYPE):
        Tensor([1, 3])  # type: ignore[arg-type]
    dynamic = Tensor(TensorType("FP32", [-1, 3]))
    with raises(ErrorCode.OUT_OF_RANGE):
        dynamic.malloc_on(HostDevice.default_region())


@pytest.mark.parametrize("dt", list(DataType), ids=lambda d: d.manual_name)
def test_numpy_round_trip_every_dtype(dt: DataType, ddr: MemoryMemRegion) -> None:
    arr = sample(dt, (2, 3, 5))
    t = Tensor.from_numpy(arr, layout="NHW")
    assert t.dtype is dt and t.shape == (2, 3, 5) and t.layout == "NHW"
    assert t.is_on(HostDevice.default_region()) and t.is_ready()
    assert t.nbytes == arr.nbytes and t.data_ptr == t.chunk.begin  # type: ignore[union-attr]
    back = t.numpy()
    assert back.dtype == arr.dtype and np.array_equal(back.view(np.uint8), arr.view(np.uint8))
    on_ddr = Tensor.from_numpy(arr, region=ddr)
    assert on_ddr.is_on(ddr) and np.array_equal(on_ddr.numpy().view(np.uint8), arr.view(np.uint8))
    assert np.array_equal(np.asarray(on_ddr).view(np.uint8), arr.view(np.uint8))


def test_from_numpy_refuses_silent_casts() -> None:
    with raises(ErrorCode.WRONG_TYPE) as e:
        Tensor.from_numpy(np.zeros(3, np.complex64))
    assert "complex64" in e.value.message
    assert Tensor.from_numpy(np.zeros(3)).dtype is DataType.FP64  # float64 stays float64
    with raises(ErrorCode.WRONG_TYPE):
        Tensor.from_numpy(np.zeros(3, np.float32), dtype="FP16")
    with raises(ErrorCode.WRONG_TYPE):
        Tensor.from_numpy(np.array(["a"]))
    assert Tensor.from_numpy([1, 2, 3]).dtype is DataType.SINT64  # type: ignore[arg-type]
    assert Tensor.from_numpy(np.zeros(2, ml_dtypes.bfloat16), dtype="BF16").dtype is DataType.BF16


def test_zero_copy_numpy(ddr: MemoryMemRegion) -> None:
    t = Tensor.from_numpy(np.arange(6, dtype=np.int32).reshape(2, 3))
    view = t.numpy(copy=False)
    view[0, 0] = 42
    assert t.numpy()[0, 0] == 42, "the view aliases the tensor's memory"
    with raises(ErrorCode.WRONG_TYPE):
        Tensor.from_numpy(np.zeros(4, np.int8), region=ddr).numpy(copy=False)


def test_set_data_shares_chunks(ddr: MemoryMemRegion) -> None:
    tt = TensorType("SInt16", [4])
    chunk = ddr.malloc(16)
    a = Tensor(tt, chunk)
    b = Tensor(tt).set_data(chunk, 8)
    a.fill(lambda i: i)
    b.fill(lambda i: 100 + i)
    assert chunk.tobytes() == np.array([0, 1, 2, 3, 100, 101, 102, 103], "<i2").tobytes()
    assert b.data_ptr.addr == chunk.begin.addr + 8 and b.offset == 8
    with raises(ErrorCode.OUT_OF_RANGE):
        Tensor(tt, chunk, 9)
    with raises(ErrorCode.WRONG_TYPE):
        Tensor(tt, b"bytes")  # type: ignore[arg-type]
    freed = ddr.malloc(8)
    freed.free()
    with raises(ErrorCode.WRONG_ORDER):
        Tensor(tt, freed)
    chunk.free()
    with raises(ErrorCode.WRONG_ORDER):
        a.numpy()
    assert not a.has_data()


def test_malloc_on_and_to(ddr: MemoryMemRegion) -> None:
    host = HostDevice.default_region()
    arr = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = Tensor.from_numpy(arr, layout="HW")
    assert t.to(host) is t, "no copy when already there"
    d = t.to(ddr)
    assert d is not t and d.is_on(ddr) and d.tensor_type == t.tensor_type
    assert d.chunk.begin.addr % 64 == 0  # type: ignore[union-attr]
    t.fill(0.0)
    assert np.array_equal(d.numpy(), arr), "the copy is independent"
    back = d.to(host)
    assert np.array_equal(back.numpy(), arr)
    old = t.chunk
    t.malloc_on(ddr, alignment=256)
    assert t.chunk is not old and t.is_on(ddr) and t.chunk.begin.addr % 256 == 0  # type: ignore[union-attr]
    with raises(ErrorCode.WRONG_TYPE):
        t.malloc_on("plddr")  # type: ignore[arg-type]
    with raises(ErrorCode.WRONG_TYPE):
        t.to(None)  # type: ignore[arg-type]
    not_ready = Tensor.from_numpy(arr).set_ready(False)
    with raises(ErrorCode.WRONG_ORDER):
        not_ready.to(ddr)


def test_fill() -> None:
    t = Tensor(TensorType("SInt8", [2, 3])).malloc_on(HostDevice.default_region())
    t.fill(lambda i: i - 3)
    assert t.numpy().tolist() == [[-3, -2, -1], [0, 1, 2]]
    t.fill(lambda idx: idx * 2, vectorized=True)
    assert t.numpy().reshape(-1).tolist() == [0, 2, 4, 6, 8, 10]
    t.fill(7)
    assert (t.numpy() == 7).all()
    t.fill(lambda i: 5.0)  # whole floats are fine
    for bad, code in (
        (lambda i: 0.5, ErrorCode.OUT_OF_RANGE),
        (lambda i: 128, ErrorCode.OUT_OF_RANGE),
        (lambda i: None, ErrorCode.WRONG_TYPE),
        (float("nan"), ErrorCode.OUT_OF_RANGE),
    ):
        with raises(code):
            t.fill(bad)
    with raises(ErrorCode.OUT_OF_RANGE):
        t.fill(lambda idx: np.zeros(5), vectorized=True)
    assert (t.numpy() == 5).all(), "a failed fill changes nothing"
    h = Tensor(TensorType("FP16", [2])).malloc_on(HostDevice.default_region())
    h.fill(lambda i: 1.5 * i)
    assert h.numpy().tolist() == [0.0, 1.5]
    with raises(ErrorCode.OUT_OF_RANGE):
        h.fill(1e6)
    b = Tensor(TensorType("Bool", [3])).malloc_on(HostDevice.default_region())
    b.fill(lambda i: i % 2)
    assert b.numpy().tolist() == [False, True, False]
    with raises(ErrorCode.OUT_OF_RANGE):
        b.fill(2)
    u = Tensor(TensorType("UInt8", [1])).malloc_on(HostDevice.default_region())
    with raises(ErrorCode.OUT_OF_RANGE):
        u.fill(-1)


def test_copy_data_read_write_copy_from(ddr: MemoryMemRegion) -> None:
    t = Tensor(TensorType("SInt32", [2, 2])).malloc_on(ddr)
    t.copy_data(np.array([[1, 2], [3, 4]], np.int32))
    with raises(ErrorCode.WRONG_TYPE):
        t.copy_data(np.zeros((2, 2), np.int64))
    with raises(ErrorCode.OUT_OF_RANGE):
        t.copy_data(np.zeros((4,), np.int32))
    raw = bytearray(8)
    t.read(raw, 4)
    assert raw == np.array([2, 3], "<i4").tobytes()
    t.write(np.array([9], "<i4"), 12)
    assert t.numpy().tolist() == [[1, 2], [3, 9]]
    with raises(ErrorCode.OUT_OF_RANGE):
        t.write(b"12345", 12)
    with raises(ErrorCode.OUT_OF_RANGE):
        t.read(bytearray(8), 12)
    u = Tensor(TensorType("SInt32", [2, 2])).malloc_on(HostDevice.default_region())
    u.fill(0)
    u.copy_from(t, src_offset=4, dest_offset=0, nbytes=8)
    assert u.numpy().tolist() == [[2, 3], [0, 0]]
    u.copy_from(t)
    assert u.numpy().tolist() == [[1, 2], [3, 9]]
    with raises(ErrorCode.OUT_OF_RANGE):
        u.copy_from(t, src_offset=8, dest_offset=12)
    with raises(ErrorCode.WRONG_TYPE):
        u.copy_from(np.zeros(4))  # type: ignore[arg-type]


def test_readiness() -> None:
    devices: list[Device | None] = []
    flag = {"done": False}

    def check(dev: Device | None) -> bool:
        devices.append(dev)
        return flag["done"]

    t = Tensor.from_numpy(np.zeros(4, np.float32)).set_check_func(check)
    assert not t.is_ready() and devices[-1] is HostDevice.default()
    assert t.wait_for_ready(0.02, 0.005) is False
    assert t.wait_for_ready(timedelta(milliseconds=5)) is False
    with raises(ErrorCode.WRONG_ORDER):
        t.numpy()
    flag["done"] = True
    assert t.wait_for_ready(1.0) is True and t.is_ready()
    n = len(devices)
    flag["done"] = False
    assert t.is_ready() and len(devices) == n, "once ready, the function is not asked again"
    t.set_ready(False)
    assert not t.is_ready()
    t.set_check_func(None)
    assert t.is_ready()
    t.set_check_func(lambda dev: "yes")  # type: ignore[arg-type, return-value]
    with raises(ErrorCode.WRONG_TYPE):
        t.is_ready()
    for bad in (-1, float("inf"), "1s"):
        with raises(ErrorCode.OUT_OF_RANGE if bad != "1s" else ErrorCode.WRONG_TYPE):
            t.wait_for_ready(bad)  # type: ignore[arg-type]
    with raises(ErrorCode.WRONG_TYPE):
        t.set_check_func(5)  # type: ignore[arg-type]
    with raises(ErrorCode.WRONG_TYPE):
        t.set_ready(1)  # type: ignore[arg-type]


# -- hardware layouts ------------------------------------------------------------------------


def tile_nhwc(a: np.ndarray, block: int) -> np.ndarray:
    """Independent reference of NHWC -> N, C/block, H, W, block (zero padded)."""
    n, h, w, c = a.shape
    cb = -(-c // block)
    padded = np.zeros((n, h, w, cb * block), a.dtype)
    padded[..., :c] = a
    return padded.reshape(n, h, w, cb, block).transpose(0, 3, 1, 2, 4).copy()


def test_channel_tiled_layout() -> None:
    tt = TensorType("SInt8", [1, 4, 4, 40], "NHWC")
    hw = ChannelTiled(32)
    assert hw.storage_shape(tt) == (1, 2, 4, 4, 32) and hw.storage_bytes(tt) == 2 * 16 * 32
    arr = sample(DataType.SINT8, (1, 4, 4, 40))
    t = Tensor.from_numpy(arr, layout="NHWC", hw_layout=hw)
    assert t.nbytes == 1024 and t.storage_shape == (1, 2, 4, 4, 32)
    assert np.array_equal(t.numpy(hardware=True), tile_nhwc(arr, 32))
    assert np.array_equal(t.numpy(), arr)
    assert np.array_equal(t.numpy(copy=False, hardware=True), tile_nhwc(arr, 32))
    with raises(ErrorCode.WRONG_TYPE):
        t.numpy(copy=False)
    nchw = TensorType("FP32", [2, 5, 3, 3], "NCHW")
    a = sample(DataType.FP32, (2, 5, 3, 3))
    stored = ChannelTiled(4).to_hardware(a, nchw)
    assert stored.shape == (2, 2, 3, 3, 4)
    assert np.array_equal(ChannelTiled(4).to_software(stored, nchw), a)
    hwc = TensorType("UInt8", [3, 3, 7], "HWC")
    assert ChannelTiled(8).storage_shape(hwc) == (1, 3, 3, 8)
    for bad in (TensorType("FP32", [2, 3]), TensorType("FP32", [2, 3], "NH")):
        with raises(ErrorCode.WRONG_TYPE):
            Tensor(bad, hw_layout=ChannelTiled(4))
    with raises(ErrorCode.OUT_OF_RANGE):
        ChannelTiled(0)
    with raises(ErrorCode.WRONG_TYPE):
        Tensor(nchw, hw_layout="NCHW4c")  # type: ignore[arg-type]
    assert ChannelTiled(4) == ChannelTiled(4) != ChannelTiled(8)


# -- dump: every format on every kind of tensor --------------------------------------------

Q_SCALE = np.float32([0.5, 0.25, 2.0, 1.0, 0.125])
Q_ZP = np.int64([1, 0, -3, 2, 0])


def kinds() -> dict[str, tuple[Tensor, np.ndarray, np.ndarray | None, np.ndarray | None]]:
    """name -> (tensor, logical values, dequantized values or None, hardware raw or None)."""
    out = {}
    f = sample(DataType.FP32, (2, 3))
    out["float"] = (Tensor.from_numpy(f), f, None, None)
    h = sample(DataType.FP16, (1, 2, 2, 3))
    out["float-hw"] = (
        Tensor.from_numpy(h, layout="NHWC", hw_layout=ChannelTiled(4)),
        h,
        None,
        tile_nhwc(h, 4),
    )
    q = sample(DataType.SINT8, (2, 3), 1)
    qp = QuantParams(0.5, 1)
    out["quant"] = (Tensor.from_numpy(q, quant=qp), q, (q.astype(np.float32) - 1) * 0.5, None)
    qh = sample(DataType.SINT8, (1, 2, 2, 5), 2)
    qph = QuantParams(Q_SCALE.tolist(), Q_ZP.tolist(), axis=3)
    deq = ((qh.astype(np.int64) - Q_ZP).astype(np.float32) * Q_SCALE).astype(np.float32)
    out["quant-hw"] = (
        Tensor.from_numpy(qh, layout="NHWC", quant=qph, hw_layout=ChannelTiled(4)),
        qh,
        deq,
        tile_nhwc(qh, 4),
    )
    i = sample(DataType.SINT32, (4,), 3)
    out["int"] = (Tensor.from_numpy(i), i, None, None)
    b = sample(DataType.BOOL, (3,), 4)
    out["bool"] = (Tensor.from_numpy(b), b, None, None)
    return out


def expected_dump(kind: str, fmt: str, fallback: bool) -> tuple[str, np.ndarray] | None:
    """The manual's rule, restated independently: (format written, array) or None."""
    t, logical, deq, raw_hw = kinds_cache[kind]
    layout, values, form = fmt
    if layout == "H" and raw_hw is None:
        if not fallback:
            return None
        layout = "S"
    if values == "Q" and t.dtype.is_float:
        if not fallback:
            return None
        values = "F"
    if values == "Q" or t.dtype.is_float:
        arr = raw_hw if layout == "H" else logical
    else:
        floats = deq if deq is not None else logical.astype(np.float32)
        arr = tile_nhwc(floats, 4) if layout == "H" else floats
    assert arr is not None
    return layout + values + form, arr


kinds_cache = kinds()


@pytest.mark.parametrize("fallback", [False, True], ids=["strict", "fallback"])
@pytest.mark.parametrize("fmt", DUMP_FORMATS)
@pytest.mark.parametrize("kind", list(kinds_cache))
def test_dump_every_format(kind: str, fmt: str, fallback: bool) -> None:
    t = kinds_cache[kind][0]
    want = expected_dump(kind, fmt, fallback)
    stream = io.BytesIO()
    if want is None:
        with raises(ErrorCode.WRONG_TYPE) as e:
            t.dump(stream, fmt, fallback=fallback)
        assert fmt in e.value.message and stream.getvalue() == b""
        return
    written, arr = want
    assert t.dump(stream, fmt, fallback=fallback) == written
    data = stream.getvalue()
    if written[2] == "B":
        assert data == arr.astype(arr.dtype.newbyteorder("<")).tobytes()
        return
    header, _, body = data.decode("ascii").partition("\n")
    assert header.startswith(f"# xrt.Tensor format={written} ")
    assert f"shape={list(arr.shape)}" in header
    values = np.loadtxt(io.StringIO(data.decode("ascii")), ndmin=1)
    assert values.shape == (arr.size,) and body.count("\n") == arr.size
    assert f"dtype={arr.dtype}" in header
    # Text values round-trip exactly when read back as the dtype the header names.
    assert np.array_equal(values.astype(arr.dtype), arr.reshape(-1))


def test_dump_streams_and_bad_formats(tmp_path: Path) -> None:
    t = kinds_cache["quant"][0]
    text = io.StringIO()
    assert t.dump(text, "SQT") == "SQT" and text.getvalue().startswith("# xrt.Tensor")
    with raises(ErrorCode.WRONG_TYPE):
        t.dump(io.StringIO(), "SQB")
    path = tmp_path / "t.bin"
    assert t.dump(path, "SFB") == "SFB"
    assert path.read_bytes() == kinds_cache["quant"][2].astype("<f4").tobytes()  # type: ignore[union-attr]
    # The manual's default format "" writes the data as stored in memory.
    assert t.dump(path) == ""
    stored = t.numpy(hardware=True)
    assert path.read_bytes() == stored.astype(stored.dtype.newbyteorder("<")).tobytes()
    for bad in ("SF", "SFBX", "sfb", "XFB", "SXB", "SFX", 3, None):
        with raises(ErrorCode.WRONG_TYPE):
            t.dump(io.BytesIO(), bad)  # type: ignore[arg-type]
    assert t.resolve_dump_format("HQB", fallback=True) == "SQB"
    not_ready = Tensor.from_numpy(np.zeros(2, np.float32)).set_ready(False)
    with raises(ErrorCode.WRONG_ORDER):
        not_ready.dump(io.BytesIO())
