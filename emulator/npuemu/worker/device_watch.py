"""The device's own log lines: what the simulated NPU did, seen where the simulator sees it.

A board's NPU (and the AIC100 runtime's devices) report events of their own into a device
log: an interrupt raised, an engine or DMA error, a reset. `DeviceWatch` looks after every
request the worker's port served (`npuemu.worker.port.WorkerPort`, whatever its route) and
sends a `xrt.hw.port.DeviceEvent` to the server for each such event, which the server logs
for the device and streams to its holder's ``FollowDeviceLog`` (device log capture):

- ``interrupt``: the interrupt line (``irq_o``) is high and was low after the last request
  (sent only while someone follows the device's log: one per DMA transfer or program
  would otherwise be a frame on the pipe for nobody);
- ``engine_error`` / ``dma_error``: a register read or poll in the request returned the
  compute engine's ``CORE_STATUS`` or the DMA's ``STATUS`` with an error code: the error
  named with the address and instruction read beside it (`xrt.hw.engine.EngineOutcome`,
  `xrt.hw.dma.DmaOutcome`), once per start of that engine;
- ``reset``: a `Reset` request was served.

It costs no simulated time: the interrupt line is read as a signal, never through the bus,
and engine states come from what the holder's own requests read. A register ring's
requests reach the port (and this watch) only while they are handed over: while taps are
on, or while someone follows the device's log (the server's `WatchRings`); otherwise a
holder's ring traffic shows here at the next request the worker serves itself.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable, Iterable
from typing import Any

from npuemu.worker.handlers import Worker, bit_reader
from xrt.hw.dma import DmaOutcome
from xrt.hw.engine import EngineOutcome
from xrt.hw.port import (
    DeviceEvent,
    ModelRestore,
    PristineRestore,
    RegBatch,
    RegResults,
    Reset,
    Served,
)
from xrt.hw.port_pipe import encode_event
from xrt.hw.regops import RegKind
from xrt.hw.regs import DMA, NPU
from xrt.hw.ring import REGBUS_OP
from xrt.hw.targets import target
from xrt.hw.wire import RegisterStatus

__all__ = ["DeviceWatch"]

_CORE_START = NPU.register("CORE_CTRL").field("START").mask
_DMA_START = DMA.register("CTRL").field("START").mask
_CORE_ERR = NPU.register("CORE_STATUS").field("ERR_CODE")
_CORE_UNIT = NPU.register("CORE_STATUS").field("ERR_UNIT")
_DMA_ERR = DMA.register("STATUS").field("ERR_CODE")
_READS = (RegKind.READ, RegKind.POLL)
_WRITES = (RegKind.WRITE, RegKind.MASKED_WRITE)


class DeviceWatch:
    """Sees every request served (as a tap does) and sends the device's events.

    Args:
        worker: The worker whose model it watches.
        send: Sends a frame's map to the server (the pipe's `BlockingChannel.send`).
    """

    def __init__(self, worker: Worker, send: Callable[[dict[str, Any]], None]) -> None:
        cfg = target(worker.config.target)
        npu, dma = cfg.npu_base, cfg.dma_base
        self._send = send
        self._worker = worker
        self._irq = bit_reader(worker.dut.irq_o)
        self._irq_high = self._irq()
        core = ("CORE_CTRL", "CORE_STATUS", "CORE_ERR_PC", "CORE_ERR_ADDR_LO", "CORE_ERR_ADDR_HI")
        self._core = {name: npu + NPU.offset(name) for name in core}
        self._dma = {
            name: dma + DMA.offset(name)
            for name in ("CTRL", "STATUS", "ERR_ADDR_LO", "ERR_ADDR_HI")
        }
        self._reported: dict[str, tuple[int, ...]] = {}  # per engine, until it starts again
        # A batch that names none of these addresses needs no look at its ops (a substring
        # search in C: big batches of other registers cost nothing per op here).
        self._needles = [struct.pack("<I", a) for a in (*self._core.values(), *self._dma.values())]

    def __call__(self, served: Served) -> None:
        request, reply = served.request, served.reply
        if isinstance(request, PristineRestore | ModelRestore):
            # Another state altogether (a lease ended, a checkpoint came back): its events
            # are not this device's history.
            self._reported.clear()
            self._irq_high = self._irq()
            return
        events: list[DeviceEvent] = []
        if isinstance(request, Reset) and reply.ok:
            self._reported.clear()
            text = "reset: every register to its reset value, memories kept"
            events.append(DeviceEvent("reset", reply.cycles, logging.INFO, text))
        elif isinstance(request, RegBatch) and isinstance(reply.body, RegResults):
            events.extend(self._engine_events(request, reply.body, reply.cycles))
        high = self._irq()
        if high and not self._irq_high and self._worker.log_followed:
            events.append(DeviceEvent("interrupt", reply.cycles, logging.INFO, "interrupt raised"))
        self._irq_high = high
        for event in events:
            self._send(encode_event(event))

    def _engine_events(
        self, batch: RegBatch, results: RegResults, cycle: int
    ) -> Iterable[DeviceEvent]:
        """Errors in the engines' status registers this batch read (after the last start
        of that engine in it, if any)."""
        if not any(needle in batch.records for needle in self._needles):
            return
        core: dict[int, int] = {}
        dma: dict[int, int] = {}
        ops = REGBUS_OP.format.iter_unpack(batch.records)
        for (kind, addr, value, mask, *_), (bus, result, _) in zip(ops, results, strict=False):
            if bus != RegisterStatus.OK:
                continue
            if kind in _WRITES:
                if addr == self._core["CORE_CTRL"] and value & mask & _CORE_START:
                    core.clear()  # a new program: what was read before is the last one's
                    self._reported.pop("engine", None)
                elif addr == self._dma["CTRL"] and value & mask & _DMA_START:
                    dma.clear()
                    self._reported.pop("dma", None)
            elif kind in _READS:
                if addr in self._core.values():
                    core[addr] = result
                elif addr in self._dma.values():
                    dma[addr] = result
        status = core.get(self._core["CORE_STATUS"])
        if status is not None and _CORE_ERR.extract(status):
            pc = core.get(self._core["CORE_ERR_PC"], 0)
            lo = core.get(self._core["CORE_ERR_ADDR_LO"], 0)
            hi = core.get(self._core["CORE_ERR_ADDR_HI"], 0)
            outcome = EngineOutcome(
                status, _CORE_ERR.extract(status), _CORE_UNIT.extract(status), pc, hi << 32 | lo
            )
            if self._reported.get("engine") != (status, pc):
                self._reported["engine"] = (status, pc)
                yield DeviceEvent(
                    "engine_error", cycle, logging.ERROR, f"compute engine: {outcome.describe()}"
                )
        status = dma.get(self._dma["STATUS"])
        if status is not None and _DMA_ERR.extract(status):
            lo = dma.get(self._dma["ERR_ADDR_LO"], 0)
            hi = dma.get(self._dma["ERR_ADDR_HI"], 0)
            if self._reported.get("dma") != (status,):
                self._reported["dma"] = (status,)
                text = DmaOutcome(status, _DMA_ERR.extract(status), hi << 32 | lo).describe()
                if self._dma["ERR_ADDR_LO"] not in dma:  # the holder did not read it
                    text = text.replace(" at 0x0 ", " ", 1)
                yield DeviceEvent("dma_error", cycle, logging.ERROR, f"DMA error {text}")
