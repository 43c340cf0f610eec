"""The device port inside the simulator process: the one place where every request meets
the model, whatever route brought it (docs/architecture.md, "The device port").

`WorkerPort.serve` takes a request record (`xrt.hw.port`) from any route (the pipe from the
server or a replay; a register ring's request the simulator handed over while taps are
on), gates an observer's request (read-only), dispatches it by its type to the worker's
handler (`npuemu.worker.handlers.Worker.handlers`), and builds the typed reply: its body, or
a `PortError` whose code says why it failed. Then every tap sees it (`Served`):

- `LockstepTap` (``serve --lockstep``): checks every launch of the compute engine that
  ended against the golden model, and fails the request that ended it on a divergence;
- `ForwardTap` (a server that records or traces): sends the `Served` record to the server
  (an ``{"ev": "served"}`` frame on the pipe, in order with the replies), where the
  device hands it to the lease's recording and the register trace
  (`npuemu.server.devices.SimDevice`).

After the taps, the port's watch (`npuemu.worker.device_watch.DeviceWatch`) sends the
device's own events (interrupts, engine and DMA errors, resets) for its log.

A new route is a new caller of `serve`; a new tap is one class with ``__call__``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol

from cocotb.utils import get_sim_time

from npuemu.sim import assertions
from npuemu.sim.lockstep import LaunchVetter
from npuemu.sim.waves import WavesUnavailableError
from npuemu.worker.handlers import PortRefusal, Worker
from xrt.hw.port import (
    ModelRestore,
    PortError,
    PortErrorCode,
    PristineRestore,
    Reply,
    Request,
    Route,
    Served,
    read_only_refusal,
)
from xrt.hw.port_pipe import encode_reply, encode_request
from xrt.hw.regs import read_side_effects
from xrt.hw.targets import CLOCK_PERIOD_PS, target

__all__ = ["ForwardTap", "LockstepTap", "Tap", "WorkerPort", "encode_served"]

log = logging.getLogger("npuemu.worker")


class Tap(Protocol):
    """Sees every request served; may return another reply for it (a lockstep failure)."""

    def __call__(self, served: Served) -> Reply | None: ...


class WorkerPort:
    """Requests to the model (see the module docstring)."""

    def __init__(
        self, worker: Worker, taps: list[Tap], watch: Callable[[Served], None] | None = None
    ) -> None:
        self.worker = worker
        self.taps = taps
        self.watch = watch  # the device's own log lines (npuemu.worker.device_watch)
        cfg = target(worker.config.target)
        # Registers an observer's read-only requests may not read (their read is an act).
        self.read_side_effects = read_side_effects(cfg.npu_base, cfg.dma_base)

    async def serve(
        self, req_id: int, request: Request, route: Route = Route.PIPE, read_only: bool = False
    ) -> Reply:
        """Run `request` on the model; its reply, after every tap has seen it."""
        started = int(get_sim_time("ps"))  # where a recording pins the request
        error = None
        body = None
        if assertions.count():  # failed between requests, or named by a ring's reply
            error = await self.assertion_failed()
            if error is not None:  # the device broke while no request ran: this one sees it
                reply = Reply(req_id, self.worker.h.cycles, started, None, error)
                return self.tap(Served(request, reply, route, read_only))
        if read_only and (why := read_only_refusal(request, self.read_side_effects)):
            # The server checks first: this is the gate, should the server not.
            log.error("refused a read-only request %s: %s", request.TAG, why)
            error = PortError(PortErrorCode.READ_ONLY, f"refused on the read-only path: {why}")
        else:
            try:
                body = await self.worker.handlers[type(request)](request, read_only)
            except PortRefusal as exc:
                error = PortError(exc.code, str(exc))
            except WavesUnavailableError as exc:
                error = PortError(PortErrorCode.WAVES_UNAVAILABLE, str(exc))
            except Exception as exc:  # the worker's own failure: logged, answered, survived
                log.exception("request %s failed", request.TAG)
                error = PortError(PortErrorCode.INTERNAL, f"{type(exc).__name__}: {exc}")
        if assertions.count():
            fired = await self.assertion_failed()
            if fired is not None:
                body, error = None, fired
        reply = Reply(req_id, self.worker.h.cycles, started, body, error)
        reply = self.tap(Served(request, reply, route, read_only))
        if self.watch is not None:
            self.watch(Served(request, reply, route, read_only))
        return reply

    async def assertion_failed(self) -> PortError | None:
        """After an RTL assertion failed (npuemu.sim.assertions): the device error naming
        the first failure no reply has named yet (None when a ring's reply named it), and
        a device reset, so the next request finds a sound device."""
        fresh = assertions.unreported()
        error = None
        if fresh:
            first = fresh[0]
            more = f" (and {len(fresh) - 1} more)" if len(fresh) > 1 else ""
            why = f"device error: {first.describe(CLOCK_PERIOD_PS)}{more}"
            log.error("%s; resetting the device", why)
            error = PortError(PortErrorCode.INTERNAL, why)
        await self.worker.h.reset()  # clears the records too
        return error

    def tap(self, served: Served) -> Reply:
        """Hand `served` to every tap (in order); the reply as the taps leave it."""
        for tap in self.taps:
            changed = tap(served)
            if changed is not None:
                served = Served(served.request, changed, served.route, served.read_only)
        return served.reply


class LockstepTap:
    """``serve --lockstep``: launches that ended are checked against the golden model
    before the request that ended them is answered (`npuemu.sim.lockstep.LaunchVetter`)."""

    def __init__(self, vetter: LaunchVetter, pristine_is_boot: Callable[[], bool]) -> None:
        self.vetter = vetter
        self.pristine_is_boot = pristine_is_boot

    def __call__(self, served: Served) -> Reply | None:
        request, reply = served.request, served.reply
        if isinstance(request, ModelRestore):
            self.vetter.forget()
        elif isinstance(request, PristineRestore) and reply.ok:
            self.vetter.restart(fresh=self.pristine_is_boot())
        why = self.vetter.divergence()
        if why is None or not reply.ok:
            return None
        return Reply(
            reply.id, reply.cycles, reply.start_ps, None, PortError(PortErrorCode.INTERNAL, why)
        )


class ForwardTap:
    """Sends every request served to the server (a recording or a register trace there)."""

    def __init__(self, send: Callable[[dict[str, Any]], None]) -> None:
        self.send = send

    def __call__(self, served: Served) -> Reply | None:
        self.send(encode_served(served))
        return None


def encode_served(served: Served) -> dict[str, Any]:
    """The ``served`` event's map (`npuemu.server.taps.decode_served` reads it)."""
    return {
        "ev": "served",
        "route": int(served.route),
        "request": encode_request(0, served.request, read_only=served.read_only),
        "reply": encode_reply(served.reply),
    }
