"""The worker's request loop: runs inside the simulator, one process per device.

The server starts the verilated `npu_sim` with this module as cocotb's test module and one
end of a Unix socket pair in NPU_WORKER_FD. The loop answers one request at a time:

- the device idle and no request: block on the socket. Simulated time stands still and the
  process sleeps: an idle device costs no CPU;
- an engine busy (`busy_o`) and no request: run the clock in slices (ending early when the
  engine goes idle) and look for a request between slices, so a transfer a client started
  keeps going while the client polls or waits;
- a request: run it through the harness and answer, with the cycle count.

Bulk data never comes here: host-visible memory is a shared-memory file the server reads
and writes itself.
"""

from __future__ import annotations

import logging
import os
import socket
from typing import Any

import cocotb
from cocotb.triggers import FallingEdge, First, Timer

from npuemu.sim.harness import NpuHarness
from npuemu.worker.protocol import BlockingChannel, ChannelClosedError
from xrt._generated.hwconfig import CLOCK_PERIOD_PS

log = logging.getLogger("npuemu.worker")

BUSY_SLICE_CYCLES = 2048  # while an engine runs: cycles between looks at the socket
# Status names of the IPC protocol, by the harness's status codes (npuemu.sim.regbus).
STATUS_NAMES = {0: "OK", 2: "SLVERR", 3: "DECERR", 4: "POLL_TIMEOUT"}
ALL_BITS = 0xFFFF_FFFF


class Worker:
    """Request handlers over one harness.

    The register master is the RTL one inside the simulation; NPU_EMU_REG_MASTER=cocotbext
    selects cocotbext-axi's instead (the reference, for comparisons in benches).
    """

    def __init__(self, dut: Any) -> None:
        self.dut = dut
        master = os.environ.get("NPU_EMU_REG_MASTER", "auto")
        self.h = NpuHarness(dut, CLOCK_PERIOD_PS, master=master)

    async def handle(self, req: dict[str, Any]) -> dict[str, Any]:
        op = req["op"]
        h = self.h
        if op == "reset":
            await h.reset()
            return {}
        if op == "read_reg":
            ((status, value, _),) = await h.run_rows([("read", req["addr"], 0, ALL_BITS, 0, 0)])
            return {"status": STATUS_NAMES[status], "value": value}
        if op == "write_reg":
            row = ("write", req["addr"], req["value"], ALL_BITS, 0, 0)
            ((status, _, _),) = await h.run_rows([row])
            return {"status": STATUS_NAMES[status]}
        if op == "batch":
            return {"results": await self.batch(req["ops"])}
        if op == "wait_irq":
            w = await h.wait_irq(req["max_cycles"], req["wall_s"])
            return {"outcome": w.outcome.value, "waited": w.cycles}
        raise ValueError(f"unknown worker request {op!r}")

    async def batch(self, ops: list[tuple]) -> list[tuple[str, int]]:
        """Run (kind, addr, value, mask, expected, max_cycles) ops; stop at the first failure.

        The whole batch is one hand-over to the register bus master in the simulation.
        """
        return [(STATUS_NAMES[s], v) for s, v, _ in await self.h.run_rows(ops)]

    async def idle_or_busy(self, chan: BlockingChannel) -> None:
        """Advance time while an engine is busy and nobody is asking; else return."""
        while self.dut.busy_o.value and not chan.pending():
            await First(
                FallingEdge(self.dut.busy_o),
                Timer(BUSY_SLICE_CYCLES * CLOCK_PERIOD_PS, unit="ps"),
            )


@cocotb.test()
async def serve(dut) -> None:
    """The request loop (the only 'test' of this module): runs until told to quit."""
    worker = Worker(dut)
    await worker.h.reset()
    chan = BlockingChannel(socket.socket(fileno=int(os.environ["NPU_WORKER_FD"])))
    chan.send({"event": "ready", "cycles": worker.h.cycles})
    while True:
        await worker.idle_or_busy(chan)
        try:
            req = chan.recv()  # blocks with the simulation frozen
        except ChannelClosedError:
            log.info("server closed the channel: stopping")
            return
        if req["op"] == "quit":
            chan.send({"id": req["id"], "ok": True, "cycles": worker.h.cycles})
            return
        try:
            result = await worker.handle(req)
            reply = {"id": req["id"], "ok": True, "cycles": worker.h.cycles, **result}
        except Exception as exc:
            log.exception("request %s failed", req.get("op"))
            reply = {
                "id": req["id"],
                "ok": False,
                "error": f"{type(exc).__name__}: {exc}",
                "cycles": worker.h.cycles,
            }
        chan.send(reply)


__all__ = ["Worker", "serve"]
