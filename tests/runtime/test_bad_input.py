"""Bad input everywhere: random junk thrown at every public entry point either works or
raises XrtError; nothing else escapes (no TypeError, ValueError, crash or hang).

Operators are the exception Python itself makes: ``ptr + "x"`` raises TypeError, as for
any type that does not support an operand.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable
from datetime import timedelta

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from xrt import (
    Device,
    DeviceURL,
    HostDevice,
    MemPtr,
    RegPoll,
    RegRead,
    RegWrite,
    Tensor,
    TensorType,
    XrtError,
)
from xrt.hw.regmap import FieldInfo, RegisterBlockInfo, RegisterInfo
from xrt.testing.memory_transport import MemoryMemRegion, MemoryRegRegion

SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])

junk = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(1 << 70), 1 << 70),
    st.integers(0, 1 << 17),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=6),
    st.binary(max_size=8),
    st.lists(st.integers(-3, 300), max_size=3),
    st.lists(st.lists(st.integers(), max_size=2), max_size=2),
    st.sampled_from(
        [
            np.int64(-1),
            np.uint64(7),
            np.float32(1.5),
            np.zeros(3),
            np.zeros((2, 2), np.int8)[:, ::2],
            object(),
            MemPtr.null(),
            MemPtr(0x1000),
            MemPtr(bytearray(8)),
            memoryview(b"ab"),
            timedelta(seconds=-1),
            timedelta(milliseconds=1),
            complex(1, 2),
            ...,
        ]
    ),
)


def survive(call: Callable[[], object]) -> None:
    try:
        call()
    except XrtError as exc:
        assert exc.message
    except RecursionError:  # pragma: no cover
        raise


BLOCK = RegisterBlockInfo(
    "b",
    0x10,
    (
        RegisterInfo("A", 0, 32, (FieldInfo("X", 0, 4, "rw", 0), FieldInfo("Y", 4, 1, "r", 0))),
        RegisterInfo("B", 4, 32, (FieldInfo("Z", 0, 1, "rw", 0, onwrite="woclr"),)),
    ),
)


@pytest.fixture(scope="module")
def regions() -> tuple[MemoryMemRegion, MemoryMemRegion, MemoryRegRegion]:
    return (
        MemoryMemRegion("a", 0x1000, 1 << 16, host_visible=False),
        MemoryMemRegion("b", 1 << 20, 1 << 16),
        MemoryRegRegion("r", 0x4000, regmap=BLOCK),
    )


@SETTINGS
@given(a=junk, b=junk, c=junk)
def test_memptr_and_urls(a: object, b: object, c: object) -> None:
    survive(lambda: MemPtr(a))  # type: ignore[call-overload]
    survive(lambda: MemPtr(a, b))  # type: ignore[call-overload]
    survive(lambda: MemPtr(a, b, c))  # type: ignore[call-overload]
    survive(lambda: MemPtr(addr=a))  # type: ignore[call-overload]
    for op in (lambda: MemPtr(0x1000) + a, lambda: MemPtr(0x1000) - a):
        with contextlib.suppress(XrtError, TypeError):  # TypeError: Python's operator rule
            op()
    survive(lambda: DeviceURL.parse(a))  # type: ignore[arg-type]
    if isinstance(a, str):
        survive(lambda: Device.open(f"x{a}://h?{a}={a}"))
        survive(lambda: DeviceURL.parse(f"grpc://{a}:{a}/{a}?{a}"))
    survive(lambda: DeviceURL.parse("axi://h?n=1").get_int(a))  # type: ignore[arg-type]


@SETTINGS
@given(a=junk, b=junk, c=junk)
def test_mem_regions_and_chunks(
    regions: tuple[MemoryMemRegion, MemoryMemRegion, MemoryRegRegion],
    a: object,
    b: object,
    c: object,
) -> None:
    r, other, _ = regions
    host = HostDevice.default_region()
    for region in (r, host):
        survive(lambda: region.read(a, b, c))  # noqa: B023
        survive(lambda: region.write(a, b, c))  # noqa: B023
        survive(lambda: region.memcpy(a, b, c))  # noqa: B023
        survive(lambda: region.memcpy(a, other, b, c))  # noqa: B023
        survive(lambda: region.malloc(a))  # noqa: B023
        survive(lambda: region.malloc(a, b, c))  # noqa: B023
        survive(lambda: region.malloc(MemPtr(region.base + 64), a, b, c))  # noqa: B023
        survive(lambda: region.free(a))  # noqa: B023
        survive(lambda: region.view(a, b))  # noqa: B023
        survive(lambda: region.ptr(a))  # noqa: B023
        survive(lambda: region.contains(a, b))  # noqa: B023
        survive(lambda: region.mem_manager.get_chunk(a, b))  # noqa: B023
        chunk = region.malloc(64)
        survive(lambda: chunk.read(a, b, c))  # noqa: B023
        survive(lambda: chunk.write(a, b, c))  # noqa: B023
        survive(lambda: chunk.tobytes(a, b))  # noqa: B023
        survive(lambda: chunk.view(a, b))  # noqa: B023
        survive(lambda: chunk.copy_from(a, src_offset=b, nbytes=c))  # noqa: B023
        survive(lambda: chunk.copy_from(chunk, src_offset=a, dest_offset=b, nbytes=c))  # noqa: B023
        chunk.free()
    for region in (r, other):
        assert region.mem_manager.chunk_count == 0 or region.mem_manager.all_chunks()


@SETTINGS
@given(a=junk, b=junk, c=junk)
def test_reg_regions(
    regions: tuple[MemoryMemRegion, MemoryMemRegion, MemoryRegRegion],
    a: object,
    b: object,
    c: object,
) -> None:
    _, _, reg = regions
    survive(lambda: reg.read(a, b))  # type: ignore[arg-type]
    survive(lambda: reg.write(a, b, c))  # type: ignore[arg-type]
    survive(lambda: reg.write_masked(a, b, c))  # type: ignore[arg-type]
    survive(lambda: reg.execute(a))  # type: ignore[arg-type]
    survive(lambda: reg.execute([RegRead(a), RegWrite(0x4000, b)]))  # type: ignore[arg-type]
    survive(
        lambda: reg.execute(
            [RegPoll(0x4000, a, b, max_polls=c, timeout_s=0.001)]  # type: ignore[arg-type]
        )
    )
    survive(lambda: reg.execute([RegPoll(0x4000, 0, 0, a, b, c)]))  # type: ignore[arg-type]
    survive(lambda: reg.poll(a, b, c, max_polls=2))  # type: ignore[arg-type]
    survive(lambda: reg.regs[a])  # type: ignore[index]
    survive(lambda: reg.regs.A.modify(X=a))  # type: ignore[arg-type]
    survive(lambda: reg.regs.A.write(a))  # type: ignore[arg-type]
    survive(lambda: reg.regs.B.Z.write(a))  # type: ignore[arg-type]
    survive(lambda: reg.regs.A.poll(X=a, max_polls=b, timeout_s=0.001))  # type: ignore[arg-type]
    survive(lambda: reg.regs.A.poll(mask=a, expected=b, max_polls=1))  # type: ignore[arg-type]
    batch = reg.batch()
    survive(lambda: batch.write(a, b))  # type: ignore[arg-type]
    survive(lambda: batch.read(a))  # type: ignore[arg-type]
    survive(lambda: batch.poll(a, b, c, max_polls=1))  # type: ignore[arg-type]
    survive(lambda: batch.modify(a, X=b))  # type: ignore[arg-type]
    survive(batch.run)


@SETTINGS
@given(a=junk, b=junk, c=junk)
def test_tensors_and_devices(
    regions: tuple[MemoryMemRegion, MemoryMemRegion, MemoryRegRegion],
    a: object,
    b: object,
    c: object,
) -> None:
    r = regions[0]
    if not isinstance(c, np.ndarray):  # xrt.dtypes compares layout == "*" first (not ours)
        survive(lambda: TensorType(a, b, c))  # type: ignore[arg-type]
    survive(lambda: Tensor(a))  # type: ignore[arg-type]
    survive(lambda: Tensor(TensorType("FP32", [2]), a, b))  # type: ignore[arg-type]
    survive(lambda: Tensor(TensorType("FP32", [2], "*", a)))  # type: ignore[arg-type]
    survive(lambda: Tensor.from_numpy(a))  # type: ignore[arg-type]
    survive(lambda: Tensor.from_numpy(np.zeros(2, np.int8), layout=a, dtype=b))  # type: ignore[arg-type]
    survive(lambda: Tensor.from_numpy(np.zeros(2, np.int8), region=a, hw_layout=b))  # type: ignore[arg-type]
    t = Tensor.from_numpy(np.arange(4, dtype=np.int16).reshape(2, 2), region=r)
    survive(lambda: t.fill(a))  # type: ignore[arg-type]
    survive(lambda: t.fill(lambda i: a))
    survive(lambda: t.fill(lambda i: a, vectorized=True))
    survive(lambda: t.fill(1, vectorized=a))  # type: ignore[arg-type]
    survive(lambda: t.copy_data(a))  # type: ignore[arg-type]
    survive(lambda: t.set_data(a, b))  # type: ignore[arg-type]
    survive(lambda: t.malloc_on(a))  # type: ignore[arg-type]
    survive(lambda: t.malloc_on(r, a))  # type: ignore[arg-type]
    survive(lambda: t.to(a))  # type: ignore[arg-type]
    survive(lambda: t.read(a, b, c))  # type: ignore[arg-type]
    survive(lambda: t.write(a, b, c))  # type: ignore[arg-type]
    survive(lambda: t.copy_from(a))  # type: ignore[arg-type]
    survive(lambda: t.wait_for_ready(a, b))  # type: ignore[arg-type]
    survive(lambda: t.set_ready(a))  # type: ignore[arg-type]
    survive(lambda: t.set_check_func(a))  # type: ignore[arg-type]
    survive(lambda: t.numpy(a, hardware=b))  # type: ignore[arg-type]
    survive(lambda: t.dump(io.BytesIO(), a))  # type: ignore[arg-type]
    survive(lambda: t.dump(io.BytesIO(), "SFB", fallback=a))  # type: ignore[arg-type]
    if not isinstance(a, str):  # a str would be taken as a file path
        survive(lambda: t.dump(a))  # type: ignore[arg-type]
    dev = HostDevice.default()
    survive(lambda: dev.get_mem_region(a))  # type: ignore[arg-type]
    survive(lambda: dev.malloc(a, region=b))  # type: ignore[arg-type]
    survive(lambda: dev.read_reg(a))  # type: ignore[arg-type]
    survive(lambda: dev.wait_irq(a))  # type: ignore[arg-type]
    survive(lambda: dev.set_default_mem_region(a))  # type: ignore[arg-type]
    survive(lambda: HostDevice(capacity=a))  # type: ignore[arg-type]
