"""The worker's request loop: runs inside the simulator, one process per device.

The server starts the verilated `npu_sim` with this module as cocotb's test module. The
simulator's main takes the server's hand-out first (the pipe, the descriptor channel, the
memory files and the worker's configuration: `npuemu.worker.config.WorkerConfig`), then
this loop answers one request at a time:

- the device idle and no request: the main loop's idle time (rtl/sim/npu_ring_service.h):
  simulated time stands still and the process sleeps; busy engines run on; the register
  rings are served there natively, or handed over to this loop while taps are on;
- a request, from the pipe or a ring's hand-over: the device port runs it
  (`npuemu.worker.port.WorkerPort`: dispatch, read-only gate, taps) and the answer goes back
  the way the request came.

Bulk data never comes here: host-visible memory is a shared-memory file the server reads
and writes itself. A request that may run long (a wait, a poll, a state save) runs as a
task with watches: a cancel for it on the pipe, or the revocation of the ring it came by,
stops it; a server that died ends the process.
"""

from __future__ import annotations

import logging
import os
import socket
from dataclasses import replace
from typing import Any

import cocotb
from cocotb.triggers import Edge, FallingEdge, First, Timer

from npuemu.sim.lockstep import LaunchVetter
from npuemu.sim.waves import HOLDER, WavesUnavailableError
from npuemu.worker.config import Hello, WorkerConfig
from npuemu.worker.debug import DebugRefusalError, DebugUnit
from npuemu.worker.device_watch import DeviceWatch
from npuemu.worker.handlers import Worker
from npuemu.worker.mainloop import MainLoop, RingRequest
from npuemu.worker.port import ForwardTap, LockstepTap, Tap, WorkerPort
from npuemu.worker.protocol import BlockingChannel, ChannelClosedError
from xrt.hw.debug import DebugOp, DebugRequest, decode_debug_request, encode_debug_reply
from xrt.hw.port import (
    Cancel,
    ModelRestore,
    ModelSave,
    PortError,
    PortErrorCode,
    PristineRestore,
    Quit,
    RegBatch,
    RegResults,
    Reply,
    Request,
    Route,
    WaitIrq,
    WaitResult,
)
from xrt.hw.port_pipe import decode_request, encode_reply
from xrt.hw.ring import RingKind, RingSlot, RingStatus
from xrt.hw.targets import CLOCK_PERIOD_PS

__all__ = ["serve"]

log = logging.getLogger("npuemu.worker")

BUSY_SLICE_CYCLES = 2048  # while an engine runs: cycles between looks at the socket
WATCH_SLICE_CYCLES = 4096  # while a request runs: cycles between looks for a cancel
_ROUTE_OF_SLOT = {RingSlot.LEASE: Route.LEASE_RING, RingSlot.SERVER: Route.SERVER_RING}


def _may_run_long(request: Request) -> bool:
    """A request that may take long enough for its caller to give up on it: run it as a
    cancellable task with watches. A batch without polls is a few cycles per op (at most
    4096 ops: well under a second of simulation), so it skips the task and its triggers."""
    if isinstance(request, RegBatch):
        return request.has_poll
    return isinstance(request, (WaitIrq, ModelSave, ModelRestore))


class Loop:
    """The request loop over one port (see the module docstring)."""

    def __init__(self, worker: Worker, port: WorkerPort, chan: BlockingChannel, server: int):
        self.worker = worker
        self.port = port
        self.chan = chan
        self.server = server
        self.main_loop = worker.main_loop
        self._wake_h = getattr(worker.dut, "host_wake_i", None)
        # The debugger's stop unit (npuemu.worker.debug), and the pipe's messages that came
        # while the device was stopped: served once it runs again.
        self.debug = DebugUnit()
        self.deferred: list[dict[str, Any]] = []

    def _pending(self) -> bool:
        return bool(self.deferred) or self.chan.pending()

    def _next(self) -> dict[str, Any]:
        return self.deferred.pop(0) if self.deferred else self.chan.recv()

    def answer_debug(self, msg: dict[str, Any]) -> None:
        """Answer a debugger's request (no time passes)."""
        given = msg.get("id")
        req_id = given if isinstance(given, int) else 0
        try:
            req_id, request = decode_debug_request(msg)
            wave = self.debug_waves(DebugOp(request.op))
            reply = self.debug.serve(request)
        except (ValueError, DebugRefusalError, WavesUnavailableError) as exc:
            error = PortError(PortErrorCode.BAD_REQUEST, str(exc))
            self.chan.send(encode_reply(Reply(req_id, self.worker.h.cycles, error=error)))
            return
        self.chan.send(encode_debug_reply(req_id, replace(reply, wave=wave)))

    def debug_waves(self, op: DebugOp) -> tuple[str, int, int] | None:
        """The debugger's waveform window (the holder's, `npuemu.sim.waves`): opened at
        once unless one is, or closed and named (no time passes)."""
        if op is DebugOp.WAVES_ON and not self.worker.waves().recording:
            self.worker.waves().start(self.worker.h.cycles * CLOCK_PERIOD_PS, 0, HOLDER)
        if op is not DebugOp.WAVES_OFF:
            return None
        window = self.worker.waves().finish(HOLDER)
        if window is None:
            raise WavesUnavailableError("no waveform window of this lease to close")
        return (str(window.path), window.first_cycle, window.last_cycle)

    def drain_for_debugger(self) -> None:
        """Woken for the pipe while a ring request runs: answer the debugger's requests;
        keep the others, to be woken for them once the ring's request has ended."""
        while self.chan.pending():
            msg = self.chan.recv()
            if msg.get("t") == DebugRequest.TAG:
                self.answer_debug(msg)
            else:
                self.deferred.append(msg)
        self.main_loop.idle_wake(1 if self.deferred else 0)

    def serve_stop(self) -> None:
        """The device is stopped (a breakpoint or a step): tell the server, then serve the
        debugger's requests, blocking (the model does not advance), until one resumes it.
        Any other message waits until then (a quit ends the stop)."""
        self.debug.stops += 1
        reply = self.debug.serve(DebugRequest("state"))
        self.chan.send({**encode_debug_reply(0, reply), "ev": "debug"})
        state = reply.state
        log.info("stopped at cycle %d (%s %d)", state.cycle, state.reason.name, state.hit)
        while self.debug.stopped:
            msg = self.chan.recv()
            if msg.get("t") == DebugRequest.TAG:
                self.answer_debug(msg)
                continue
            if msg.get("t") == Quit.TAG:
                self.debug.clear()
            self.deferred.append(msg)
        if self.main_loop.available and self.main_loop.ring_inflight():
            self.main_loop.idle_wake(1 if self.deferred else 0)

    async def run(self) -> None:
        """Until the server closes the pipe or says quit."""
        while True:
            if not self.worker.config.frozen_idle:
                await self.idle_or_busy()
            if self.debug.stopped:  # a breakpoint hit while idle time was the main loop's
                self.serve_stop()
                continue
            ring = self.main_loop.ring_pending() if self.main_loop.available else None
            if ring is not None:
                await self.serve_ring(ring)
                continue
            live = self.main_loop.available and not self.worker.config.frozen_idle
            if live and self.main_loop.ring_inflight():
                self.drain_for_debugger()  # a ring request runs: the debugger's turn only
                continue
            if live and not self._pending():
                continue  # woken for a ring request that was revoked meanwhile
            try:
                msg = self._next()  # blocks with the simulation frozen
            except ChannelClosedError:
                log.info("server closed the channel: stopping")
                return
            if msg.get("t") == DebugRequest.TAG:
                self.answer_debug(msg)
                continue
            req_id, request, read_only = decode_request(msg)
            if isinstance(request, Cancel):
                continue  # its request was already answered
            if isinstance(request, Quit):
                self.worker.close_waves()
                self.chan.send(encode_reply(Reply(req_id, self.worker.h.cycles)))
                return
            reply = await self.serve(req_id, request, Route.PIPE, read_only)
            self.chan.send(encode_reply(reply))

    async def serve(self, req_id: int, request: Request, route: Route, read_only: bool) -> Reply:
        if isinstance(request, PristineRestore):  # a lease's end: its breakpoints go too
            self.debug.clear()
        # A few cycles at most: no task, no watch; but a breakpoint may stop any request.
        if not _may_run_long(request) and not self.debug.armed:
            return await self.port.serve(req_id, request, route, read_only)
        return await self.watched(req_id, request, route, read_only)

    async def serve_ring(self, ring: RingRequest) -> None:
        """A ring request the simulator handed over (taps are on): through the port, the
        answer back into the ring."""
        request: Request
        if ring.kind == RingKind.BATCH:
            request = RegBatch(ring.records, ring.n_ops)
        else:
            request = WaitIrq(ring.max_cycles, ring.wall_ms / 1000)
        reply = await self.serve(0, request, _ROUTE_OF_SLOT[ring.slot], False)
        respond, cycles = self.main_loop.ring_respond, reply.cycles
        if reply.error is not None:
            bad = reply.error.code == PortErrorCode.BAD_REQUEST
            status = RingStatus.BAD_REQUEST if bad else RingStatus.DEVICE_ERROR
            respond(status, cycles, message=reply.error.message)
        elif reply.cancelled:
            respond(RingStatus.DEVICE_ERROR, cycles, message="the ring was revoked")
        elif isinstance(reply.body, RegResults):
            respond(RingStatus.OK, cycles, reply.body.records)
        elif isinstance(reply.body, WaitResult):
            respond(RingStatus.OK, cycles, outcome=reply.body.outcome, waited=reply.body.waited)

    async def watched(self, req_id: int, request: Request, route: Route, read_only: bool) -> Reply:
        """Run one request as a task, looking between slices of simulated time for a cancel
        of it on the pipe (its caller went away), the revocation of its ring, or a server
        that died (the process ends)."""
        task = cocotb.start_soon(self.port.serve(req_id, request, route, read_only))
        cancelled = False
        slot = next((s for s, r in _ROUTE_OF_SLOT.items() if r == route), None)
        while not task.done():
            triggers = [task.complete, Timer(WATCH_SLICE_CYCLES * CLOCK_PERIOD_PS, unit="ps")]
            if self.debug.armed and self._wake_h is not None:  # a stop toggles it
                triggers.append(Edge(self._wake_h))
            await First(*triggers)
            if self.debug.stopped:  # the model stands still until the debugger resumes it
                self.serve_stop()
            if task.done():
                break
            if _orphaned(self.server):
                log.error("the server is gone: stopping")
                os._exit(0)
            if slot is not None and not cancelled and self.main_loop.ring_revoked(slot):
                task.cancel()
                cancelled = True
            kept = []
            while route == Route.PIPE and self._pending():
                msg = self._next()
                if msg.get("t") == DebugRequest.TAG:
                    self.answer_debug(msg)
                    continue
                if msg.get("t") != Cancel.TAG:
                    kept.append(msg)  # came during a stop (a quit): served after this one
                    continue
                _, other, _ = decode_request(msg)
                if isinstance(other, Cancel) and other.of == req_id and not cancelled:
                    task.cancel()
                    cancelled = True
                # a cancel for an earlier request (already answered) needs nothing
            self.deferred[:0] = kept
        if task.cancelled():
            return Reply(req_id, self.worker.h.cycles, cancelled=True)
        return task.result()

    async def idle_or_busy(self) -> None:
        """Until a request is waiting: advance time while an engine is busy.

        With the harness's own main loop the idle time is the loop's (it runs busy engines,
        serves the register rings, sleeps when there is nothing to do, and toggles
        ``host_wake_i`` when the pipe has a request or a ring hands one over). Otherwise:
        run busy engines here, in slices, and return when the device is idle or a request
        waits (the caller then blocks on the pipe, simulated time standing still).
        """
        if self.main_loop.available:
            # While a ring request runs, kept messages wait for its end (the main loop wakes
            # this loop then: idle_wake).
            if not self._pending() or self.main_loop.ring_inflight():
                assert self._wake_h is not None  # the main loop exists only with host_wake_i
                self.main_loop.idle_begin(self.chan.sock.fileno())
                await Edge(self._wake_h)
            return
        busy = self.worker.engine_busy
        while busy() and not self.chan.pending():
            if _orphaned(self.server):  # the parent-death signal's backstop
                log.error("the server is gone: stopping")
                os._exit(0)
            await First(
                FallingEdge(self.worker.dut.busy_o),
                Timer(BUSY_SLICE_CYCLES * CLOCK_PERIOD_PS, unit="ps"),
            )


def _orphaned(server: int) -> bool:
    return bool(server) and os.getppid() != server


@cocotb.test()
async def serve(dut: Any) -> None:
    """The request loop (the only 'test' of this module): runs until told to quit."""
    # The simulator's main made this process non-dumpable and tied it to the server's life
    # (parent-death signal) before anything else ran (rtl/sim/npu_sim_main.cpp).
    server = int(os.environ.get("NPU_SERVER_PID", "0"))
    if _orphaned(server):
        os._exit(0)
    main_loop = MainLoop()
    config = WorkerConfig.decode(main_loop.config()) if main_loop.available else WorkerConfig()
    worker = Worker(dut, config, main_loop)
    await worker.h.reset()
    # The boot state: every lease starts from it (the server makes a warm start's state the
    # pristine one instead). A model that cannot save (coverage builds) is replaced at a
    # lease end instead (npuemu.server.devices).
    if main_loop.savable:
        await worker.pristine_save(None, False)  # type: ignore[arg-type]
        worker.pristine_is_boot = True
    chan = BlockingChannel(socket.socket(fileno=main_loop.fd("ipc")))
    taps: list[Tap] = []
    if config.lockstep:  # launches that ended are checked before the next answer
        vetter = LaunchVetter(config.target)
        taps.append(LockstepTap(vetter, lambda: worker.pristine_is_boot))
    if config.taps:
        taps.append(ForwardTap(chan.send))
    worker.taps_on = bool(taps)
    if taps and main_loop.available:  # every ring request through the port, for the taps
        main_loop.set_handover(1)
    state_bytes = int(main_loop.state_bytes()) if main_loop.savable else 0
    chan.send(Hello(worker.h.cycles, main_loop.savable, state_bytes).encode())
    port = WorkerPort(worker, taps, DeviceWatch(worker, chan.send))
    await Loop(worker, port, chan, server).run()
