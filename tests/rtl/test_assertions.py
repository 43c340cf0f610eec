"""The RTL's assertions fire: one test per family breaks its invariant on purpose and sees
the named assertion report it (rtl/include/npu_assert.svh; npuemu.sim.assertions reads the
reports inside the simulator).

- AXI4 (rtl/bus/npu_axi_sva.sv): a bad slave on the DMA's master port answers a read and
  a write that were never asked for;
- AXI4-Lite (rtl/bus/npu_axil_checker.sv): a master on the DMA's register port changes a
  waiting address (the same on npu_sim's links: test_regbus.py);
- FIFOs (rtl/common/npu_fifo.sv): a push into a full FIFO whose producer ignores ready,
  a pop of an empty one, a count past the depth;
- the engine's token queues and sequencer (npu_cmp_tokens, npu_cmp_ctl): a pop of an empty
  queue, a sequencer state no transition reaches;
- the DMA's byte counters and CSR fields (npu_dma_core, npu_dma): more bytes written than
  read, a write-1-to-clear field set without its event, a single-pulse field held.

Internal state is broken by depositing into a register, or forcing a wire, that the model
opens to cocotb for these tests only (sva_public.vlt). The models run with
+verilator+error+limit so that Verilator reports every failure and goes on, where a test of
the suite stops at the first.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import cocotb
import pytest
from cocotb.clock import Clock
from cocotb.handle import Force, Release
from cocotb.triggers import FallingEdge, RisingEdge

from npuemu.sim import assertions
from npuemu.sim.build import build_model
from npuemu.sim.cocotb_run import run_cocotb

KEEP_GOING = ("+verilator+error+limit+1000000",)
PERIOD_PS = 10_000

# Internal state these tests deposit into or force (a Verilator config file in the build).
SVA_PUBLIC = Path(__file__).with_name("sva_public.vlt")
DMA_W16 = {
    "BusBytes": 16,
    "MaxBurstBeats": 256,
    "MaxOutstanding": 8,
    "FifoDepth": 1024,
    "Mem0Base": "64'h0",
    "Mem0Size": "64'h40000",
    "Mem1Base": "64'h40000",
    "Mem1Size": "64'h40000",
}


def _run(model, tmp_path, testcase: str) -> None:
    run_cocotb(model, "test_assertions", test_dir=tmp_path, testcase=testcase, plusargs=KEEP_GOING)


@pytest.fixture(scope="module")
def dma_model():
    tag = hashlib.sha256(SVA_PUBLIC.read_bytes()).hexdigest()[:8]  # its content, in the key
    return build_model(
        "npu_dma_flat", DMA_W16, extra_args=(str(SVA_PUBLIC),), name=f"sva-dma-{tag}"
    )


@pytest.mark.sim
@pytest.mark.parametrize(
    "testcase", ["axi_bad_slave", "axil_unstable_address", "dma_counters", "dma_csr_fields"]
)
def test_dma_assertions(dma_model, testcase, tmp_path):
    _run(dma_model, tmp_path, testcase)


@pytest.mark.sim
def test_fifo_assertions(tmp_path):
    model = build_model(
        "npu_fifo", {"Width": 8, "Depth": 4, "MustAccept": 1, "MustHold": 1}, name="sva-fifo"
    )
    _run(model, tmp_path, "fifo_overflow_underflow")


@pytest.mark.sim
def test_token_assertions(tmp_path):
    model = build_model("npu_cmp_tokens", {"Depth": 2}, name="sva-tokens")
    _run(model, tmp_path, "token_pop_empty")


@pytest.mark.sim
def test_sequencer_assertions(tmp_path):
    model = build_model("npu_cmp_ctl", {}, name="sva-ctl")
    _run(model, tmp_path, "sequencer_bad_state")


# ---------------------------------------------------------------------------- cocotb side
async def _start(dut) -> None:
    """Clock, reset, and a clean record."""
    cocotb.start_soon(Clock(dut.clk_i, PERIOD_PS, unit="ps").start())
    dut.rst_ni.value = 0
    for _ in range(3):
        await RisingEdge(dut.clk_i)
    dut.rst_ni.value = 1
    await RisingEdge(dut.clk_i)
    await FallingEdge(dut.clk_i)
    assert assertions.available(), "the model records no assertion failures"
    assert assertions.count() == 0, [f.describe(PERIOD_PS) for f in assertions.failures()]


def _done() -> None:
    """Forget the failures this test caused (and Verilator's error count with them, which
    would make the simulator exit with a failure)."""
    assertions.clear()
    assert assertions.count() == 0


def _fired() -> dict[str, assertions.AssertionFailure]:
    """The first failure of each assertion name."""
    out: dict[str, assertions.AssertionFailure] = {}
    for f in assertions.failures():
        out.setdefault(f.name, f)
    return out


async def _cycles(dut, n: int) -> None:
    for _ in range(n):
        await RisingEdge(dut.clk_i)
    await FallingEdge(dut.clk_i)


def _idle_dma_inputs(dut) -> None:
    for name in ("arready", "rvalid", "awready", "wready", "bvalid"):
        getattr(dut, f"m_axi_{name}").value = 0
    for name in ("awvalid", "wvalid", "arvalid"):
        getattr(dut, f"s_axil_{name}").value = 0
    dut.s_axil_bready.value = 1
    dut.s_axil_rready.value = 1


@cocotb.test()
async def axi_bad_slave(dut):
    """A slave that answers what was never asked: R data and a write response with no
    burst outstanding on the DMA's master port."""
    _idle_dma_inputs(dut)
    await _start(dut)
    dut.m_axi_rvalid.value = 1
    dut.m_axi_rlast.value = 1
    await _cycles(dut, 1)
    dut.m_axi_rvalid.value = 0
    dut.m_axi_bvalid.value = 1
    await _cycles(dut, 1)
    dut.m_axi_bvalid.value = 0
    await _cycles(dut, 2)
    fired = _fired()
    assert "AxiRWithoutRequest" in fired and "AxiBWithoutRequest" in fired, fired
    r = fired["AxiRWithoutRequest"]
    assert "dma master R" in r.message and ".u_sva_axi." in r.scope, r
    assert r.cycle(PERIOD_PS) > 0
    _done()


@cocotb.test()
async def axil_unstable_address(dut):
    """A master that changes the address of a write while it waits for AWREADY (the
    register block takes an address only with its data, so without W it waits)."""
    _idle_dma_inputs(dut)
    await _start(dut)
    dut.s_axil_awvalid.value = 1
    dut.s_axil_awaddr.value = 0x10
    dut.s_axil_awprot.value = 0
    for _ in range(8):  # until the address waits (not taken at once)
        await RisingEdge(dut.clk_i)
        await FallingEdge(dut.clk_i)
        if not dut.s_axil_awready.value:
            break
    assert not dut.s_axil_awready.value, "the register port takes addresses without data"
    await _cycles(dut, 1)  # an edge that sees the address waiting
    assert not dut.s_axil_awready.value
    dut.s_axil_awaddr.value = 0x20
    await _cycles(dut, 2)
    dut.s_axil_awvalid.value = 0
    await _cycles(dut, 1)
    fired = _fired()
    # The address changed, then valid dropped with the address still not taken.
    assert list(fired) == ["AxilAwStable", "AxilAwHeld"], fired
    assert "dma register port AW" in fired["AxilAwStable"].message
    _done()


@cocotb.test()
async def dma_counters(dut):
    """The transfer's written-bytes count jumps past what it read."""
    _idle_dma_inputs(dut)
    await _start(dut)
    dut.u_dma.u_core.xfer_written_q.value = 64
    await _cycles(dut, 2)
    fired = _fired()
    assert "DmaWrittenLeRead" in fired, fired
    assert "wrote 64 bytes" in fired["DmaWrittenLeRead"].message
    _done()


@cocotb.test()
async def dma_csr_fields(dut):
    """CSR fields that misbehave: INT_STATUS.ERROR (write 1 to clear) set with no error
    event, CTRL.START (a single pulse) high for two cycles."""
    _idle_dma_inputs(dut)
    await _start(dut)
    error = dut.u_dma.csr_int_error
    error.value = Force(1)
    await _cycles(dut, 2)
    error.value = Release()
    await _cycles(dut, 1)
    assert list(_fired()) == ["DmaCsrErrorW1c"], _fired()
    assert "INT_STATUS.ERROR (w1c) rose" in _fired()["DmaCsrErrorW1c"].message
    assertions.clear()
    start = dut.u_dma.csr_start
    start.value = Force(1)
    await _cycles(dut, 2)
    start.value = Release()
    await _cycles(dut, 1)
    assert "DmaCsrStartPulse" in _fired(), _fired()
    _done()


@cocotb.test()
async def fifo_overflow_underflow(dut):
    """A producer that ignores ready pushes into the full FIFO; a consumer that ignores
    valid pops the empty one; the count is set past the depth."""
    dut.clear_i.value = 0
    dut.in_valid_i.value = 0
    dut.in_data_i.value = 0
    dut.out_ready_i.value = 0
    await _start(dut)
    dut.out_ready_i.value = 1  # nothing stored
    await _cycles(dut, 1)
    dut.out_ready_i.value = 0
    await _cycles(dut, 1)
    assert set(_fired()) == {"FifoUnderflow"}, _fired()
    dut.in_valid_i.value = 1
    await _cycles(dut, 5)  # 4 entries fit
    dut.in_valid_i.value = 0
    await _cycles(dut, 1)
    assert set(_fired()) == {"FifoUnderflow", "FifoOverflow"}, _fired()
    assert "an entry is lost" in _fired()["FifoOverflow"].message
    dut.count_q.value = 7
    await _cycles(dut, 2)
    assert "FifoCountRange" in _fired()
    _done()


@cocotb.test()
async def token_pop_empty(dut):
    """A unit takes a token from an empty queue (and a full queue's push is an error the
    engine reports, not an assertion)."""
    dut.clear_i.value = 0
    dut.push_i.value = 0
    dut.pop_i.value = 0
    await _start(dut)
    dut.push_i.value = 0b0001
    await _cycles(dut, 3)  # the third push overflows queue 0 (Depth 2): no assertion
    dut.push_i.value = 0
    assert assertions.count() == 0, _fired()
    dut.pop_i.value = 0b0100
    await _cycles(dut, 1)
    dut.pop_i.value = 0
    await _cycles(dut, 1)
    fired = _fired()
    # First the pop, then its consequence: the count wrapped below zero.
    assert list(fired) == ["TokPopEmpty", "TokCountRange"], fired
    assert "token queue 2 popped while empty" in fired["TokPopEmpty"].message
    _done()


@cocotb.test()
async def sequencer_bad_state(dut):
    """The sequencer's state register holds the one encoding no transition reaches."""
    for name in ("clear_i", "stop_i", "q_valid_i", "q_data_i", "avail_prev_i",
                 "avail_next_i", "done_i"):  # fmt: skip
        getattr(dut, name).value = 0
    await _start(dut)
    dut.state_q.value = 3
    await _cycles(dut, 1)
    fired = _fired()
    assert "CtlStateLegal" in fired, fired
    assert "unused state 3" in fired["CtlStateLegal"].message
    _done()
