"""Register bus masters of the harness: how a batch of register operations reaches the RTL.

Two masters with one interface (`run(rows)`):

- `RegbusMaster`, the one the emulator uses: the batch goes in one ctypes call into the
  DPI-C queue of `npu_regbus_master` (rtl/sim/), an AXI4-Lite master inside the
  simulation; the harness toggles its kick input and awaits the fall of `rbm_wait_o` (one
  trigger: the batch ended, or it overran its guard). No Python runs between bus
  transactions.
- `CocotbextMaster`: cocotbext-axi's `AxiLiteMaster` on the toplevel's `s_axil_*` port,
  one Python coroutine per transaction. It is the independent reference the tests compare
  the RTL master against, and the only master of tops without `npu_regbus_master` (the
  DMA block test's `npu_dma_flat`).

A row is an `xrt.hw.regops.RegRow` ``(kind, addr, value, mask, expected, max_cycles)``
(or a plain tuple in its field order, as the worker gets it); a result is ``(status, value,
cycles)`` with status an `xrt.hw.wire.RegisterStatus` (the proto's numbers, which the RTL
master reports itself). A batch stops after the first result that is not OK. Semantics,
shared by both masters:

- read: the value read (0 when the bus answers SLVERR/DECERR);
- write: value 0;
- masked write: read, then write ``(old & ~mask) | (value & mask)``, nothing else on the
  bus in between; the value written;
- poll: read until ``value & mask == expected``; between reads wait `POLL_FIRST_INTERVAL`
  cycles, doubling up to `POLL_MAX_INTERVAL` (``rtl/config/npu.toml`` [regbus]), never past
  `max_cycles` after the start; a read that does not match `max_cycles` or more after the
  start gives POLL_TIMEOUT with the value last read.
"""

from __future__ import annotations

import ctypes
import logging
from collections.abc import Sequence
from typing import Any

from cocotb.handle import Immediate, SimHandleBase
from cocotb.triggers import FallingEdge, Timer
from cocotb.utils import get_sim_time
from cocotbext.axi import AxiLiteBus, AxiLiteMaster

from xrt.hw.port import RegBatch
from xrt.hw.regops import DEFAULT_POLL_CYCLES, RegKind, RegRow
from xrt.hw.ring import REGBUS_OP, REGBUS_RESULT
from xrt.hw.targets import POLL_FIRST_INTERVAL, POLL_MAX_INTERVAL
from xrt.hw.wire import RegisterStatus

__all__ = [
    "OP_LAYOUT",
    "RESULT_LAYOUT",
    "CocotbextMaster",
    "RegbusError",
    "RegbusMaster",
    "Row",
    "encode_rows",
]

Row = RegRow | tuple[int, int, int, int, int, int]
Result = tuple[int, int, int]

# The queue's records (npu_regbus_op, npu_regbus_result: xrt.hw.ring is their one source, the
# C++ includes the header generated from it): kind, addr, value, mask, expected, reserved
# (u32 each), max_cycles (u64); status, value (u32), cycles (u64).
OP_LAYOUT = REGBUS_OP.format
RESULT_LAYOUT = REGBUS_RESULT.format

_M32 = 0xFFFF_FFFF
_OK = RegisterStatus.OK


class RegbusError(RuntimeError):
    """The register bus master misbehaved (a bug in the simulation, not a bus answer)."""


def encode_rows(rows: Sequence[Row]) -> bytes:
    """Rows -> the queue's packed layout: the device port's `RegBatch` records, which every
    route carries (`xrt.hw.port`).

    Raises:
        ValueError: an unknown kind, an address outside 32 bits or a negative cycle limit.
    """
    return RegBatch.of_rows(rows).records


class RegbusMaster:
    """Batches through `npu_regbus_master` inside the simulation (see the module doc).

    Args:
        dut: The toplevel (`npu_sim`): ports ``rbm_kick_i``, ``rbm_guard_i``, ``rbm_busy_o``
            and ``rbm_wait_o``.
        period_ps: Clock period, for the guard timer.
    """

    def __init__(self, dut: SimHandleBase, period_ps: int) -> None:
        self.dut = dut
        self.period_ps = period_ps
        # Handles looked up once (each lookup is Python in cocotb), written without delay:
        # a deposit (cocotb's default) costs a ReadWrite callback per batch, and the master
        # samples its inputs at the next clock edge either way.
        self._kick_h = dut.rbm_kick_i
        self._guard_h = dut.rbm_guard_i
        self._busy_h = dut.rbm_busy_o
        self._wait_h = dut.rbm_wait_o
        self._kick = 0
        self._guard = -1  # the value last written to rbm_guard_i
        self._running = False  # a batch was handed over and its end not yet seen
        self._results = (ctypes.c_char * (RESULT_LAYOUT.size * 4096))()  # grows if need be
        lib = ctypes.CDLL(None)  # the simulator executable itself
        try:
            self._submit = lib.npu_regbus_submit
            self._collect = lib.npu_regbus_collect
            self._cancel = lib.npu_regbus_cancel
        except AttributeError:
            raise RegbusError(
                "the simulator does not export npu_regbus_submit: it was built without "
                "-Wl,--export-dynamic-symbol=npu_regbus_* (rebuild it with npuemu.sim.build)"
            ) from None
        self._submit.argtypes = (ctypes.c_char_p, ctypes.c_uint32)  # bytes: passed, not copied
        self._submit.restype = ctypes.c_int
        self._collect.argtypes = (ctypes.c_void_p, ctypes.c_uint32)
        self._collect.restype = ctypes.c_uint32
        self._cancel.argtypes = ()
        self._cancel.restype = None
        # The harness's own main loop owns the kick input (the register ring kicks the
        # master too): toggle it there. Other mains: toggle it here, through VPI.
        self._start = getattr(lib, "npu_regbus_start", None)
        if self._start is not None:
            self._start.argtypes = (ctypes.c_ulonglong,)
            self._start.restype = ctypes.c_int

    def reset(self) -> None:
        """Drive the kick input to its reset value (call while the NPU is in reset)."""
        self._kick = 0
        self._running = False
        self._kick_h.value = 0

    def restored(self) -> None:
        """The model's state was replaced (a checkpoint, the pristine state): the master in
        it is idle, and its kick input is whatever the state holds, which the next toggle
        must start from (driving it to 0 would be a kick of its own)."""
        self._running = False
        self._kick = int(self._kick_h.value)

    async def run(self, rows: Sequence[Row]) -> list[Result]:
        """Run the batch in the simulation; one `(status, value, cycles)` per op run.

        Raises:
            ValueError: a row `encode_rows` refuses.
            RegbusError: the master did not finish the batch within its guard.
        """
        if not rows:
            return []
        results = await self.run_records(encode_rows(rows), len(rows))
        return list(RESULT_LAYOUT.iter_unpack(results))

    async def run_records(self, ops: bytes, n_ops: int) -> bytes:
        """Run `n_ops` operations given as the queue's records (`xrt.hw.ring.REGBUS_OP`:
        the device port's `RegBatch.records`); the results as `REGBUS_RESULT` records, one
        per op run.

        Raises:
            ValueError: records of another size than `n_ops` of them.
            RegbusError: the master did not finish the batch within its guard.
        """
        if n_ops == 0:
            return b""
        if len(ops) != n_ops * OP_LAYOUT.size:
            raise ValueError(f"{len(ops)} bytes are not {n_ops} register operations")
        size = RESULT_LAYOUT.size
        if n_ops * size > len(self._results):  # more than the server's batches
            self._results = (ctypes.c_char * (n_ops * size))()
        if self._running and self._busy_h.value:
            # The last batch was cancelled: the master ends it at its next op boundary.
            await FallingEdge(self._busy_h)
        if self._submit(ops, n_ops) != 0:
            raise RegbusError("the register bus master is still running a batch")
        # A bound no correct batch reaches: each poll's limit plus its last read and
        # interval, and a generous number of cycles per access. npu_sim drops rbm_wait_o
        # when the batch ends or when it has run that long: one trigger either way.
        bound = 256 * n_ops + 4096
        for kind, _, _, _, _, _, cycles in OP_LAYOUT.iter_unpack(ops):
            if kind == RegKind.POLL:
                bound += (cycles or DEFAULT_POLL_CYCLES) + POLL_MAX_INTERVAL
        if self._start is not None:
            if self._start(bound) != 0:
                raise RegbusError("the simulator's main loop has no register ring service")
        else:
            if bound != self._guard:
                self._guard_h.value = Immediate(bound)
                self._guard = bound
            self._kick ^= 1
            self._kick_h.value = Immediate(self._kick)
        self._running = True
        try:
            await FallingEdge(self._wait_h)
        except BaseException:  # cancelled (the worker's caller went away)
            self._cancel()
            raise
        n = self._collect(self._results, n_ops)
        results = bytes(memoryview(self._results).cast("B")[: n * size])
        # Finished: every op ran, or one failed (the queue stops there). Else the guard
        # ended the wait (read from the results: a signal read costs a VPI call per batch).
        last_failed = n and RESULT_LAYOUT.unpack_from(results, (n - 1) * size)[0] != _OK
        if n < n_ops and not last_failed and self._busy_h.value:
            raise RegbusError(f"the register bus master did not finish a batch in {bound} cycles")
        self._running = False
        return results


class CocotbextMaster:
    """Batches through cocotbext-axi's `AxiLiteMaster` on the ``s_axil_*`` port: one Python
    coroutine per transaction (the reference master of the tests)."""

    def __init__(self, dut: SimHandleBase, clock: Any, period_ps: int) -> None:
        from cocotbext.axi import AxiResp

        self._okay = AxiResp.OKAY
        self._status = {
            AxiResp.SLVERR: RegisterStatus.SLVERR,
            AxiResp.DECERR: RegisterStatus.DECERR,
        }
        self.period_ps = period_ps
        self.axil = AxiLiteMaster(
            AxiLiteBus.from_prefix(dut, "s_axil"), clock, dut.rst_ni, reset_active_level=False
        )
        self.axil.write_if.log.setLevel(logging.WARNING)
        self.axil.read_if.log.setLevel(logging.WARNING)

    def reset(self) -> None:
        """Nothing to do: cocotbext-axi follows the reset line itself."""

    def restored(self) -> None:
        """Nothing to do: the model's state was replaced between transactions."""

    def _cycles(self) -> int:
        return int(get_sim_time("ps")) // self.period_ps

    async def _read(self, addr: int) -> tuple[RegisterStatus, int]:
        resp = await self.axil.read(addr, 4)
        if resp.resp != self._okay:
            return self._status[resp.resp], 0
        return _OK, int.from_bytes(resp.data, "little")

    async def _write(self, addr: int, value: int) -> RegisterStatus:
        resp = await self.axil.write(addr, (value & _M32).to_bytes(4, "little"))
        return _OK if resp.resp == self._okay else self._status[resp.resp]

    async def _poll(self, addr: int, mask: int, expected: int, max_cycles: int) -> tuple[int, int]:
        start = self._cycles()
        interval = POLL_FIRST_INTERVAL
        while True:
            status, value = await self._read(addr)
            if status != _OK or value & mask == expected:
                return status, value
            spent = self._cycles() - start
            if spent >= max_cycles:
                return RegisterStatus.POLL_TIMEOUT, value
            await Timer(min(interval, max_cycles - spent) * self.period_ps, unit="ps")
            interval = min(interval * 2, POLL_MAX_INTERVAL)

    async def run_records(self, ops: bytes, n_ops: int) -> bytes:
        """`RegbusMaster.run_records`, op by op through cocotbext-axi."""
        rows = [(k, a, v, m, e, c) for k, a, v, m, e, _, c in OP_LAYOUT.iter_unpack(ops)]
        if len(rows) != n_ops:
            raise ValueError(f"{len(ops)} bytes are not {n_ops} register operations")
        pack = RESULT_LAYOUT.pack
        return b"".join([pack(*r) for r in await self.run(rows)])

    async def run(self, rows: Sequence[Row]) -> list[Result]:
        """Run the batch op by op; one `(status, value, cycles)` per op run."""
        encode_rows(rows)  # the same checks as the RTL master
        results: list[Result] = []
        for kind, addr, value, mask, expected, max_cycles in rows:
            start = self._cycles()
            if kind == RegKind.READ:
                status, got = await self._read(addr)
            elif kind == RegKind.WRITE:
                status, got = await self._write(addr, value), 0
            elif kind == RegKind.MASKED_WRITE:
                status, old = await self._read(addr)
                got = 0
                if status == _OK:
                    new = ((old & ~mask) | (value & mask)) & _M32
                    status = await self._write(addr, new)
                    got = new if status == _OK else 0
            else:
                status, got = await self._poll(addr, mask & _M32, expected & _M32, max_cycles)
            results.append((status, got, self._cycles() - start))
            if status != _OK:
                break
        return results
