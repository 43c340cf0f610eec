"""The cocotb harness around the simulated NPU (`npu_sim`).

It runs inside the simulator process. It resets the device, reads and writes registers,
runs batches of register operations, waits for the interrupt under a simulated-cycle limit
and a wall-clock limit, and reports the cycle count. Register batches go to the register
bus master inside the simulation (`npu_regbus_master`, fed from a DPI-C queue: one call
and one trigger per batch, no Python per bus transaction; see `npuemu.sim.regbus`);
cocotbext-axi's `AxiLiteMaster` is the reference master (and the only one of tops
without the RTL master). Data never passes through the harness: the DMA engine moves
bytes between the DPI-C memories at one beat per cycle with no Python involved.

Simulated time only advances while one of these coroutines awaits a trigger. A request
loop (the emulator's worker) calls them per request and, between requests, blocks on its
IPC channel outside any trigger: the simulation then stands still and costs no CPU.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import cocotb
from cocotb.clock import Clock
from cocotb.handle import SimHandleBase
from cocotb.triggers import FallingEdge, First, RisingEdge, Timer
from cocotb.utils import get_sim_time
from cocotbext.axi import AxiResp

from npuemu.sim import assertions
from npuemu.sim.regbus import CocotbextMaster, RegbusMaster
from xrt.hw.regops import (
    RegKind,
    RegOp,
    RegRead,
    RegResult,
    RegRow,
    RegWrite,
    to_row,
)
from xrt.hw.wire import RegisterStatus, WaitOutcome

__all__ = ["BusError", "IrqWait", "NpuHarness", "PollTimeoutError"]

# Longest stretch of simulated time awaited in one trigger while waiting for the
# interrupt: between stretches the wall-clock limit is checked.
WAIT_CHUNK_CYCLES = 1 << 16


class BusError(Exception):
    """A register access got SLVERR or DECERR."""

    def __init__(self, op: str, addr: int, status: RegisterStatus) -> None:
        self.op, self.addr, self.status = op, addr, status
        super().__init__(f"register {op} at {addr:#010x} failed: {status.name}")


class PollTimeoutError(Exception):
    """A poll-until condition did not hold within its cycle limit."""

    def __init__(self, addr: int, mask: int, expected: int, last: int, cycles: int) -> None:
        self.addr, self.mask, self.expected, self.last, self.cycles = (
            addr,
            mask,
            expected,
            last,
            cycles,
        )
        super().__init__(
            f"register {addr:#010x} & {mask:#x} != {expected:#x} after {cycles} cycles "
            f"(last value {last:#010x})"
        )


@dataclass(frozen=True)
class IrqWait:
    """Result of `NpuHarness.wait_irq`."""

    outcome: WaitOutcome
    cycles: int  # simulated cycles spent waiting

    @property
    def fired(self) -> bool:
        return self.outcome is WaitOutcome.INTERRUPT


class NpuHarness:
    """Drives one `npu_sim` instance (or a block with the same reset, `s_axil_*` and
    `irq_o` ports, such as `npu_dma_flat` in the DMA block test).

    A toplevel with a `clk_o` port (`npu_sim`, whose clock the simulator's main loop
    drives: rtl/sim/npu_sim_main.cpp) has its clock running already; for any other, the
    harness starts a cocotb `Clock` on `clk_i` at reset.

    Args:
        dut: The cocotb handle of the toplevel.
        clock_period_ps: Simulated clock period (rtl/config/npu.toml ``clock.period_ps``).
        master: "regbus" (the RTL master inside `npu_sim`), "cocotbext" (cocotbext-axi on
            the ``s_axil_*`` port, the reference) or "auto" (regbus when the top has it).
    """

    def __init__(
        self, dut: SimHandleBase, clock_period_ps: int = 10_000, *, master: str = "auto"
    ) -> None:
        self.dut = dut
        self.period_ps = clock_period_ps
        self.internal_clock = hasattr(dut, "clk_o")
        self.clock = dut.clk_o if self.internal_clock else dut.clk_i
        self._clock_started = self.internal_clock
        has_regbus = hasattr(dut, "rbm_kick_i")
        if master == "auto":
            master = "regbus" if has_regbus else "cocotbext"
        if master == "regbus" and not has_regbus:
            raise ValueError(f"toplevel {dut._name} has no register bus master (rbm_kick_i)")
        if master not in ("regbus", "cocotbext"):
            raise ValueError(f"master must be regbus, cocotbext or auto, not {master!r}")
        self.master_name = master
        self.master: RegbusMaster | CocotbextMaster
        if master == "regbus":
            self.master = RegbusMaster(dut, clock_period_ps)
            for name in ("awvalid", "wvalid", "arvalid", "bready", "rready"):
                getattr(dut, f"s_axil_{name}").value = 0  # the other port stays quiet
        else:
            self.master = CocotbextMaster(dut, self.clock, clock_period_ps)
        self.has_fault_injection = hasattr(dut, "fault_mem_i")
        if self.has_fault_injection:
            self.clear_fault()

    # ------------------------------------------------------------------ time
    @property
    def cycles(self) -> int:
        """Simulated clock cycles since the simulation started."""
        return int(get_sim_time("ps")) // self.period_ps

    async def run_cycles(self, n: int) -> None:
        """Let `n` clock cycles pass (one trigger, no Python per cycle)."""
        if n > 0:
            await Timer(n * self.period_ps, unit="ps")

    # ------------------------------------------------------------------ reset
    async def reset(self, cycles: int = 8) -> None:
        """Start the clock if needed and pulse reset for `cycles` cycles.

        Registers return to their reset values; the memories keep their contents, as DDR
        does across a device reset. Returns once the device takes requests: a compute
        engine has zeroed its buffers (CORE_STATUS.WIPING, the largest buffer's rows in
        cycles), so no program's data outlives the reset.
        """
        if not self._clock_started:
            cocotb.start_soon(Clock(self.dut.clk_i, self.period_ps, unit="ps").start())
            self._clock_started = True
        self.dut.rst_ni.value = 0
        self.master.reset()
        await self.run_cycles(cycles)
        self.dut.rst_ni.value = 1
        assertions.clear()  # the device starts clean
        await RisingEdge(self.clock)
        await RisingEdge(self.clock)
        busy = getattr(self.dut, "busy_o", None)  # npu_sim; the DMA block has none
        while busy is not None and busy.value:
            await FallingEdge(busy)

    # ------------------------------------------------------------------ registers
    async def run_rows(self, rows: Sequence[RegRow | tuple]) -> list[tuple[int, int, int]]:
        """Run rows (`xrt.hw.regops.RegRow`, or plain tuples in its field order) and stop
        after the first that fails; one ``(status, value, cycles)`` per op run, the status
        an `xrt.hw.wire.RegisterStatus` value. The raw form the worker uses (semantics in
        `npuemu.sim.regbus`)."""
        return await self.master.run(rows)

    async def execute(self, ops: Sequence[RegOp | RegRow]) -> list[RegResult]:
        """Run `ops` (records of `xrt.hw.regops`, or rows for polls counted in cycles) in
        order and stop after the first that fails (bus error, poll timeout); one result per
        op run, with its status, value and cycles."""
        rows = [op if isinstance(op, RegRow) else to_row(op) for op in ops]
        raw = await self.master.run(rows)
        return [RegResult(RegisterStatus(s), v, c) for s, v, c in raw]

    async def read_reg(self, addr: int) -> int:
        """Read the 32-bit register at physical address `addr`."""
        return (await self.run_batch([RegRead(addr)]))[0]  # type: ignore[return-value]

    async def write_reg(self, addr: int, value: int) -> None:
        """Write the 32-bit register at physical address `addr`."""
        await self.run_batch([RegWrite(addr, value)])

    async def poll(self, addr: int, mask: int, expected: int, max_cycles: int) -> int:
        """Read `addr` until ``value & mask == expected``; return the matching value.

        Raises:
            PollTimeoutError: the condition did not hold within `max_cycles` cycles.
        """
        row = RegRow(RegKind.POLL, addr, 0, mask, expected, max_cycles)
        return (await self.run_batch([row]))[0]  # type: ignore[return-value]

    async def run_batch(self, ops: Sequence[RegOp | RegRow]) -> list[int | None]:
        """Run register operations in order; return one result per op.

        Reads and polls give the value read, writes give None, masked writes give the
        value written. The first failure (bus error, poll timeout) raises and stops the
        batch; the exception carries `index`, the position of the failing op.
        """
        rows = [op if isinstance(op, RegRow) else to_row(op) for op in ops]
        results = await self.execute(rows)
        if results and not results[-1].ok:
            index = len(results) - 1
            row, r = rows[index], results[-1]
            exc: BusError | PollTimeoutError
            if r.status == RegisterStatus.POLL_TIMEOUT:
                exc = PollTimeoutError(row.addr, row.mask, row.expected, r.value, r.cycles)
            else:
                failed = {RegKind.WRITE: "write", RegKind.MASKED_WRITE: "masked write"}.get(
                    row.kind, "read"
                )
                exc = BusError(failed, row.addr, r.status)
            exc.index = index  # type: ignore[attr-defined]
            raise exc
        return [
            None if row.kind == RegKind.WRITE else r.value
            for row, r in zip(rows, results, strict=True)
        ]

    @property
    def axil_violations(self) -> tuple[int, int]:
        """AXI4-Lite assertions failed since reset in `npu_sim`'s link checkers
        (npu_axil_checker): (on the register bus master's own link, on the NPU's register
        port); (0, 0) for tops without them."""
        fired = assertions.failures()
        return (
            sum(".u_check_regbus." in f.scope for f in fired),
            sum(".u_check_axil." in f.scope for f in fired),
        )

    # ------------------------------------------------------------------ interrupt
    @property
    def irq(self) -> bool:
        """Level of the NPU's interrupt line now."""
        return bool(self.dut.irq_o.value)

    async def wait_irq(self, max_cycles: int, timeout_s: float | None = None) -> IrqWait:
        """Run the clock until the interrupt line is high, within both limits.

        Args:
            max_cycles: Simulated cycles to wait at most.
            timeout_s: Wall-clock seconds to wait at most (None: no wall limit).
        """
        start = self.cycles
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            if self.irq:
                return IrqWait(WaitOutcome.INTERRUPT, self.cycles - start)
            spent = self.cycles - start
            if spent >= max_cycles:
                return IrqWait(WaitOutcome.CYCLE_LIMIT, spent)
            if deadline is not None and time.monotonic() >= deadline:
                return IrqWait(WaitOutcome.DEADLINE, spent)
            chunk = min(WAIT_CHUNK_CYCLES, max_cycles - spent)
            await First(RisingEdge(self.dut.irq_o), Timer(chunk * self.period_ps, unit="ps"))

    # ------------------------------------------------------------------ fault injection
    def set_fault(self, memory: str, offset: int, size: int, resp: AxiResp) -> None:
        """Make `memory` ("udma" or "plddr") answer `resp` for beats in [offset, offset+size)."""
        index = {"udma": 1, "plddr": 2}.get(memory)
        if index is None:
            raise ValueError(f"no fault injection in memory {memory!r} (udma, plddr)")
        if resp not in (AxiResp.SLVERR, AxiResp.DECERR):
            raise ValueError(f"fault response must be SLVERR or DECERR, not {resp!r}")
        self.dut.fault_mem_i.value = index
        self.dut.fault_base_i.value = offset
        self.dut.fault_size_i.value = size
        self.dut.fault_resp_i.value = int(resp)

    def clear_fault(self) -> None:
        """Remove any fault window."""
        self.dut.fault_mem_i.value = 0
        self.dut.fault_base_i.value = 0
        self.dut.fault_size_i.value = 0
        self.dut.fault_resp_i.value = 0
