"""MemPtr: kinds, the null pointer, arithmetic, comparison, hashing, repr, bad input."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xrt import ErrorCode, MemPtr, PtrKind, XrtError


def code_of(excinfo: pytest.ExceptionInfo[XrtError]) -> ErrorCode:
    return excinfo.value.code


def test_three_kinds() -> None:
    buf = bytearray(64)
    addr = MemPtr(0x4000_0000)
    host = MemPtr(buf)
    both = MemPtr(buf, 0x1000_0000)
    assert addr.kind is PtrKind.ADDR and addr.addr == 0x4000_0000 and not addr.has_host
    assert host.kind is PtrKind.CPTR and host.has_host and not host.has_addr
    assert both.kind is PtrKind.BOTH and both.addr == 0x1000_0000 and both.has_host
    assert MemPtr(addr=5).kind is PtrKind.ADDR
    assert MemPtr(np.int64(5)).addr == 5
    # The host part really is the buffer: writes through cptr land in it.
    host.cptr()[:3] = b"abc"
    assert buf[:3] == b"abc"
    assert (host + 1).cptr()[:2] == b"bc"
    # Its host address is the buffer's real address.
    arr = np.frombuffer(buf, dtype=np.uint8)
    assert host.host_address == arr.__array_interface__["data"][0]
    assert (host + 10).host_address == host.host_address + 10


def test_only_null_is_null() -> None:
    null = MemPtr.null()
    assert null.is_null and MemPtr().is_null and null == MemPtr()
    assert not null and bool(MemPtr(0)) and bool(MemPtr(bytearray(0)))
    assert not MemPtr(0).is_null, "physical address 0 is a valid address"
    assert not MemPtr(bytearray(1)).is_null
    assert null != MemPtr(0)
    assert null.kind is PtrKind.CPTR and null.host_address == 0
    with pytest.raises(XrtError) as e:
        _ = null.addr
    assert code_of(e) == ErrorCode.WRONG_TYPE
    with pytest.raises(XrtError) as e:
        _ = null.cptr()
    assert code_of(e) == ErrorCode.WRONG_TYPE
    for op in (lambda: null + 1, lambda: null - 1, lambda: null - null):
        with pytest.raises(XrtError) as e:
            op()
        assert code_of(e) == ErrorCode.WRONG_TYPE


def test_arithmetic() -> None:
    p = MemPtr(0x1000)
    assert (p + 0x10).addr == 0x1010 and (0x10 + p).addr == 0x1010
    assert (p - 0x10).addr == 0xFF0
    assert (p + 0x10) - p == 0x10 and p - (p + 0x10) == -0x10
    buf = bytearray(100)
    b = MemPtr(buf, 0x2000, offset=10)
    c = b + 50
    assert c.addr == 0x2000 + 50 and c.offset == 60 and c.kind is PtrKind.BOTH
    assert c - b == 50
    assert (b + 90).offset == 100 and len((b + 90).cptr()) == 0, "one past the end"
    # As a C pointer (the manual moves an 8-byte buffer's pointer by 40), it may point
    # outside its buffer; reaching bytes through it there is refused.
    outside = b + 91
    assert outside.addr == 0x2000 + 91 and outside - b == 91 and outside - 91 == b
    for p_out in (outside, b - 11):
        with pytest.raises(XrtError) as e:
            p_out.cptr()
        assert code_of(e) == ErrorCode.OUT_OF_RANGE
        with pytest.raises(XrtError) as e:
            p_out.host_bytes(1)
        assert code_of(e) == ErrorCode.OUT_OF_RANGE
    with pytest.raises(XrtError) as e:
        MemPtr(0) - 1
    assert code_of(e) == ErrorCode.OUT_OF_RANGE
    with pytest.raises(XrtError) as e:
        MemPtr((1 << 64) - 1) + 1
    assert code_of(e) == ErrorCode.OUT_OF_RANGE
    with pytest.raises(TypeError):
        p + 1.5  # type: ignore[operator]
    with pytest.raises(TypeError):
        p + True  # type: ignore[operator]
    with pytest.raises(XrtError) as e:
        MemPtr(buf) - MemPtr(0x10)
    assert code_of(e) == ErrorCode.WRONG_TYPE


def test_comparison_and_hash() -> None:
    buf = bytearray(64)
    a, b = MemPtr(0x100), MemPtr(0x200)
    assert a < b <= b and b > a >= a and a != b
    assert sorted([b, a, MemPtr(0x150)]) == [a, MemPtr(0x150), b]
    # Physical pointers compare by address, whatever their kind.
    both = MemPtr(buf, 0x100)
    assert both == a and hash(both) == hash(a) and both < b
    assert len({a, both, MemPtr(0x100)}) == 1
    # Host pointers compare by host address.
    h0, h5 = MemPtr(buf), MemPtr(buf, offset=5)
    assert h0 < h5 and h5 - h0 == 5 and h0 == MemPtr(memoryview(buf))
    assert hash(h0) == hash(MemPtr(buf))
    # The two spaces never mix.
    assert h0 != both and h0 != a
    with pytest.raises(XrtError) as e:
        _ = h0 < a
    assert code_of(e) == ErrorCode.WRONG_TYPE
    assert (a == "0x100") is False
    with pytest.raises(TypeError):
        _ = a < 5  # type: ignore[operator]


def test_repr_is_readable() -> None:
    assert repr(MemPtr.null()) == "MemPtr(null)"
    assert repr(MemPtr(0x4000_1000)) == "MemPtr(addr=0x40001000)"
    r = repr(MemPtr(bytearray(4096), 0x10, offset=16))
    assert r.startswith("MemPtr(addr=0x10, cptr=0x") and "+16 in 4096 B buffer" in r


def test_buffers_of_every_kind() -> None:
    arr = np.zeros((4, 4), dtype=np.float32)
    p = MemPtr(arr)
    assert len(p.buffer) == 64 and not p.buffer.readonly
    assert MemPtr(b"readonly").buffer.readonly
    with pytest.raises(XrtError) as e:
        MemPtr(arr[:, ::2])  # a pointer never points at a copy
    assert code_of(e) == ErrorCode.WRONG_TYPE
    with pytest.raises(XrtError) as e:
        MemPtr("text")  # type: ignore[call-overload]
    assert code_of(e) == ErrorCode.WRONG_TYPE
    with pytest.raises(XrtError) as e:
        MemPtr(bytearray(4), offset=5)
    assert code_of(e) == ErrorCode.OUT_OF_RANGE
    with pytest.raises(XrtError) as e:
        MemPtr(-1)
    assert code_of(e) == ErrorCode.OUT_OF_RANGE
    with pytest.raises(XrtError) as e:
        MemPtr(1 << 64)
    assert code_of(e) == ErrorCode.OUT_OF_RANGE
    with pytest.raises(XrtError) as e:
        MemPtr(addr=1.0)  # type: ignore[call-overload]
    assert code_of(e) == ErrorCode.WRONG_TYPE
    with pytest.raises(XrtError) as e:
        MemPtr(None, None, 3)  # type: ignore[call-overload]
    assert code_of(e) == ErrorCode.OUT_OF_RANGE
    with pytest.raises(XrtError) as e:
        MemPtr(bytearray(4)).host_bytes(5)
    assert code_of(e) == ErrorCode.OUT_OF_RANGE
    with pytest.raises(XrtError) as e:
        _ = MemPtr(16).host_address
    assert code_of(e) == ErrorCode.WRONG_TYPE


@settings(max_examples=200, deadline=None)
@given(
    base=st.integers(0, (1 << 63)),
    moves=st.lists(st.integers(-(1 << 20), 1 << 20), max_size=8),
)
def test_arithmetic_is_integer_arithmetic(base: int, moves: list[int]) -> None:
    p = MemPtr(base)
    expected = base
    for m in moves:
        if 0 <= expected + m < 1 << 64:
            p = p + m
            expected += m
        else:
            with pytest.raises(XrtError):
                p + m
    assert p.addr == expected and p - MemPtr(base) == expected - base
    assert (p == MemPtr(expected)) and hash(p) == hash(MemPtr(expected))
    assert (p < MemPtr(base)) == (expected < base)
