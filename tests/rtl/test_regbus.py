"""The register bus master inside the simulation (`npu_regbus_master`) against
cocotbext-axi's `AxiLiteMaster`, the independent AXI4-Lite verification IP, on the same RTL.

- Random batches (reads, writes, masked writes, polls that match and polls that give up,
  SLVERR and DECERR addresses) give the same statuses, values and register state through
  both masters (seeded; the seed is printed: NPU_TEST_SEED reproduces a run).
- A bus monitor (this file, sampling the links every cycle: test code only) checks the
  master's AXI4-Lite traffic: handshake stability, a write alone on the link (reads may
  be pipelined, up to READS_IN_FLIGHT), legal responses, and the exact transactions each
  operation must make; the RTL checkers' assertions
  (`npu_axil_checker`) do not fail, and do fail on a hand-driven port's broken handshake.
- A masked write stays atomic while another master writes the same register.

cocotbext-axi's traffic itself is not checked: under Verilator, with `npu_sim`'s clock
driven from inside the simulator, the checkers see its `valid` drop in cycles where the
RTL saw `ready` low (it seems to sample `ready` after the edge); the demux tolerates
that, an arbiter that withholds `ready` would not (the atomicity test drives its other
master by hand).
"""

from __future__ import annotations

import itertools
import os
import random
from collections import deque
from dataclasses import dataclass, field

import cocotb
import pytest
from cocotb.triggers import FallingEdge, RisingEdge, Timer

from npuemu.sim import assertions
from npuemu.sim.cocotb_run import run_cocotb
from npuemu.sim.harness import NpuHarness
from npuemu.sim.regbus import CocotbextMaster, Row
from xrt.hw.regops import RegKind
from xrt.hw.regs import DMA, NPU
from xrt.hw.targets import CLOCK_PERIOD_PS, target
from xrt.hw.wire import RegisterStatus

M32 = 0xFFFF_FFFF
R, W, MW, P = RegKind.READ, RegKind.WRITE, RegKind.MASKED_WRITE, RegKind.POLL
OK = RegisterStatus.OK
_AXI_RESP = {RegisterStatus.SLVERR: 2, RegisterStatus.DECERR: 3}


def axi(status: int) -> int:
    """The AXI response the bus carried for an op that ended with `status` (a poll that
    gave up read OKAY)."""
    return _AXI_RESP.get(RegisterStatus(status), 0)


# ---------------------------------------------------------------------------- pytest side
# The one test whose assertion failures are meant: it runs alone, with Verilator told to go
# on after them (elsewhere the first failure ends the simulation, and the test fails).
BROKEN_HANDSHAKE = "checker_counts_a_broken_handshake"


@pytest.mark.sim
@pytest.mark.parametrize("broken", [False, True], ids=["regbus", "broken-handshake"])
def test_regbus_master(sim_model, shm_dir, tmp_path, broken):
    model = sim_model("buyi")
    files = {mem: shm_dir / f"{mem}.bin" for mem in ("udma", "plddr")}
    for mem, path in files.items():
        with path.open("wb") as f:
            f.truncate(target("buyi").memory(mem).size)
    seed = int(os.environ.get("NPU_TEST_SEED", random.randrange(1 << 30)))
    print(f"NPU_TEST_SEED={seed}")
    plusargs = [f"+npu_mem_{mem}={path}" for mem, path in files.items()]
    env = {"NPU_TARGET": "buyi", "NPU_TEST_SEED": str(seed)}
    if broken:
        plusargs.append("+verilator+error+limit+1000000")
    else:
        env["COCOTB_TEST_FILTER"] = rf"^(?!.*\.{BROKEN_HANDSHAKE}$)"
    run_cocotb(
        model,
        "test_regbus",
        test_dir=tmp_path,
        testcase=BROKEN_HANDSHAKE if broken else None,
        plusargs=plusargs,
        extra_env=env,
        seed=seed,
    )


# ---------------------------------------------------------------------------- cocotb side
class Pool:
    """Registers a random batch picks from, with what each one does."""

    def __init__(self) -> None:
        cfg = target(os.environ["NPU_TARGET"])
        npu = {r.name: cfg.npu_base + r.offset for r in NPU}
        dma = {r.name: cfg.dma_base + r.offset for r in DMA}
        # Full 32-bit read-write registers: their value is known after a write.
        self.scratch = [npu["SCRATCH"], dma["SCRATCH"], dma["SRC_LO"], dma["DST_LO"]]
        # Registers with narrower fields, write-1-to-clear bits or side effects that do
        # not depend on timing (the SW interrupt), and read-only ones (writes: SLVERR).
        self.other = [
            npu["INT_ENABLE"],
            npu["INT_STATUS"],
            npu["CTRL"],
            npu["INT_RAW"],
            npu["MAGIC"],
            npu["HW_VERSION"],
            npu["CAPS"],
            dma["SRC_HI"],
            dma["DST_HI"],
            dma["ROW_BYTES"],
            dma["ROWS"],
            dma["SRC_STRIDE"],
            dma["DST_STRIDE"],
            dma["INT_ENABLE"],
            dma["INT_STATUS"],
            dma["MAGIC"],
            dma["STATUS"],
        ]
        self.slverr = [cfg.npu_base + 0xFFC, cfg.dma_base + 0x800]
        self.decerr = [0x2000_0000, cfg.dma_base + 0x1000]
        # What the state comparison reads: everything above that keeps its value.
        self.state = self.scratch + self.other


def directed_batches(pool: Pool) -> list[list[Row]]:
    """One batch per outcome, so every seed covers them all (an error or a poll that gives
    up ends its batch, so a random seed may never reach some of them)."""
    reg = pool.scratch[0]
    return [
        [
            (W, reg, 0x1234_5678, M32, 0, 0),
            (R, reg, 0, M32, 0, 0),
            (MW, reg, 0xAB00, 0xFF00, 0, 0),
            (P, reg, 0, M32, 0x1234_AB78, 9),  # matches at once
            (P, reg, 0, 0xFF, 0x79, 9),  # never matches: gives up after 9 cycles
        ],
        [(R, pool.slverr[0], 0, M32, 0, 0)],
        [(W, pool.decerr[0], 0x5A5A, M32, 0, 0)],
        [(R, pool.decerr[1], 0, M32, 0, 0)],
    ]


def random_batch(rng: random.Random, pool: Pool, n: int) -> list[Row]:
    """`n` random ops; errors are rare so that batches run on past most of them."""
    known: dict[int, int] = {}  # full-width registers written earlier in this batch
    rows: list[Row] = []
    for _ in range(n):
        r = rng.random()
        if r < 0.03:
            addr = rng.choice(pool.slverr)
        elif r < 0.06:
            addr = rng.choice(pool.decerr)
        elif r < 0.6:
            addr = rng.choice(pool.scratch)
        else:
            addr = rng.choice(pool.other)
        kind = rng.choices([R, W, MW, P], [3, 3, 2, 2])[0]
        if kind == P and known and rng.random() < 0.7:
            addr = rng.choice(list(known))  # most polls wait for a value written before
        value, mask = rng.getrandbits(32), rng.choice([M32, 0xFF, 0xFFFF_0000, rng.getrandbits(32)])
        expected, max_cycles = 0, 0
        if kind == P:
            max_cycles = rng.choice([0, 1, 9, 100, rng.randint(1, 3000)])
            if addr in known and rng.random() < 0.6:
                expected = known[addr] & mask  # matches at once
            elif addr in known:
                mask = mask or 1
                expected = (known[addr] & mask) ^ (mask & -mask)  # never matches
            else:
                expected = rng.getrandbits(32) & mask  # most likely gives up
        elif kind == W and addr in pool.scratch:
            known[addr] = value
        elif kind == MW and addr in known:
            known[addr] = (known[addr] & ~mask | value & mask) & M32
        elif kind == MW:
            known.pop(addr, None)
        rows.append((kind, addr, value, mask, expected, max_cycles))
    return rows


@dataclass
class Txn:
    """One AXI4-Lite transaction seen on a link."""

    kind: str  # "read" or "write"
    addr: int
    data: int = 0  # read data or write data
    resp: int = 0
    start: int = 0  # the cycle of its address handshake


READS_IN_FLIGHT = 4  # the most a link carries (npu_axil_demux's ReadsInFlight)

# Inside npu_sim a link is a request/response struct pair; its checker (npu_axil_checker)
# names the signals, and rtl/sim/cocotb.vlt opens them to cocotb.
LINK_CHECKERS = {"rbm": "u_check_regbus", "axil": "u_check_axil"}


@dataclass
class LinkMonitor:
    """Samples one AXI4-Lite link at every falling clock edge (signals settle after the
    rising edge) and checks the protocol; `txns` is what went over it.

    Test code only: the product never runs Python per cycle.
    """

    dut: object
    prefix: str  # "rbm" (the master's own link) or "axil" (after the arbiter)
    txns: list[Txn] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def _get(self, name: str) -> int:
        return int(getattr(getattr(self.dut, LINK_CHECKERS[self.prefix]), name).value)

    async def run(self) -> None:
        prev: dict[str, tuple] = {}
        open_rd: deque[Txn] = deque()  # reads waiting for their data, in order
        open_wr: Txn | None = None
        aw_seen = w_seen = False
        cycle = 0
        while True:
            await FallingEdge(self.dut.clk_o)
            cycle += 1
            s = {
                n: self._get(n)
                for n in (
                    "awvalid", "awready", "awaddr", "awprot", "wvalid", "wready", "wdata",
                    "wstrb", "bvalid", "bready", "bresp", "arvalid", "arready", "araddr",
                    "arprot", "rvalid", "rready", "rdata", "rresp",
                )
            }  # fmt: skip
            channels = {
                "AW": ("awvalid", "awready", ("awaddr", "awprot")),
                "W": ("wvalid", "wready", ("wdata", "wstrb")),
                "B": ("bvalid", "bready", ("bresp",)),
                "AR": ("arvalid", "arready", ("araddr", "arprot")),
                "R": ("rvalid", "rready", ("rdata", "rresp")),
            }
            for ch, (valid, ready, payload) in channels.items():
                now = tuple(s[p] for p in payload)
                if ch in prev and not (s[valid] and now == prev[ch]):
                    self.errors.append(f"cycle {cycle}: {ch} changed while valid && !ready")
                prev.pop(ch, None)
                if s[valid] and not s[ready]:
                    prev[ch] = now
            if s["arvalid"] and s["arready"]:
                if open_wr is not None:
                    self.errors.append(f"cycle {cycle}: AR while a write is open")
                if len(open_rd) >= READS_IN_FLIGHT:
                    self.errors.append(f"cycle {cycle}: AR with {len(open_rd)} reads open")
                open_rd.append(Txn("read", s["araddr"], start=cycle))
            if s["awvalid"] and s["awready"]:
                if open_rd or aw_seen:
                    self.errors.append(f"cycle {cycle}: AW while a transaction is open")
                aw_seen = True
                open_wr = open_wr or Txn("write", s["awaddr"], start=cycle)
                open_wr.addr = s["awaddr"]
            if s["wvalid"] and s["wready"]:
                if open_rd or w_seen:
                    self.errors.append(f"cycle {cycle}: W while a transaction is open")
                w_seen = True
                open_wr = open_wr or Txn("write", 0, start=cycle)
                open_wr.data = s["wdata"]
                if s["wstrb"] != 0xF:
                    self.errors.append(f"cycle {cycle}: partial strobes {s['wstrb']:#x}")
            for valid, resp in (("rvalid", "rresp"), ("bvalid", "bresp")):
                if s[valid] and s[resp] == 1:
                    self.errors.append(f"cycle {cycle}: EXOKAY on {valid[0].upper()}")
            if s["rvalid"] and s["rready"]:
                if not open_rd:
                    self.errors.append(f"cycle {cycle}: R without a read")
                else:
                    done = open_rd.popleft()
                    done.data, done.resp = s["rdata"], s["rresp"]
                    self.txns.append(done)
            if s["bvalid"] and s["bready"]:
                if open_wr is None or not (aw_seen and w_seen):
                    self.errors.append(f"cycle {cycle}: B before AW and W")
                else:
                    open_wr.resp = s["bresp"]
                    self.txns.append(open_wr)
                open_wr, aw_seen, w_seen = None, False, False


def check_traffic(rows: list[Row], results: list[tuple[int, int, int]], txns: list[Txn]) -> None:
    """The monitor saw exactly the transactions the ops' results imply, in order: a read
    or write each, a read then a write for a masked write (only the read if it failed), and
    for a poll reads of its register until the one that matched, failed or was the last.
    A read that failed may be followed by reads of the next ops that were already on the
    bus (pipelined): those have no result, and no effect."""
    i = 0

    def take(kind: str, addr: int) -> Txn:
        nonlocal i
        assert i < len(txns), f"{kind} of {addr:#x} missing on the bus"
        t = txns[i]
        assert (t.kind, t.addr) == (kind, addr), f"expected a {kind} of {addr:#x}, bus saw {t}"
        i += 1
        return t

    for (kind, addr, value, mask, expected, _), (status, got, _) in zip(
        rows, results, strict=False
    ):
        if kind == R:
            t = take("read", addr)
            assert (t.resp, t.data if not t.resp else 0) == (axi(status), got), (t, status, got)
        elif kind == W:
            t = take("write", addr)
            assert (t.data, t.resp) == (value & M32, axi(status)), (t, status)
        elif kind == MW:
            t = take("read", addr)
            if t.resp:
                assert t.resp == axi(status), (t, status)
                continue
            w = take("write", addr)
            assert w.data == (t.data & ~mask | value & mask) & M32, (t, w)
            assert (w.resp, got) == (axi(status), w.data if status == OK else 0), (w, status)
        elif status == OK:  # a poll that matched: reads that did not, then the one that did
            t = take("read", addr)
            while t.data & mask != expected & mask:
                assert t.resp == 0, t
                t = take("read", addr)
            assert t.data == got, (t, got)
        else:  # a poll that gave up or failed ends the batch: the rest are its reads
            assert i < len(txns), f"poll of {addr:#x}: no read on the bus"
            while i < len(txns):
                t = take("read", addr)
            assert (t.resp, t.data if not t.resp else 0) == (axi(status), got), (t, status, got)
    if results and rows[len(results) - 1][0] == R and results[-1][0] != OK:
        extra = txns[i:]
        assert len(extra) < READS_IN_FLIGHT, f"{len(extra)} reads after a failed one"
        for t, row in zip(extra, rows[len(results) :], strict=False):
            assert (t.kind, t.addr, row[0]) == ("read", row[1], R), (t, row)
        i += len(extra)
    assert i == len(txns), f"{len(txns) - i} transactions more than the ops need: {txns[i:]}"


async def read_state(h: NpuHarness, pool: Pool) -> list[tuple[int, int]]:
    rows = [(R, a, 0, M32, 0, 0) for a in pool.state]
    return [(s, v) for s, v, _ in await h.run_rows(rows)]


@cocotb.test()
async def random_batches_match_cocotbext_axi(dut):
    """Each random batch, from reset, through the RTL master and through cocotbext-axi:
    the same statuses and values op by op and the same register state afterwards; the RTL
    master's traffic checked by the monitor and by the RTL checkers."""
    rng = random.Random(int(os.environ["NPU_TEST_SEED"]))
    pool = Pool()
    h = NpuHarness(dut, CLOCK_PERIOD_PS, master="regbus")
    ref = CocotbextMaster(dut, h.clock, CLOCK_PERIOD_PS)
    outcomes = {"ok": 0, "SLVERR": 0, "DECERR": 0, "POLL_TIMEOUT": 0, "poll matched": 0}
    directed = directed_batches(pool)
    for case in range(len(directed) + 24):
        if case < len(directed):
            rows = directed[case]
        else:
            rows = random_batch(rng, pool, rng.choice([1, 5, 20, 60]))
        runs = {}
        for name, master in (("rtl", h.master), ("cocotbext", ref)):
            await h.reset()
            # The RTL master's own link; cocotbext-axi is the reference here, not the
            # subject (its traffic is not checked).
            mon = LinkMonitor(dut, "rbm")
            task = cocotb.start_soon(mon.run())
            results = await master.run(rows)
            for _ in range(3):
                await RisingEdge(dut.clk_o)
            task.cancel()
            if name == "rtl":
                assert not mon.errors, f"case {case}: {mon.errors[:5]}"
                check_traffic(rows, results, mon.txns)
                assert h.axil_violations == (0, 0), "the RTL checkers counted a violation"
            else:
                assert not mon.txns, "the RTL master moved while cocotbext-axi ran"
            runs[name] = (results, await read_state(h, pool))
        (rtl, rtl_state), (cx, cx_state) = runs["rtl"], runs["cocotbext"]
        assert [(s, v) for s, v, _ in rtl] == [(s, v) for s, v, _ in cx], (
            f"case {case}: results differ\nops {rows}\nrtl {rtl}\ncocotbext {cx}"
        )
        assert rtl_state == cx_state, f"case {case}: register state differs"
        for (kind, *_, max_cycles), (status, _, cycles) in zip(rows, rtl, strict=False):
            if status == RegisterStatus.POLL_TIMEOUT:
                assert cycles >= max_cycles, (kind, max_cycles, cycles)
                outcomes["POLL_TIMEOUT"] += 1
            elif status != OK:
                outcomes[RegisterStatus(status).name] += 1
            else:
                outcomes["ok"] += 1
                outcomes["poll matched"] += kind == P
    dut._log.info("random batches: outcomes %s", outcomes)
    required = ("ok", "SLVERR", "DECERR", "POLL_TIMEOUT", "poll matched")
    assert all(outcomes[k] for k in required), f"a kind of outcome never happened: {outcomes}"


@cocotb.test()
async def master_traffic_and_cycles(dut):
    """The master's own link: every op makes exactly its transactions, reads and writes
    take a handful of cycles each, reads to one block follow each other about every cycle,
    and a poll backs off 8, 16, 32... cycles between reads."""
    rng = random.Random(int(os.environ["NPU_TEST_SEED"]) + 1)
    pool = Pool()
    h = NpuHarness(dut, CLOCK_PERIOD_PS, master="regbus")
    await h.reset()
    mon = LinkMonitor(dut, "rbm")
    task = cocotb.start_soon(mon.run())
    rows = random_batch(rng, pool, 200)
    results = await h.run_rows(rows)
    for _ in range(3):
        await RisingEdge(dut.clk_o)
    assert not mon.errors, mon.errors[:5]
    check_traffic(rows, results, mon.txns)
    for (kind, *_), (status, _, cycles) in zip(rows, results, strict=False):
        if kind in (R, W) and status == OK:
            assert 1 <= cycles <= 8, f"{kind} took {cycles} cycles"

    # Reads are pipelined: a run of reads to one block costs about a cycle each, a run that
    # alternates between the blocks (each waits for the other's data) 3, and a write
    # between reads waits for their data and goes alone.
    npu_reg, dma_reg = pool.scratch[0], pool.scratch[1]
    for addrs, most in (([npu_reg] * 64, 64 + 8), ([npu_reg, dma_reg] * 32, 3 * 64 + 8)):
        mon.txns.clear()
        rows = [(R, a, 0, M32, 0, 0) for a in addrs]
        start = h.cycles
        results = await h.run_rows(rows)
        assert [s for s, _, _ in results] == [OK] * 64
        assert h.cycles - start <= most, f"64 reads took {h.cycles - start} cycles"
        check_traffic(rows, results, mon.txns)
    assert h.cycles - start >= 3 * 64, "reads to alternating blocks overlapped"
    mon.txns.clear()
    rows = [(R, npu_reg, 0, M32, 0, 0)] * 3 + [(W, npu_reg, 9, M32, 0, 0)]
    rows += [(R, npu_reg, 0, M32, 0, 0)] * 2
    results = await h.run_rows(rows)
    assert [r[:2] for r in results[3:]] == [(OK, 0), (OK, 9), (OK, 9)], results
    check_traffic(rows, results, mon.txns)
    assert not mon.errors, mon.errors[:5]

    mon.txns.clear()
    scratch = pool.scratch[0]
    results = await h.run_rows([(W, scratch, 5, M32, 0, 0), (P, scratch, 0, M32, 6, 1000)])
    task.cancel()
    assert [r[:2] for r in results] == [(OK, 0), (RegisterStatus.POLL_TIMEOUT, 5)]
    assert 1000 <= results[1][2] <= 1000 + 16
    starts = [t.start for t in mon.txns if t.kind == "read"]
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    waits = [8, 16, 32, 64, 128, 256]  # then 512, clipped by the limit
    assert len(gaps) >= len(waits) and all(
        w < g <= w + 8 for g, w in zip(gaps, waits, strict=False)
    ), f"read spacing {gaps}"
    assert h.axil_violations == (0, 0)


@cocotb.test()
async def checker_counts_a_broken_handshake(dut):
    """The RTL checker is not blind: an address that changes while AW waits for ready
    (driven by hand on the toplevel port) fails its AxilAwStable assertion."""
    h = NpuHarness(dut, CLOCK_PERIOD_PS, master="regbus")
    dut.tb_strict_i.value = 1  # the port is driven by hand: its handshakes are checked
    await h.reset()
    assert h.axil_violations == (0, 0)
    pool = Pool()
    # AW alone is taken at once; the demux then holds awready low until W comes, so the
    # next address waits, and changes while it waits.
    dut.s_axil_awvalid.value = 1
    dut.s_axil_awaddr.value = pool.scratch[0]
    dut.s_axil_wvalid.value = 0
    dut.s_axil_bready.value = 0
    for addr in (pool.scratch[1], pool.scratch[2], pool.scratch[3]):
        await RisingEdge(dut.clk_o)
        dut.s_axil_awaddr.value = addr
    await RisingEdge(dut.clk_o)
    dut.s_axil_awvalid.value = 0
    await RisingEdge(dut.clk_o)
    assert h.axil_violations[1] > 0
    # The assertions of the link's checker, and of the register block's own port, name it.
    stable = [f for f in assertions.failures() if f.name == "AxilAwStable"]
    assert any(".u_check_axil." in f.scope for f in stable), assertions.failures()
    assert all("AW: payload changed while waiting for ready" in f.message for f in stable)
    await h.reset()  # the device (and its checkers) start clean
    assert h.axil_violations == (0, 0)
    dut.tb_strict_i.value = 0


async def hand_writes(dut, addr: int, values: list[int]) -> None:
    """Writes on the toplevel's AXI4-Lite port, one at a time, driven by hand: ready is
    sampled mid-cycle (signals settled), so the handshakes are exactly the RTL's. (Test
    code only: one Python wakeup per cycle.)"""
    dut.s_axil_bready.value = 1
    for value in values:
        dut.s_axil_awaddr.value = addr
        dut.s_axil_wdata.value = value
        dut.s_axil_wstrb.value = 0xF
        dut.s_axil_awvalid.value = 1
        dut.s_axil_wvalid.value = 1
        aw = w = False
        while not (aw and w):
            await FallingEdge(dut.clk_o)
            take_aw = not aw and bool(dut.s_axil_awready.value)
            take_w = not w and bool(dut.s_axil_wready.value)
            await RisingEdge(dut.clk_o)
            if take_aw:
                aw = True
                dut.s_axil_awvalid.value = 0
            if take_w:
                w = True
                dut.s_axil_wvalid.value = 0
        while True:
            await FallingEdge(dut.clk_o)
            got_b = bool(dut.s_axil_bvalid.value)
            await RisingEdge(dut.clk_o)
            if got_b:
                break
    dut.s_axil_bready.value = 0


@cocotb.test()
async def masked_write_is_atomic_beside_another_master(dut):
    """While another master writes SCRATCH over and over on the toplevel port, the RTL
    master's masked writes to it never let a foreign transaction in between their read and
    their write, and the two masters take turns."""
    pool = Pool()
    h = NpuHarness(dut, CLOCK_PERIOD_PS, master="regbus")
    await h.reset()
    scratch = pool.scratch[0]
    mon = LinkMonitor(dut, "axil")
    task = cocotb.start_soon(mon.run())
    # Foreign values have their low half zero; every masked write sets a low bit.
    foreign = [0xA000_0000 + (i << 16) for i in range(40)]
    other = cocotb.start_soon(hand_writes(dut, scratch, foreign))
    rows = [(MW, scratch, 1 << (i % 16), 1 << (i % 16), 0, 0) for i in range(40)]
    results = await h.run_rows(rows)
    await other
    for _ in range(3):
        await RisingEdge(dut.clk_o)
    task.cancel()
    assert all(s == OK for s, _, _ in results) and len(results) == len(rows), results
    assert not mon.errors, mon.errors[:5]
    seq = mon.txns
    ours = [i for i, t in enumerate(seq) if t.kind == "write" and t.data & 0xFFFF]
    assert len(ours) == len(rows)
    for at, (_, _, value, mask, _, _) in zip(ours, rows, strict=True):
        read = seq[at - 1]  # the transaction right before the write is its own read
        assert read.kind == "read" and seq[at].data == (read.data & ~mask | value & mask), (
            f"a foreign transaction inside a masked write: {seq[at - 1]}, {seq[at]}"
        )
    theirs = [i for i, t in enumerate(seq) if t.kind == "write" and not t.data & 0xFFFF]
    assert len(theirs) == len(foreign)
    assert any(ours[0] < i < ours[-1] for i in theirs), (
        "the two masters never took turns: the test proves nothing"
    )
    assert h.axil_violations == (0, 0)


@cocotb.test()
async def a_cancelled_batch_ends_and_the_next_one_runs(dut):
    """A batch whose caller goes away (the worker cancels its task) stops: its poll gives up
    at its next read, its later ops never run, and the next batch runs normally."""
    h = NpuHarness(dut, CLOCK_PERIOD_PS, master="regbus")
    await h.reset()
    scratch = Pool().scratch[0]
    rows = [(P, scratch, 0, M32, 1, 10**9), (W, scratch, 7, M32, 0, 0)]
    task = cocotb.start_soon(h.run_rows(rows))
    await Timer(5000 * CLOCK_PERIOD_PS, unit="ps")
    task.cancel()
    start = h.cycles
    results = await h.run_rows([(R, scratch, 0, M32, 0, 0)])
    assert [r[:2] for r in results] == [(OK, 0)], "the write after the cancelled poll ran"
    assert h.cycles - start < 2 * 1024 + 64, "the cancelled poll went on waiting"
    assert h.axil_violations == (0, 0)
