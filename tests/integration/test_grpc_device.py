"""The emulated NPU as a driver sees it: runtime -> gRPC -> server -> worker -> RTL.

Registers, batches with server-side polls, DMA-staged ``plddr``/``ocm`` bit-exact, copies
that run on the DMA engine, the interrupt and its deadline, reset.
"""

from __future__ import annotations

import random
from collections.abc import Callable

import numpy as np
import pytest

from npuemu.server.launch import ServerProcess
from xrt import Device, ErrorCode, MemPtr, RegPoll, RegRead, RegWrite, XrtError
from xrt.hw.regs import DMA, NPU
from xrt.npu_device import DEFAULT_BOUNCE_BYTES, BuyiDevice, NpuDevice, ZG330Device
from xrt.transport.grpc import GrpcMemRegion, GrpcRegRegion


def raises(code: ErrorCode) -> pytest.RaisesExc:  # type: ignore[type-arg]
    return pytest.raises(XrtError, check=lambda e: e.code == code)


def rand(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8)


# -- what the device is --------------------------------------------------------------------


def test_buyi_regions(buyi: NpuDevice) -> None:
    assert isinstance(buyi, BuyiDevice) and buyi.target == "buyi"
    assert set(buyi.reg_regions) == {"npu", "dma", "fault"}
    assert set(buyi.mem_regions) == {"udma", "plddr"}
    assert buyi.default_reg_region().name == "npu"
    assert buyi.default_mem_region().name == "plddr"
    npu, dma = buyi.get_reg_region("npu"), buyi.get_reg_region("dma")
    assert isinstance(npu, GrpcRegRegion) and npu.regmap is NPU and npu.base == 0x4000_0000
    assert isinstance(dma, GrpcRegRegion) and dma.regmap is DMA and dma.base == 0x8000_0000
    udma, plddr = buyi.get_mem_region("udma"), buyi.get_mem_region("plddr")
    assert isinstance(udma, GrpcMemRegion) and udma.host_visible
    assert (udma.base, udma.size) == (0x1000_0000, 64 << 20)
    assert (plddr.base, plddr.size) == (0x1_0000_0000, 512 << 20) and not plddr.host_visible
    # The bounce buffer is the top of udma, listed by its manager; the rest is free.
    bounce = buyi.dma_engine.bounce
    assert bounce.region is udma and bounce.size == DEFAULT_BOUNCE_BYTES
    assert bounce.end.addr == udma.end and udma.mem_manager.all_chunks() == [bounce]
    with raises(ErrorCode.WRONG_TYPE):
        buyi.get_mem_region("ocm")
    assert buyi.cycles is not None and buyi.cycles > 0


def test_zg330_has_ocm_and_moves_it_bit_exact(zg330_server: ServerProcess) -> None:
    with Device.open(zg330_server.url) as dev:
        assert isinstance(dev, ZG330Device) and dev.target == "zg330"
        assert set(dev.mem_regions) == {"udma", "plddr", "ocm"}
        ocm = dev.get_mem_region("ocm")
        assert (ocm.base, ocm.size) == (0xF000_0000, 1 << 20)
        assert dev.read_reg(NPU.register("TARGET").offset, relative=True) == 2
        data = rand(ocm.size - 5, 1)
        ocm.write(ocm.base + 5, data)
        back = np.empty_like(data)
        ocm.read(back, ocm.base + 5)
        assert np.array_equal(back, data)
        # ocm <-> plddr on the DMA engine, one transfer each way.
        plddr = dev.get_mem_region("plddr")
        before = dev.dma_engine.transfers
        plddr.memcpy(plddr.base + 3, ocm, ocm.base + 5, 1000)
        ocm.memcpy(ocm.base, plddr, plddr.base + 3, 1000)
        assert dev.dma_engine.transfers == before + 2
        out = bytearray(1000)
        ocm.read(out, ocm.base)
        assert bytes(out) == data[:1000].tobytes()


# -- registers -----------------------------------------------------------------------------


def test_register_round_trip(buyi: NpuDevice) -> None:
    npu, dma = buyi.get_reg_region("npu"), buyi.get_reg_region("dma")
    assert npu.regs.MAGIC.read() == NPU.register("MAGIC").reset
    assert dma.regs.MAGIC.read() == DMA.register("MAGIC").reset
    for value in (0, 0xFFFF_FFFF, 0xA5A5_5A5A, 1):
        npu.regs.SCRATCH.write(value)
        dma.write(DMA.register("SCRATCH").offset, value ^ 0xFFFF_FFFF, relative=True)
        assert npu.regs.SCRATCH.read() == value
        assert buyi.read_reg(npu.base + NPU.register("SCRATCH").offset) == value
        assert dma.regs.SCRATCH.read() == value ^ 0xFFFF_FFFF
    # The NPU reports the memory map it was built with.
    udma = buyi.get_mem_region("udma")
    fields = npu.regs.dump()
    assert fields["UDMA_BASE_LO"] == udma.base and fields["UDMA_SIZE"] * 1024 == udma.size


def test_batch_runs_a_dma_and_polls_it_to_completion(buyi: NpuDevice) -> None:
    """One RegisterBatch programs a transfer udma -> plddr, starts it and polls STATUS
    until BUSY = 0 server-side; a second brings the bytes back."""
    dma = buyi.get_reg_region("dma")
    udma, plddr = buyi.get_mem_region("udma"), buyi.get_mem_region("plddr")
    data = rand(100_000, 2).tobytes()
    src = udma.malloc(len(data))
    back = udma.malloc(len(data))
    src.write(data)
    dst = plddr.base + 1234
    r = dma.regs

    def copy_ops(to: int, frm: int) -> list:
        return [
            r.SRC_LO.op_write(frm & 0xFFFF_FFFF),
            r.SRC_HI.op_write(frm >> 32),
            r.DST_LO.op_write(to & 0xFFFF_FFFF),
            r.DST_HI.op_write(to >> 32),
            r.ROW_BYTES.op_write(len(data)),
            r.ROWS.op_write(1),
            r.INT_STATUS.op_write(0x3),
            r.CTRL.op_write(1),
            r.STATUS.op_poll(BUSY=0, timeout_s=2.0),
            r.XFERS_DONE.op_read(),
        ]

    res = dma.execute(copy_ops(dst, src.begin.addr))
    status, done = res[-2], res[-1]
    assert status is not None and DMA.register("STATUS").field("DONE").extract(status) == 1
    assert DMA.register("STATUS").field("ERR_CODE").extract(status) == 0
    res = dma.execute(copy_ops(back.begin.addr, dst))
    assert res[-1] == (done or 0) + 1
    assert back.tobytes() == data


def test_batch_builder_masked_write_and_named_fields(buyi: NpuDevice) -> None:
    npu = buyi.get_reg_region("npu")
    npu.regs.SCRATCH.write(0x1234_5678)
    with npu.batch() as b:
        b.write_masked("SCRATCH", 0x0000_AB00, 0x0000_FF00)
        i = b.read("SCRATCH")
        b.modify("INT_ENABLE", SW=1)
        j = b.read("INT_ENABLE")
    assert b.results is not None
    assert b.results[i] == 0x1234_AB78 and b.results[j] == 1


def test_poll_budget_runs_out_in_simulated_cycles(buyi: NpuDevice) -> None:
    """A poll that never matches: 11015 naming its budget; the ops before it ran, those
    after it did not; a count of reads and a time both become a cycle budget."""
    npu = buyi.get_reg_region("npu")
    a = npu.regs.SCRATCH.address
    npu.write(a, 0)
    for poll in (RegPoll(a, 0xF, 0x6, max_polls=3), RegPoll(a, 0xF, 0x6, timeout_s=0.01)):
        before = buyi.cycles
        with raises(ErrorCode.TIMEOUT) as e:
            npu.execute([RegWrite(a, 5), poll, RegWrite(a, 9)])
        assert "poll (op 1)" in e.value.message and "simulated cycles" in e.value.message
        assert npu.read(a) == 5
        assert buyi.cycles is not None and before is not None
        budget = 25 if poll.max_polls else 10_000
        assert buyi.cycles - before >= budget


# -- memory --------------------------------------------------------------------------------

# (offset, size): 1 byte, unaligned, odd sizes, beat and page edges, more than the bounce
# buffer (8 MiB), 16 MiB; some at the region's very end.
CASES = [
    (0, 1),
    (1, 1),
    (3, 17),
    (15, 33),
    (4095, 4097),
    (65_536 + 7, 65_536 - 3),
    (1_000_003, 1 << 20),
    ((1 << 20) + 1, 3 << 20),
    (5, (4 << 20) + 1),
    (77, DEFAULT_BOUNCE_BYTES + 13),
    (0, 16 << 20),
    (-1, 1),
    (-12_345, 12_345),
]


@pytest.mark.parametrize("query", ["", "local=0&double_buffer=0"])
def test_plddr_round_trip_bit_exact(open_buyi: Callable[..., NpuDevice], query: str) -> None:
    dev = open_buyi(query)
    assert dev.transport.local_fast_path == (query == "")  # type: ignore[attr-defined]
    plddr = dev.get_mem_region("plddr")
    rng = random.Random(7)
    for i, (off, n) in enumerate(CASES):
        addr = plddr.end + off if off < 0 else plddr.base + off + rng.randrange(0, 1 << 24)
        data = rand(n, i)
        plddr.write(addr, data)
        back = np.zeros(n, dtype=np.uint8)
        plddr.read(back, addr)
        assert np.array_equal(back, data), f"case {i}: {n} B at {addr:#x}"
    # Neighbours of a write stay untouched.
    plddr.write(plddr.base + 100, b"\xaa" * 10)
    plddr.write(plddr.base + 103, b"\x55" * 3)
    out = bytearray(10)
    plddr.read(out, plddr.base + 100)
    assert out == b"\xaa" * 3 + b"\x55" * 3 + b"\xaa" * 4


def test_copies_run_on_the_dma_engine(buyi: NpuDevice) -> None:
    """udma <-> plddr and plddr -> plddr copies are one transfer each, no staging; an
    overlapping move inside plddr keeps memmove semantics."""
    udma, plddr = buyi.get_mem_region("udma"), buyi.get_mem_region("plddr")
    eng = buyi.dma_engine
    data = rand(300_000, 3).tobytes()
    a = udma.malloc(len(data))
    b = udma.malloc(len(data))
    p = plddr.malloc(2 * len(data))
    a.write(data)
    n0 = eng.transfers
    p.copy_from(a)  # udma -> plddr
    assert eng.transfers == n0 + 1
    plddr.memcpy(p.begin + len(data), p.begin, len(data))  # plddr -> plddr, disjoint
    assert eng.transfers == n0 + 2
    b.copy_from(p, src_offset=len(data))  # plddr -> udma
    assert eng.transfers == n0 + 3
    assert b.tobytes() == data
    plddr.memcpy(p.begin + 1000, p.begin, len(data))  # overlapping: through the bounce
    assert p.tobytes(1000, len(data)) == data
    plddr.memcpy(p.begin + 7, p.begin + 1000, len(data))  # and back the other way
    assert p.tobytes(7, len(data)) == data


def test_udma_is_visible_to_the_dma_both_ways(open_buyi: Callable[..., NpuDevice]) -> None:
    """Bytes written to udma by streaming reach the DMA, and bytes the DMA writes are read
    back by streaming (local=0), as with the fast path."""
    dev = open_buyi("local=0")
    udma, plddr = dev.get_mem_region("udma"), dev.get_mem_region("plddr")
    assert not udma.host_visible
    data = rand(2 << 20, 4).tobytes()
    c = udma.malloc(len(data))
    c.write(data)
    plddr.memcpy(plddr.base, udma, c.begin, len(data))
    c.write(bytes(len(data)))
    udma.memcpy(c.begin, plddr, plddr.base, len(data))
    assert c.tobytes() == data


# -- interrupt and reset -------------------------------------------------------------------


def test_wait_irq_deadline_and_sources(buyi: NpuDevice) -> None:
    npu = buyi.get_reg_region("npu")
    assert buyi.has_irq
    assert buyi.wait_irq(0.0) is False
    assert buyi.wait_irq(0.2) is False  # nothing pending: the deadline passes
    before = buyi.cycles
    assert buyi.wait_irq(30.0, max_cycles=5000) is False  # the simulated limit comes first
    assert buyi.cycles is not None and before is not None and buyi.cycles - before >= 5000
    # The software interrupt: enabled and raised, the line is high until acknowledged.
    npu.regs.INT_ENABLE.modify(SW=1)
    npu.regs.CTRL.modify(SW_IRQ=1)
    assert buyi.wait_irq(10.0) is True
    assert npu.regs.INT_STATUS.SW.read() == 1
    npu.regs.CTRL.modify(SW_IRQ=0)
    npu.regs.INT_STATUS.SW.write(1)  # w1c
    assert buyi.wait_irq(0.0) is False
    with raises(ErrorCode.OUT_OF_RANGE):
        buyi.wait_irq(-1.0)


def test_dma_raises_the_interrupt(buyi: NpuDevice) -> None:
    dma = buyi.get_reg_region("dma")
    plddr = buyi.get_mem_region("plddr")
    udma = buyi.get_mem_region("udma")
    r = dma.regs
    n = 1 << 20
    dma.execute(
        [
            r.SRC_LO.op_write(plddr.base & 0xFFFF_FFFF),
            r.SRC_HI.op_write(plddr.base >> 32),
            r.DST_LO.op_write(udma.base),
            r.DST_HI.op_write(0),
            r.ROW_BYTES.op_write(n),
            r.INT_STATUS.op_write(3),
            r.INT_ENABLE.op_write(3),
            r.CTRL.op_write(1),
        ]
    )
    before = buyi.cycles
    assert buyi.wait_irq(60.0) is True
    assert buyi.cycles is not None and before is not None
    assert buyi.cycles - before >= n // 16  # a beat of 16 bytes per cycle at best
    assert r.STATUS.read_fields()["DONE"] == 1
    r.INT_STATUS.write(3)
    assert buyi.wait_irq(0.0) is False


def test_reset_restores_registers_and_keeps_memory(buyi: NpuDevice) -> None:
    npu, dma = buyi.get_reg_region("npu"), buyi.get_reg_region("dma")
    udma, plddr = buyi.get_mem_region("udma"), buyi.get_mem_region("plddr")
    npu.regs.SCRATCH.write(0x1234)
    dma.regs.INT_ENABLE.write(3)
    dma.regs.ROWS.write(9)
    udma.write(udma.base, b"kept in udma")
    plddr.write(plddr.base + 64, b"kept in plddr")
    buyi.reset()
    assert npu.regs.SCRATCH.read() == 0
    assert dma.regs.INT_ENABLE.read() == 0
    assert dma.regs.ROWS.read() == DMA.register("ROWS").reset == 1
    out = bytearray(12)
    udma.read(out, udma.base)
    assert out == b"kept in udma"
    out = bytearray(13)
    plddr.read(out, plddr.base + 64)  # and the DMA works after the reset
    assert out == b"kept in plddr"


def test_a_closed_device_refuses_everything(open_buyi: Callable[..., NpuDevice]) -> None:
    dev = open_buyi()
    plddr = dev.get_mem_region("plddr")
    dev.close()
    with raises(ErrorCode.WRONG_ORDER):
        plddr.write(plddr.base, b"x")
    with raises(ErrorCode.WRONG_ORDER):
        dev.wait_irq(0.0)
    with raises(ErrorCode.WRONG_ORDER):
        dev.reset()
    dev.close()  # idempotent


def test_fresh_lease_starts_from_clean_memory(open_buyi: Callable[..., NpuDevice]) -> None:
    """The server clears memory between holders: what one lease wrote, the next does not see."""
    dev = open_buyi(device="npu1")
    plddr = dev.get_mem_region("plddr")
    plddr.write(plddr.base, b"secret")
    dev.close()
    dev = open_buyi(device="npu1")
    plddr = dev.get_mem_region("plddr")
    out = bytearray(6)
    plddr.read(out, plddr.base)
    assert out == bytes(6)


def test_fixed_address_chunks_and_pointers(buyi: NpuDevice) -> None:
    plddr = buyi.get_mem_region("plddr")
    c = plddr.malloc(MemPtr(plddr.base + 0x1000), 256)
    c.write(bytes(range(256)))
    assert c.tobytes() == bytes(range(256))
    assert buyi.get_reg_region("npu").execute([RegRead(0x4000_0000)]) == [0x4E50_5530]


def test_threads_share_the_dma_engine(buyi: NpuDevice) -> None:
    """Staged transfers from several threads take turns on the one DMA channel and its
    bounce buffer: each thread reads back exactly what it wrote."""
    import threading

    plddr = buyi.get_mem_region("plddr")
    errors: list[BaseException] = []

    def worker(k: int) -> None:
        try:
            for rep in range(3):
                data = rand((1 << 20) + 97 * k + rep, 10 * k + rep)
                addr = plddr.base + k * (4 << 20) + rep
                plddr.write(addr, data)
                back = np.empty_like(data)
                plddr.read(back, addr)
                assert np.array_equal(back, data), f"thread {k} rep {rep}"
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
