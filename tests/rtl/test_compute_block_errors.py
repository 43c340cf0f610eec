"""Block test of the compute engine (`npu_cmp_core`): the error reports the main block test
(`test_compute_block.py`) does not reach.

Same toplevel, configuration, model and engine driver as that module (imported from it):
`npu_cmp_core_flat` with the golden model's small configuration, token depth 8 and a
3000-cycle watchdog.

- TOKEN_OVERFLOW from the compute unit (its C2L and C2S queues) and from the store unit
  (S2C): the engine reports the golden model's (code, instruction index, unit).
- WATCHDOG with no unit waiting for a token: a memory that stops answering a read or a
  write. The engine names the engine unit (ERR_UNIT 3) and the instruction in decode; the
  report is latched at once but the run only ends (BUSY falls, one error event) when the
  bursts in flight complete. A memory that stalls for less than `watchdog_cycles` is no
  error. The golden model has no bus timing, so these are checked against docs/isa.md and
  docs/hardware.md ("no unit made progress for watchdog_cycles").

Each case is followed by a correct program (`quick_check`).
"""

from __future__ import annotations

import os
import random
from dataclasses import replace

import cocotb
import pytest
from cocotb.triggers import ClockCycles, Event, ReadOnly
from test_compute_block import (
    CONFIG,
    DATA,
    ERR_UNIT,
    GCFG,
    PROG,
    WINDOWS,
    Engine,
    expect_error,
    quick_check,
)

from npuemu.sim.build import build_model
from npuemu.sim.cocotb_run import run_cocotb
from xrt.hw import isa
from xrt.hw.isa import Buffer, EngineError, GemmInit, StoreMode, Unit
from xrt.npu.golden import Memory
from xrt.npu.golden import run as golden_run

B = GCFG.block


@pytest.mark.sim
def test_compute_block_errors(tmp_path):
    model = build_model("npu_cmp_core_flat", CONFIG, name="cmp-block")
    seed = int(os.environ.get("NPU_TEST_SEED", random.randrange(1 << 30)))
    print(f"NPU_TEST_SEED={seed}")
    run_cocotb(
        model,
        "test_compute_block_errors",
        test_dir=tmp_path,
        extra_env={"NPU_TEST_SEED": str(seed)},
        seed=seed,
    )


# ---------------------------------------------------------------------------- tokens
def _golden_error(prog: list, bases: dict[int, int]) -> tuple[EngineError, int, str]:
    """(code, instruction index, unit name) the golden model reports for `prog`."""
    want = golden_run(prog, Memory(WINDOWS), bases, config=GCFG)
    assert not want.ok, f"the golden model runs {prog} without error"
    unit = "ENGINE" if want.error_unit is None else want.error_unit.name
    return want.error, want.error_pc, unit


@cocotb.test()
async def token_overflow_in_every_unit_that_pushes(dut):
    """`token_depth` + 1 pushes with no pop into each queue the compute and store units
    push (C2L, C2S: COMPUTE; S2C: STORE), the last one by a SYNC or by an instruction that
    did work (GEMM, STORE): TOKEN_OVERFLOW at the last push, in its unit, as the golden
    model says. (The load unit's L2C: `test_compute_block.every_error_code`.)"""
    e = Engine(dut)
    await e.start()
    e.backpressure("random")
    depth = GCFG.token_depth
    bases = {0: DATA}
    gemm = isa.Gemm(init=GemmInit.ZERO, acc=0, n0=4, n1=1, n2=1, acc_s0=1, inp_s0=1)
    store = isa.Store(
        mode=StoreMode.INT32, base=0, x_size=2, y_size=1, z_size=1, x_stride=4 * B,
        sram_x_stride=1,
    )  # fmt: skip
    sync = {
        "C2L": isa.Sync(unit=Unit.COMPUTE, push_prev=True),
        "C2S": isa.Sync(unit=Unit.COMPUTE, push_next=True),
        "S2C": isa.Sync(unit=Unit.STORE, push_prev=True),
    }
    last = {
        "C2L": replace(gemm, push_prev=True),
        "C2S": replace(gemm, push_next=True),
        "S2C": replace(store, push_prev=True),
    }
    for queue, unit in (("C2L", "COMPUTE"), ("C2S", "COMPUTE"), ("S2C", "STORE")):
        for how, final in (("SYNC", sync[queue]), (type(last[queue]).__name__, last[queue])):
            prog = [sync[queue]] * depth + [final, isa.Finish()]
            label = f"{queue} overflow by {how}"
            code, pc, golden_unit = _golden_error(prog, bases)
            assert (code, pc, golden_unit) == (EngineError.TOKEN_OVERFLOW, depth, unit), (
                f"{label}: the golden model says {code.name} at {pc} in {golden_unit}"
            )
            await expect_error(e, prog, bases, code, golden_unit, pc, label)
            # One push fewer fills the queue and is no error (the tokens left are legal).
            prog = [sync[queue]] * (depth - 1) + [final, isa.Finish()]
            assert golden_run(prog, Memory(WINDOWS), bases, config=GCFG).ok
            res = await e.run(prog, bases)
            assert res.ok, f"seed={e.seed} {label}: {depth} pushes end in error {res}"


# ---------------------------------------------------------------------------- watchdog
class StallingRam:
    """Stands in for the block test's RAM as the AXI slave's target: a read or write that
    touches `stall` waits until `release` is set, so the slave sends no R beat or B
    response for it (nor for anything queued behind it) meanwhile: a memory that stops
    answering. `stalled` is set when the first such access arrives."""

    def __init__(self, ram) -> None:
        self.ram = ram
        self.stall = range(0)
        self.stalled = Event()
        self.release = Event()

    def arm(self, stall: range) -> None:
        self.stall = stall
        self.stalled = Event()
        self.release = Event()

    async def _hold(self, address: int, length: int) -> None:
        hit = address < self.stall.stop and self.stall.start < address + length
        if hit and not self.release.is_set():
            self.stalled.set()
            await self.release.wait()

    async def read(self, address: int, length: int) -> bytes:
        await self._hold(address, length)
        return await self.ram.read(address, length)

    async def write(self, address: int, data: bytes) -> None:
        await self._hold(address, len(data))
        await self.ram.write(address, data)


def _copy_program() -> list:
    """Three ACC rows from BASE0 to BASE1 (the `quick_check` program): LOAD, SYNC, STORE."""
    return [
        isa.Load(
            buffer=Buffer.ACC, base=0, x_size=3, y_size=1, z_size=1, x_stride=4 * B, push_next=True
        ),
        isa.Sync(unit=Unit.COMPUTE, pop_prev=True, push_next=True),
        isa.Store(
            mode=StoreMode.INT32, base=1, x_size=3, y_size=1, z_size=1, x_stride=4 * B,
            sram_x_stride=1, pop_prev=True,
        ),
        isa.Finish(),
    ]  # fmt: skip


@cocotb.test()
async def watchdog_names_the_engine_when_the_memory_stops_answering(dut):
    """A LOAD whose read data, or a STORE whose write response, does not come for longer
    than `watchdog_cycles`: no unit waits for a token, so WATCHDOG names the engine (unit
    3) and the instruction in decode (the FINISH after it). The error shows in the status
    ports at once while BUSY stays 1 and no event fires; when the memory answers, the run
    ends with that error and one error event, and the next program is right. The same
    stalls held a little under `watchdog_cycles` are no error: the program completes.
    A stalled first instruction fetch ends the same way, with ERR_PC 0: no instruction
    of the run was taken (not the previous run's last index)."""
    e = Engine(dut)
    await e.start()
    e.backpressure("none")
    stalling = StallingRam(e.ram)
    e.slave.read_if.target = stalling
    e.slave.write_if.target = stalling
    src, dst = DATA + 0x1000, DATA + 0x2000
    nbytes = 3 * 4 * B
    e.put(src, e.np_rng.integers(-(1 << 31), 1 << 31, size=(3, B)).astype("int32"))
    wd = GCFG.watchdog_cycles
    load_only = [
        isa.Load(buffer=Buffer.ACC, base=0, x_size=3, y_size=1, z_size=1, x_stride=4 * B),
        isa.Finish(),
    ]
    # (what stalls, program, the bytes whose access stalls, ERR_PC: the instruction the
    # decode holds, 0 before the first)
    cases = (
        ("a LOAD's read data", load_only, range(src, src + nbytes), 1),
        ("a STORE's write response", _copy_program(), range(dst, dst + nbytes), 3),
        ("the first instruction fetch", load_only, range(PROG, PROG + 32), 0),
    )
    for what, prog, stall, finish_pc in cases:
        for held, fires in ((wd - 300, False), (wd + 300, True)):
            label = f"{what} held {held} cycles"
            e.ram.data[dst : dst + nbytes] = bytes(nbytes)
            stalling.arm(stall)
            run = cocotb.start_soon(e.run(prog, {0: src, 1: dst}))
            await stalling.stalled.wait()
            await ClockCycles(dut.clk_i, held)
            await ReadOnly()
            assert dut.busy_o.value, f"{label}: the run ended while the memory stalled"
            assert not (dut.done_o.value or dut.error_o.value), f"{label}: DONE or ERROR set"
            if fires:
                got = (int(dut.err_code_o.value), int(dut.err_unit_o.value))
                assert got == (EngineError.WATCHDOG, ERR_UNIT["ENGINE"]), (
                    f"seed={e.seed} {label}: status (code, unit) {got} while the memory stalls"
                )
            await ClockCycles(dut.clk_i, 1)
            stalling.release.set()
            res = await run
            if fires:
                want = (EngineError.WATCHDOG, ERR_UNIT["ENGINE"], finish_pc)
                got = (res.code, res.unit, res.pc)
                assert got == want, f"seed={e.seed} {label}: (code, unit, pc) {got}, want {want}"
                await quick_check(e, label)
            else:
                assert res.ok, f"seed={e.seed} {label}: {res}"
                if prog is not load_only:
                    assert e.ram.data[dst : dst + nbytes] == e.ram.data[src : src + nbytes]
