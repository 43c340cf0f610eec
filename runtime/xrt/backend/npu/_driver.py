"""The driver sequence of the compute engine (docs/isa.md "Launching a program").

`EngineDriver.launch` is what a driver writes on the board, over the device's ``npu``
register region (the same code runs against the emulator and a real board):

1. one batch: poll ``CORE_STATUS.BUSY = 0``; write ``PROG_ADDR_LO/HI``, ``PROG_INSNS`` and
   the base registers the program uses; clear the engine's events in ``INT_STATUS`` and
   enable them in ``INT_ENABLE``; read the counters (their values before the run);
   ``CORE_CTRL.START``;
2. wait for the interrupt;
3. one batch: read ``CORE_STATUS``, the error registers and the counters; acknowledge in
   ``INT_STATUS``.

An error status is XrtError 11014 naming the program, the instruction index (error PC),
the unit and the error; an interrupt that never comes is 11015 after the engine was
aborted, so the device stays usable.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from xrt._generated.hwconfig import CLOCK_PERIOD_PS
from xrt._generated.regmap_npu import NPU
from xrt.devices.npu import NpuDevice
from xrt.errors import ErrorCode, XrtError
from xrt.npu.isa import ERROR_TEXT, EngineError
from xrt.registers import RegOp, RegPoll, RegRead, RegWrite

__all__ = ["EngineDriver", "LaunchStats"]

_R = {reg.name: reg.offset for reg in NPU.registers}
_UNITS = {0: "load", 1: "compute", 2: "store", 3: "fetch"}

IDLE_WAIT_S = 5.0
"""Wall seconds to wait for a previous program to drain before a launch."""


@dataclass(frozen=True)
class _Fields:
    """Masks of the engine's register fields, from the generated register map."""

    start: int
    abort: int
    busy: int
    done: int
    err_code: tuple[int, int]
    err_unit: tuple[int, int]
    events: int

    @classmethod
    def load(cls) -> _Fields:
        def f(reg: str, name: str) -> tuple[int, int]:
            info = NPU.register(reg).field(name)
            return info.lsb, info.mask

        try:
            return cls(
                f("CORE_CTRL", "START")[1],
                f("CORE_CTRL", "ABORT")[1],
                f("CORE_STATUS", "BUSY")[1],
                f("CORE_STATUS", "DONE")[1],
                f("CORE_STATUS", "ERR_CODE"),
                f("CORE_STATUS", "ERR_UNIT"),
                f("INT_STATUS", "CORE_DONE")[1] | f("INT_STATUS", "CORE_ERROR")[1],
            )
        except KeyError as exc:
            raise XrtError(
                ErrorCode.DEVICE_INTERNAL, f"this NPU's register map has no compute engine: {exc}"
            ) from None


PERF_COUNTERS = tuple(
    sorted(name[: -len("_LO")] for name in _R if name.startswith("PERF_") and name.endswith("_LO"))
)
"""The engine's 64-bit counters (``PERF_*``), read before and after each launch."""


@dataclass
class LaunchStats:
    """What one launch did, from the engine's counters (deltas over the launch).

    Attributes:
        counters: Counter name (without ``PERF_``) -> increment during the launch.
        cycles: Simulated cycles the device reported over the launch (None on a board).
    """

    counters: dict[str, int] = field(default_factory=dict)
    cycles: int | None = None

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
        self._f = _Fields.load()
        self.launches = 0

    def _a(self, name: str) -> int:
        return self._npu.base + _R[name]

    def _read_counters(self) -> list[RegOp]:
        ops: list[RegOp] = []
        for name in PERF_COUNTERS:
            ops += [RegRead(self._a(name + "_LO")), RegRead(self._a(name + "_HI"))]
        return ops

    @staticmethod
    def _counter_values(results: list[int | None]) -> dict[str, int]:
        out = {}
        for i, name in enumerate(PERF_COUNTERS):
            lo, hi = results[2 * i], results[2 * i + 1]
            assert lo is not None and hi is not None
            out[name[len("PERF_") :]] = (hi << 32) | lo
        return out

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
        ops: list[RegOp] = [
            RegPoll(self._a("CORE_STATUS"), self._f.busy, 0, timeout_s=IDLE_WAIT_S),
            RegWrite(self._a("PROG_ADDR_LO"), prog_addr & 0xFFFF_FFFF),
            RegWrite(self._a("PROG_ADDR_HI"), prog_addr >> 32),
            RegWrite(self._a("PROG_INSNS"), n_insns),
        ]
        for index, addr in sorted(bases.items()):
            ops += [
                RegWrite(self._a(f"BASE{index}_LO"), addr & 0xFFFF_FFFF),
                RegWrite(self._a(f"BASE{index}_HI"), addr >> 32),
            ]
        ops += [
            RegWrite(self._a("INT_STATUS"), self._f.events),
            RegWrite(self._a("INT_ENABLE"), self._f.events),
        ]
        first = len(ops)
        ops += self._read_counters()
        ops.append(RegWrite(self._a("CORE_CTRL"), self._f.start))
        before = self._npu.execute(ops)
        cycles0 = self.device.cycles
        self.launches += 1
        if not self.device.wait_irq(timeout_s, max_cycles):
            self._abort()
            raise XrtError(
                ErrorCode.TIMEOUT,
                f"{what}: the NPU did not finish within {timeout_s:g} s"
                + (f" / {max_cycles} cycles" if max_cycles else "")
                + " (aborted; the device is usable)",
            )
        after = self._npu.execute(
            [
                RegRead(self._a("CORE_STATUS")),
                RegRead(self._a("CORE_ERR_PC")),
                RegRead(self._a("CORE_ERR_ADDR_LO")),
                RegRead(self._a("CORE_ERR_ADDR_HI")),
                *self._read_counters(),
                RegWrite(self._a("INT_STATUS"), self._f.events),
            ]
        )
        status, pc, addr_lo, addr_hi = (v or 0 for v in after[:4])
        code = (status & self._f.err_code[1]) >> self._f.err_code[0]
        if code:
            unit = _UNITS.get((status & self._f.err_unit[1]) >> self._f.err_unit[0], "?")
            try:
                err = EngineError(code)
                name, text = err.name, ERROR_TEXT[err]
            except ValueError:
                name, text = f"code {code}", "unknown error code"
            raise XrtError(
                ErrorCode.DEVICE_INTERNAL,
                f"{what}: NPU error {name} at instruction {pc} ({unit} unit), address "
                f"{(addr_hi << 32) | addr_lo:#x}: {text}",
            )
        if not status & self._f.done:
            raise XrtError(
                ErrorCode.DEVICE_INTERNAL,
                f"{what}: interrupt without CORE_STATUS.DONE (status {status:#x})",
            )
        start = self._counter_values(before[first : first + 2 * len(PERF_COUNTERS)])
        end = self._counter_values(after[4 : 4 + 2 * len(PERF_COUNTERS)])
        cycles1 = self.device.cycles
        return LaunchStats(
            {k: end[k] - start[k] for k in end},
            None if cycles0 is None or cycles1 is None else cycles1 - cycles0,
        )

    def _abort(self) -> None:
        """Stop a program that did not finish; wait until the engine is idle; acknowledge."""
        self._npu.execute(
            [
                RegWrite(self._a("CORE_CTRL"), self._f.abort),
                RegPoll(self._a("CORE_STATUS"), self._f.busy, 0, timeout_s=IDLE_WAIT_S),
                RegWrite(self._a("INT_STATUS"), self._f.events),
            ]
        )
