"""Block test of the DMA engine (`npu_dma`) against cocotbext-axi's AXI4 slave.

The toplevel is `npu_dma_flat`: the engine with its AXI4 and AXI4-Lite ports as flat
`m_axi_*` and `s_axil_*` signals, which cocotbext-axi finds by prefix (inside the NPU they
are request/response structs).

The memory on the DMA's AXI4 master port is cocotbext-axi's `AxiSlave` over a plain
bytearray, with random backpressure and idle cycles on every channel. Each transfer is
checked three ways: the memory image afterwards equals a Python model of the copy (and
nothing else changed), the AXI traffic equals what was programmed (the exact set of beats
read, the exact beats and byte strobes written, legal bursts, bounded outstanding bursts),
and the status, interrupt and counters report it. Hundreds of random cases per bus width,
seeded; the seed is printed and a failure names it.

pytest builds one model per configuration (cached) and runs the cocotb tests inside it.
"""

from __future__ import annotations

import itertools
import os
import random
from collections import Counter
from dataclasses import dataclass

import cocotb
import pytest
from cocotb.triggers import RisingEdge
from cocotbext.axi import AxiBus, AxiResp, AxiSlave
from cocotbext.axi import axi_slave as axi_slave_module

from npuemu.sim.build import build_model
from npuemu.sim.cocotb_run import run_cocotb
from npuemu.sim.dma_driver import DmaTransfer, program_ops, run_dma
from npuemu.sim.harness import NpuHarness
from xrt.hw.regops import RegWrite
from xrt.hw.regs import DMA
from xrt.hw.wire import WaitOutcome

RAM_SIZE = 256 * 1024  # memory window 0: backed by the slave's bytearray
FAULT_BASE = RAM_SIZE  # memory window 1: the DMA may address it; the slave answers SLVERR
ERR_ZERO_LENGTH, ERR_SRC_RANGE, ERR_DST_RANGE = 1, 2, 3
ERR_READ_SLVERR, ERR_READ_DECERR, ERR_WRITE_SLVERR, ERR_WRITE_DECERR, ERR_ABORTED = 4, 5, 6, 7, 8

# (bus bytes, max burst beats, max outstanding, FIFO depth): the shipped configuration, a
# narrow bus with short bursts and the smallest legal FIFO, and a wide bus.
CONFIGS = {
    "w16": (16, 256, 8, 1024),
    "w8-tight": (8, 16, 2, 35),
    "w32": (32, 64, 4, 131),
}


@pytest.mark.sim
@pytest.mark.parametrize("config", list(CONFIGS))
def test_dma_block(config, tmp_path):
    bus_bytes, max_burst, max_out, fifo = CONFIGS[config]
    model = build_model(
        "npu_dma_flat",
        {
            "BusBytes": bus_bytes,
            "MaxBurstBeats": max_burst,
            "MaxOutstanding": max_out,
            "FifoDepth": fifo,
            "Mem0Base": "64'h0",
            "Mem0Size": f"64'h{RAM_SIZE:x}",
            "Mem1Base": f"64'h{FAULT_BASE:x}",
            "Mem1Size": f"64'h{RAM_SIZE:x}",
        },
        name=f"dma-{config}",
    )
    seed = int(os.environ.get("NPU_TEST_SEED", random.randrange(1 << 30)))
    print(f"NPU_TEST_SEED={seed}")
    run_cocotb(
        model,
        "test_dma_block",
        test_dir=tmp_path,
        extra_env={
            "DMA_CONFIG": ",".join(map(str, CONFIGS[config])),
            "NPU_TEST_SEED": str(seed),
            "DMA_CASES": os.environ.get("DMA_CASES", "150"),
        },
        seed=seed,
    )


# ---------------------------------------------------------------------------- cocotb side
class FaultyRam:
    """The slave's storage: RAM_SIZE bytes. Accesses past them, or touching the `fault`
    range, raise, which cocotbext-axi's AxiSlave turns into an error response: SLVERR, or
    for the fault range `fault_kind` (DECERR through `_RespShim`)."""

    def __init__(self) -> None:
        self.data = bytearray(RAM_SIZE)
        self.fault = range(0)
        self.fault_kind = "SLVERR"
        self.last_kind = "SLVERR"  # the kind of the last access that raised

    def _check(self, address: int, length: int) -> None:
        if address + length > RAM_SIZE:
            self.last_kind = "SLVERR"
            raise ValueError(f"access past the RAM at {address:#x}")
        if address < self.fault.stop and self.fault.start < address + length:
            self.last_kind = self.fault_kind
            raise ValueError(f"access to the faulty range at {address:#x}")

    async def read(self, address: int, length: int) -> bytes:
        self._check(address, length)
        return bytes(self.data[address : address + length])

    async def write(self, address: int, data: bytes) -> None:
        self._check(address, len(data))
        self.data[address : address + len(data)] = data


class _RespShim:
    """Stands in for `AxiResp` inside cocotbext-axi's slave module (which answers
    ``AxiResp.SLVERR`` for a failed access) and gives the kind of the fault the RAM just
    raised instead, so DECERR can be tested too."""

    def __init__(self, ram: FaultyRam) -> None:
        self._ram = ram

    def __getattr__(self, name: str):
        return getattr(AxiResp, name)

    @property
    def SLVERR(self):  # noqa: N802 - the enum member's name
        return AxiResp[self._ram.last_kind]


@dataclass
class Traffic:
    """What the monitor saw on the AXI4 master port during one transfer."""

    read_beats: Counter
    write_beats: Counter  # (beat address, strobe) -> count
    max_reads_out: int
    max_writes_out: int
    bad: list[str]


class AxiWatcher:
    """Samples the handshakes of the DMA's AXI4 master port every cycle and checks the
    burst rules as they happen."""

    def __init__(self, dut, bus_bytes: int, max_burst: int) -> None:
        self.dut, self.nb, self.max_burst = dut, bus_bytes, max_burst
        self.clock = dut.clk_i
        self.size = bus_bytes.bit_length() - 1
        # AXI lets W beats complete before their AW: both queue up and are paired in order.
        self.aw_queue: list[tuple[int, int]] = []  # (next beat address, beats left) per AW
        self.w_beats: list[tuple[int, bool]] = []  # (strobe, last) not yet paired
        self.reset()
        cocotb.start_soon(self._run())

    def reset(self) -> None:
        self.t = Traffic(Counter(), Counter(), 0, 0, [])
        self.reads_out = self.writes_out = 0

    def _burst(self, kind: str, addr: int, length: int, size: int, burst: int) -> None:
        beats = length + 1
        if size != self.size:
            self.t.bad.append(f"{kind} size {size}, bus needs {self.size}")
        if burst != 1:
            self.t.bad.append(f"{kind} burst type {burst}, want INCR")
        if addr % self.nb:
            self.t.bad.append(f"{kind} address {addr:#x} not beat-aligned")
        if beats > self.max_burst:
            self.t.bad.append(f"{kind} of {beats} beats > {self.max_burst}")
        if addr // 4096 != (addr + beats * self.nb - 1) // 4096:
            self.t.bad.append(f"{kind} {addr:#x}+{beats} beats crosses 4 KiB")

    async def _run(self) -> None:
        d = self.dut
        while True:
            await RisingEdge(self.clock)
            if d.m_axi_arvalid.value and d.m_axi_arready.value:
                addr, length = int(d.m_axi_araddr.value), int(d.m_axi_arlen.value)
                self._burst(
                    "AR", addr, length, int(d.m_axi_arsize.value), int(d.m_axi_arburst.value)
                )
                for i in range(length + 1):
                    self.t.read_beats[addr + i * self.nb] += 1
                self.reads_out += 1
            if d.m_axi_rvalid.value and d.m_axi_rready.value and d.m_axi_rlast.value:
                self.reads_out -= 1
            if d.m_axi_awvalid.value and d.m_axi_awready.value:
                addr, length = int(d.m_axi_awaddr.value), int(d.m_axi_awlen.value)
                self._burst(
                    "AW", addr, length, int(d.m_axi_awsize.value), int(d.m_axi_awburst.value)
                )
                self.aw_queue.append((addr, length + 1))
                self.writes_out += 1
            if d.m_axi_wvalid.value and d.m_axi_wready.value:
                self.w_beats.append((int(d.m_axi_wstrb.value), bool(d.m_axi_wlast.value)))
            while self.aw_queue and self.w_beats:
                addr, left = self.aw_queue[0]
                strb, last = self.w_beats.pop(0)
                if last != (left == 1):
                    self.t.bad.append(f"WLAST {int(last)} with {left} beats of the burst left")
                if strb:
                    self.t.write_beats[(addr, strb)] += 1
                self.aw_queue[0] = (addr + self.nb, left - 1)
                if left == 1:
                    self.aw_queue.pop(0)
            if d.m_axi_bvalid.value and d.m_axi_bready.value:
                self.writes_out -= 1
            self.t.max_reads_out = max(self.t.max_reads_out, self.reads_out)
            self.t.max_writes_out = max(self.t.max_writes_out, self.writes_out)


def expected_traffic(t: DmaTransfer, nb: int) -> tuple[Counter, Counter, dict[int, int]]:
    """Beats the transfer must read, (beat, strobe) pairs it must write, byte moves."""
    reads, writes, moves = Counter(), Counter(), {}
    for r in range(t.rows):
        s, d = t.src + r * t.src_stride, t.dst + r * t.dst_stride
        for beat in range(s // nb, (s + t.row_bytes - 1) // nb + 1):
            reads[beat * nb] += 1
        strobes: dict[int, int] = {}
        for i in range(t.row_bytes):
            beat, lane = divmod(d + i, nb)
            strobes[beat * nb] = strobes.get(beat * nb, 0) | (1 << lane)
            moves[d + i] = s + i
        for addr, strb in strobes.items():
            writes[(addr, strb)] += 1
    return reads, writes, moves


def pause_pattern(rng: random.Random, mode: str):
    """Backpressure generator for one AXI channel (True = stall this cycle)."""
    if mode == "none":
        return None
    if mode == "random":
        p = rng.choice([0.1, 0.3, 0.6])
        bits = [rng.random() < p for _ in range(997)]
    else:  # long idle stretches between bursts of activity
        bits = [False] * rng.randint(1, 40) + [True] * rng.randint(1, 60)
    return itertools.cycle(bits)


class Bench:
    def __init__(self, dut) -> None:
        self.dut = dut
        self.nb, self.max_burst, self.max_out, self.fifo = map(
            int, os.environ["DMA_CONFIG"].split(",")
        )
        self.seed = int(os.environ["NPU_TEST_SEED"])
        self.rng = random.Random(self.seed)
        self.h = NpuHarness(dut)
        self.ram = FaultyRam()
        axi_slave_module.AxiResp = _RespShim(self.ram)
        self.slave = AxiSlave(
            AxiBus.from_prefix(dut, "m_axi"),
            dut.clk_i,
            dut.rst_ni,
            target=self.ram,
            reset_active_level=False,
        )
        for ch in self._channels():
            ch.log.setLevel("WARNING")
        self.slave.write_if.log.setLevel("ERROR")
        self.slave.read_if.log.setLevel("ERROR")
        self.watch = AxiWatcher(dut, self.nb, self.max_burst)

    def _channels(self):
        r, w = self.slave.read_if, self.slave.write_if
        return [r.ar_channel, r.r_channel, w.aw_channel, w.w_channel, w.b_channel]

    def backpressure(self, mode: str) -> None:
        for ch in self._channels():
            ch.set_pause_generator(pause_pattern(self.rng, mode))
            if mode == "none":
                ch.pause = False  # removing a generator leaves its last value in place

    async def start(self) -> None:
        await self.h.reset()

    def random_transfer(self) -> DmaTransfer:
        rng, nb = self.rng, self.nb
        rows = 1 if rng.random() < 0.5 else rng.randint(2, 5)
        row_bytes = rng.choice(
            [
                rng.randint(1, 2 * nb),
                rng.randint(1, 300),
                rng.randint(1, 3000),
                rng.choice([nb, 4096, self.max_burst * nb, self.max_burst * nb + 1]),
            ]
        )
        src_stride = (
            rng.choice([0, rng.randint(1, row_bytes), row_bytes + rng.randint(0, 200)])
            if rows > 1
            else 0
        )
        dst_stride = row_bytes + rng.randint(0, 200) if rows > 1 else 0
        half = RAM_SIZE // 2  # source and destination in opposite halves, either way round
        src_area, dst_area = (0, half) if rng.random() < 0.5 else (half, 0)
        src_span = (rows - 1) * src_stride + row_bytes
        dst_span = (rows - 1) * dst_stride + row_bytes
        if rng.random() < 0.3:  # start just below a 4 KiB boundary
            src = (
                src_area
                + rng.randrange(1, (half - src_span) // 4096) * 4096
                - rng.randint(1, 2 * nb)
            )
        else:
            src = src_area + rng.randrange(0, half - src_span)
        dst = dst_area + rng.randrange(0, half - dst_span)
        return DmaTransfer(src, dst, row_bytes, rows, src_stride, dst_stride)

    async def check(self, t: DmaTransfer, label: str) -> None:
        where = f"{label} seed={self.seed} {t}"
        for i in range(0, RAM_SIZE, 4096):
            self.ram.data[i : i + 4096] = self.rng.randbytes(4096)
        before = bytes(self.ram.data)
        self.watch.reset()
        res = await run_dma(self.h, 0, t, max_cycles=2_000_000, timeout_s=60)
        assert res.ok, f"{where}: wait {res.wait.name}, ERR_CODE {res.err_code}"
        reads, writes, moves = expected_traffic(t, self.nb)
        want = bytearray(before)
        for d, s in moves.items():
            want[d] = before[s]
        tr = self.watch.t
        assert not tr.bad, f"{where}: illegal AXI traffic: {tr.bad[:5]}"
        assert tr.read_beats == reads, f"{where}: read beats differ from the programmed source"
        assert tr.write_beats == writes, (
            f"{where}: written beats/strobes differ from the destination"
        )
        assert tr.max_reads_out <= self.max_out and tr.max_writes_out <= self.max_out, (
            f"{where}: {tr.max_reads_out}/{tr.max_writes_out} bursts in flight > {self.max_out}"
        )
        assert bytes(self.ram.data) == bytes(want), f"{where}: memory image differs"


@cocotb.test()
async def random_transfers_under_backpressure(dut):
    """Hundreds of random 1-D/2-D transfers, any length, alignment and stride, with no,
    random and bursty backpressure on every channel."""
    b = Bench(dut)
    await b.start()
    cases = int(os.environ["DMA_CASES"])
    modes = ["none", "random", "bursty"]
    for case in range(cases):
        b.backpressure(modes[case % 3])
        await b.check(b.random_transfer(), f"case {case} ({modes[case % 3]})")
    b.backpressure("none")


@cocotb.test()
async def every_alignment_of_short_copies(dut):
    """Each source and destination offset within a beat, for lengths around one beat."""
    b = Bench(dut)
    await b.start()
    nb = b.nb
    for length in (1, nb - 1, nb, nb + 1, 2 * nb + 3):
        for so in range(nb):
            for do in range(0, nb, max(1, nb // 8)):
                await b.check(DmaTransfer(4096 + so, 96 * 1024 + do, length), f"len {length}")


@cocotb.test()
async def long_copy_keeps_the_bus_busy(dut):
    """A 64 KiB copy without backpressure moves close to one beat per cycle (logged)."""
    b = Bench(dut)
    await b.start()
    n = 64 * 1024
    res = await run_dma(b.h, 0, DmaTransfer(0, 128 * 1024, n))
    assert res.ok
    assert bytes(b.ram.data[128 * 1024 : 128 * 1024 + n]) == bytes(b.ram.data[:n])
    dut._log.info(
        "%d bytes in %d cycles: %.2f of %d bytes/cycle", n, res.cycles, n / res.cycles, b.nb
    )


@cocotb.test()
async def bus_errors_and_abort_never_hang(dut):
    """SLVERR on read or write ends the transfer with its code; bytes from failed reads
    are never written; ABORT ends a transfer; the next transfer is correct."""
    b = Bench(dut)
    await b.start()
    dma_base = 0
    fault = range(0x10000, 0x11000)
    for label, t, code in (
        ("read error", DmaTransfer(fault.start - 1000, 0x20000, 3000), ERR_READ_SLVERR),
        ("write error", DmaTransfer(0, fault.start - 700, 2000), ERR_WRITE_SLVERR),
        (
            "2-D read error",
            DmaTransfer(
                fault.start - 5000, 0x30000, 1000, rows=8, src_stride=1000, dst_stride=1000
            ),
            ERR_READ_SLVERR,
        ),
        ("read outside the RAM", DmaTransfer(FAULT_BASE + 64, 0, 500), ERR_READ_SLVERR),
        ("write outside the RAM", DmaTransfer(64, FAULT_BASE + 3, 700), ERR_WRITE_SLVERR),
    ):
        for mode in ("none", "random"):
            b.backpressure(mode)
            before = bytes(b.ram.data)
            b.ram.fault = fault
            res = await run_dma(b.h, dma_base, t, max_cycles=1_000_000, timeout_s=60)
            b.ram.fault = range(0)
            assert res.wait is WaitOutcome.INTERRUPT, f"{label}: no interrupt ({res.wait})"
            assert res.err_code == code, f"{label}: ERR_CODE {res.err_code}, want {code}"
            _, _, moves = expected_traffic(t, b.nb)
            for d, s in moves.items():
                if d < RAM_SIZE and b.ram.data[d] != before[d]:
                    assert s < RAM_SIZE and b.ram.data[d] == before[s], (
                        f"{label}: byte {d:#x} garbage"
                    )
            await b.check(b.random_transfer(), f"after {label}")

    b.backpressure("random")
    await b.h.run_batch(program_ops(dma_base, DmaTransfer(0, 128 * 1024, 100_000)))
    await b.h.run_cycles(500)
    await b.h.write_reg(dma_base + DMA.register("CTRL").offset, 2)  # ABORT
    w = await b.h.wait_irq(max_cycles=200_000)
    assert w.fired
    status = await b.h.read_reg(dma_base + DMA.register("STATUS").offset)
    assert (status >> 8) & 0xF == ERR_ABORTED and not status & 1
    await b.h.write_reg(dma_base + DMA.register("INT_STATUS").offset, 3)
    await b.check(b.random_transfer(), "after abort")


@cocotb.test()
async def refused_transfers_touch_no_bus(dut):
    """Transfers the engine must refuse before any burst, with every register bit at 1
    somewhere (all-ones and alternating patterns): ZERO_LENGTH, SRC_RANGE and DST_RANGE
    (checked in that order) with ERR_ADDR naming the refused address, no AR or AW on the
    bus, counters counting the failures; each followed by a correct transfer. (Closes the
    toggle coverage of the programming registers' high bits: docs/verification.md.)"""
    b = Bench(dut)
    await b.start()
    ones, a5, five = (1 << 64) - 1, 0xAAAA_AAAA_AAAA_AAAA, 0x5555_5555_5555_5555
    m32 = 0xFFFF_FFFF
    ok_src, ok_dst = 0x100, RAM_SIZE // 2
    cases = [  # (label, transfer, code, refused address)
        ("no rows", DmaTransfer(ones, five, m32, 0, m32, m32), ERR_ZERO_LENGTH, ones),
        ("empty rows", DmaTransfer(a5, five, 0, m32, m32, m32), ERR_ZERO_LENGTH, a5),
        ("source all ones", DmaTransfer(ones & ~0xF, ok_dst, 16), ERR_SRC_RANGE, ones & ~0xF),
        ("source 0xAA..", DmaTransfer(a5, ok_dst, 16), ERR_SRC_RANGE, a5),
        ("source 0x55..", DmaTransfer(five, ok_dst, 16), ERR_SRC_RANGE, five),
        ("destination all ones", DmaTransfer(ok_src, ones & ~0xF, 16), ERR_DST_RANGE, ones & ~0xF),
        ("destination 0xAA..", DmaTransfer(ok_src, a5, 16), ERR_DST_RANGE, a5),
        ("destination 0x55..", DmaTransfer(ok_src, five, 16), ERR_DST_RANGE, five),
        ("row of 4 GiB", DmaTransfer(ok_src, ok_dst, m32), ERR_SRC_RANGE, ok_src),
        ("rows of 0xAA..", DmaTransfer(ok_src, ok_dst, 0xAAAA_AAAA), ERR_SRC_RANGE, ok_src),
        ("4 G rows", DmaTransfer(ok_src, ok_dst, 16, m32, 16, 16), ERR_SRC_RANGE, ok_src),
        ("huge strides", DmaTransfer(ok_src, ok_dst, 16, 2, m32, m32), ERR_SRC_RANGE, ok_src),
        ("0x55.. rows and strides", DmaTransfer(ok_src, ok_dst, 0x5555_5555, 0x5555_5555,
                                                0x5555_5555, 0x5555_5555), ERR_SRC_RANGE, ok_src),
        ("huge destination stride", DmaTransfer(ok_src, ok_dst, 16, 3, 16, m32), ERR_DST_RANGE,
         ok_dst),
    ]  # fmt: skip
    failed_before = await b.h.read_reg(DMA.register("XFERS_FAILED").offset)
    for n, (label, t, code, addr) in enumerate(cases, start=1):
        b.watch.reset()
        res = await run_dma(b.h, 0, t, max_cycles=10_000, timeout_s=30)
        assert res.wait is WaitOutcome.INTERRUPT, f"{label}: no interrupt ({res.wait})"
        assert (res.err_code, res.err_addr) == (code, addr), (
            f"{label}: ERR_CODE {res.err_code}, ERR_ADDR {res.err_addr:#x}; want {code}, {addr:#x}"
        )
        assert not b.watch.t.read_beats and not b.watch.t.write_beats, f"{label}: bus traffic"
        failed = await b.h.read_reg(DMA.register("XFERS_FAILED").offset)
        assert failed == failed_before + n, f"{label}: XFERS_FAILED {failed}"
        await b.check(b.random_transfer(), f"after {label}")


@cocotb.test()
async def decerr_is_told_from_slverr(dut):
    """An error response ends the transfer with the code of its kind and direction (READ or
    WRITE, SLVERR or DECERR) and ERR_ADDR naming the failing burst (the fault starts on a
    4 KiB boundary, where a burst starts); the next transfer is correct."""
    b = Bench(dut)
    await b.start()
    fault = range(0x10000, 0x11000)
    for kind, rd_code, wr_code in (
        ("DECERR", ERR_READ_DECERR, ERR_WRITE_DECERR),
        ("SLVERR", ERR_READ_SLVERR, ERR_WRITE_SLVERR),
    ):
        for label, t, code in (
            (f"read {kind}", DmaTransfer(fault.start - 1000, 0x20000, 3000), rd_code),
            (f"write {kind}", DmaTransfer(0, fault.start - 700, 2000), wr_code),
        ):
            b.backpressure("random")
            b.ram.fault, b.ram.fault_kind = fault, kind
            res = await run_dma(b.h, 0, t, max_cycles=1_000_000, timeout_s=60)
            b.ram.fault, b.ram.fault_kind = range(0), "SLVERR"
            assert res.wait is WaitOutcome.INTERRUPT, f"{label}: no interrupt ({res.wait})"
            assert (res.err_code, res.err_addr) == (code, fault.start), (
                f"{label}: ERR_CODE {res.err_code}, ERR_ADDR {res.err_addr:#x}; "
                f"want {code}, {fault.start:#x}"
            )
            await b.check(b.random_transfer(), f"after {label}")


@cocotb.test()
async def interrupt_enables_mask_events(dut):
    """INT_STATUS records exactly the event of a transfer's end (DONE for a copy, ERROR for
    a refused or failed one); the interrupt line rises only for an enabled event, and as
    soon as a recorded one is enabled; writing the event back clears it and the line."""
    b = Bench(dut)
    await b.start()
    h = b.h
    int_status, int_enable = DMA.register("INT_STATUS"), DMA.register("INT_ENABLE")
    done, error = int_status.field("DONE").mask, int_status.field("ERROR").mask
    busy = DMA.register("STATUS").field("BUSY").mask
    for label, t, event, fault in (
        ("copy", DmaTransfer(0x100, RAM_SIZE // 2, 100), done, range(0)),
        ("refused copy", DmaTransfer(RAM_SIZE - 8, 0x100, 100), error, range(0)),
        ("write error", DmaTransfer(0x100, 0x8000, 100), error, range(0x8000, 0x9000)),
    ):
        other = (done | error) ^ event
        ops = [
            RegWrite(op.addr, other)
            if isinstance(op, RegWrite) and op.addr == int_enable.offset
            else op
            for op in program_ops(0, t)
        ]
        b.ram.fault = fault
        await h.run_batch(ops)
        w = await h.wait_irq(max_cycles=20_000)
        b.ram.fault = range(0)
        assert not w.fired, f"{label}: the line rose with only {other:#x} enabled"
        assert not await h.read_reg(DMA.register("STATUS").offset) & busy, f"{label}: still busy"
        got = await h.read_reg(int_status.offset)
        assert got == event, f"{label}: INT_STATUS {got:#x}, want {event:#x}"
        await h.write_reg(int_enable.offset, event)
        assert (await h.wait_irq(max_cycles=100)).fired, f"{label}: enabling did not raise it"
        await h.write_reg(int_status.offset, event)
        await h.run_cycles(4)
        assert not h.irq and await h.read_reg(int_status.offset) == 0, f"{label}: not cleared"


@cocotb.test()
async def transfers_reach_the_last_byte_of_each_window(dut):
    """The range check includes a window's last byte: transfers ending there run (source or
    destination, one row or strided), one byte more is refused (SRC_RANGE, DST_RANGE with
    ERR_ADDR). Window 1 answers SLVERR on the bus: a transfer ending at its last byte passes
    the check and fails on the bus instead."""
    b = Bench(dut)
    await b.start()
    end0, end1 = RAM_SIZE, FAULT_BASE + RAM_SIZE
    for label, t in (
        ("source to the end", DmaTransfer(end0 - 300, 0x100, 300)),
        ("destination to the end", DmaTransfer(0x100, end0 - 300, 300)),
        ("strided source to the end", DmaTransfer(end0 - 2200, 0x100, 200, 3, 1000, 256)),
        ("strided destination to the end", DmaTransfer(0x100, end0 - 2200, 200, 3, 256, 1000)),
    ):
        await b.check(t, label)
    for label, t, code, addr in (
        ("source a byte past the end", DmaTransfer(end0 - 299, 0x100, 300), ERR_SRC_RANGE,
         end0 - 299),
        ("destination a byte past the end", DmaTransfer(0x100, end0 - 299, 300), ERR_DST_RANGE,
         end0 - 299),
        ("window 1 to its end", DmaTransfer(0x100, end1 - 300, 300), ERR_WRITE_SLVERR, None),
        ("window 1 a byte past its end", DmaTransfer(0x100, end1 - 299, 300), ERR_DST_RANGE,
         end1 - 299),
    ):  # fmt: skip
        res = await run_dma(b.h, 0, t, max_cycles=100_000, timeout_s=30)
        assert res.wait is WaitOutcome.INTERRUPT, f"{label}: no interrupt ({res.wait})"
        want = (code, res.err_addr if addr is None else addr)
        assert (res.err_code, res.err_addr) == want, (
            f"{label}: ERR_CODE {res.err_code}, ERR_ADDR {res.err_addr:#x}; want {want}"
        )
