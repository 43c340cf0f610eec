"""The compute engine's driver: the launch sequence of `xrt.hw.engine` run over the device's
``npu`` register region (the same code runs against the emulator and a real board).

A launch is one batch (`launch_ops`), a wait for the interrupt, and one batch
(`readout_ops`) whose values say how the program ended. An error status is XrtError 11014
naming the program, the instruction index (error PC), the unit and the error; an interrupt
that never comes is 11015 after the engine was aborted, so the device stays usable.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from xrt.errors import ErrorCode, XrtError
from xrt.hw.engine import (
    EngineOutcome,
    abort_ops,
    decode_readout,
    decode_status,
    is_busy,
    launch_ops,
    readout_ops,
    status_ops,
)
from xrt.hw.targets import CLOCK_PERIOD_PS, NPU
from xrt.npu_device.npu import NpuDevice

__all__ = ["EngineDriver", "LaunchStats"]


@dataclass
class LaunchStats:
    """What one launch did, from the engine's counters (deltas over the launch).

    Attributes:
        counters: Counter name (without ``PERF_``) -> its value after the launch.
        cycles: Simulated cycles the device reported over the launch (None on a board).
        spurious_irqs: Interrupts that came while the engine was neither done nor failed
            (waited through: the driver checks the status, not only the interrupt).
    """

    counters: dict[str, int] = field(default_factory=dict)
    cycles: int | None = None
    spurious_irqs: int = 0

    @property
    def busy_cycles(self) -> int:
        """Cycles from START to the end of the program (the engine's RUN_CYCLES counter)."""
        return self.counters.get("RUN_CYCLES", 0)

    @property
    def gemm_cycles(self) -> int:
        """Cycles the MAC array worked (GEMM_CYCLES)."""
        return self.counters.get("GEMM_CYCLES", 0)

    @property
    def mac_utilisation(self) -> float:
        """GEMM cycles / run cycles: the share of the run the B x B array was busy."""
        return self.gemm_cycles / self.busy_cycles if self.busy_cycles else 0.0

    @property
    def seconds(self) -> float:
        """Hardware time: the run cycles at the configured clock."""
        return self.busy_cycles * CLOCK_PERIOD_PS * 1e-12


class EngineDriver:
    """Launches programs on one device's compute engine (one launch at a time).

    Args:
        device: The NPU device (``grpc://`` emulator or ``axi://`` board).
    """

    def __init__(self, device: NpuDevice) -> None:
        self.device = device
        self._npu = device.get_reg_region("npu")
        self.launches = 0

    def launch(
        self,
        prog_addr: int,
        n_insns: int,
        bases: Mapping[int, int],
        *,
        what: str = "program",
        timeout_s: float = 600.0,
        max_cycles: int | None = None,
    ) -> LaunchStats:
        """Run the program at `prog_addr` with the given base registers; wait for its end.

        Args:
            prog_addr: Physical address of the first instruction (32-byte aligned).
            n_insns: Instructions in the program (``PROG_INSNS``).
            bases: Base register index -> physical address.
            what: How errors name the program (the HardOp).
            timeout_s: Wall seconds to wait for the interrupt.
            max_cycles: Simulated cycles to wait at most (emulator).

        Raises:
            XrtError: 11014 when the engine reports an error (naming `what`, the error PC,
                the unit and the error); 11015 when no interrupt comes (the engine is
                aborted first, so the device stays usable).
        """
        regmap = self._npu.regmap
        if regmap is not None and "CORE_CTRL" not in regmap:
            raise XrtError(
                ErrorCode.DEVICE_INTERNAL, "this NPU's register map has no compute engine"
            )
        self._npu.execute(launch_ops(self._npu.base, prog_addr, n_insns, bases))
        cycles0 = self.device.cycles
        self.launches += 1
        out, spurious = self._wait(what, timeout_s, max_cycles, simulated=cycles0 is not None)
        if out.err_code:
            raise XrtError(ErrorCode.DEVICE_INTERNAL, f"{what}: {out.describe()}")
        # START clears the counters: after the program they count this launch alone.
        cycles1 = self.device.cycles
        return LaunchStats(
            out.counters,
            None if cycles0 is None or cycles1 is None else cycles1 - cycles0,
            spurious_irqs=spurious,
        )

    def _wait(
        self, what: str, timeout_s: float, max_cycles: int | None, *, simulated: bool
    ) -> tuple[EngineOutcome, int]:
        """Wait for the engine's end: its outcome, and the interrupts that came with the
        engine neither done nor failed (spurious: waited through, as a driver must).

        On a simulated device the wait goes in slices of the engine's watchdog period: a
        running engine either progresses or fails within one (its watchdog), so an engine
        that stopped while no interrupt came, or that failed but cannot stop (a memory
        access that never completes keeps it busy), is found within two slices, in
        simulated time: 11015, not a wall-clock wait."""
        deadline = time.monotonic() + timeout_s
        left_cycles = max_cycles
        spurious = 0
        while True:
            budget = NPU.watchdog_cycles if simulated else None
            if left_cycles is not None:
                budget = min(budget or left_cycles, left_cycles)
            wall = max(0.0, deadline - time.monotonic())
            if self.device.wait_irq(wall, budget):
                out = decode_readout(self._npu.execute(readout_ops(self._npu.base)))
                if out.err_code or out.done:
                    return out, spurious
                spurious += 1
                continue
            if left_cycles is not None and budget is not None:
                left_cycles -= budget
            out_of_time = time.monotonic() >= deadline or left_cycles == 0
            if not out_of_time:
                now = decode_status(self._npu.execute(status_ops(self._npu.base)))
                if is_busy(now.status) and not now.err_code:
                    continue  # still running: its watchdog bounds it
                if is_busy(now.status):  # failed, and cannot stop: a burst never completed
                    why = f"{now.describe()}; the engine cannot stop: a memory access it made "
                    why += "never completed"
                else:
                    why = f"the engine stopped (CORE_STATUS {now.status:#x}) but no interrupt came"
            else:
                why = f"the NPU did not finish within {timeout_s:g} s" + (
                    f" / {max_cycles} cycles" if max_cycles else ""
                )
            self._npu.execute(abort_ops(self._npu.base))
            raise XrtError(ErrorCode.TIMEOUT, f"{what}: {why} (aborted; the device is usable)")
