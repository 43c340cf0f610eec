"""Observers: an operator looks at a device someone else holds (the Observe* RPCs).

While a driver holds ``npu0``, its registers are out of everyone else's reach (every call
needs the lease). An operator with the admin credential (``npu-emu serve
--admin-token-file``, metadata ``x-npu-emu-admin``; `npuemu.server.auth.AdminCredential`)
may still read its registers and record a waveform window of what the holder does, without
the lease:

- **No lease is taken, used or touched.** The device is named, not leased; the holder's
  TTL, keep-alive and HoldLease stream are none of an observer's business (an observer's
  request under way does not count as the holder's use, `SimDevice.in_call`). The holder's
  requests are only delayed by the observer's sharing the simulator (one request at a
  time), as another request of its own would.
- **Reads only, through the same worker path.** An observer's requests are the worker
  requests a holder's are (`npuemu.worker.protocol`), marked ``read_only``: the worker
  itself refuses anything but register reads and the observer's own waveform window
  (`read_only_refusal`). Writes, masked writes and polls (a poll runs the clock for as
  long as it waits) are refused here first, the whole batch before any op runs.
- **Reads that are acts are refused.** A register whose read changes the device (RDL
  ``onread``, or ``swacc``: in this NPU the LO half of every 64-bit counter latches its HI
  half when read, which would tear a holder's LO-then-HI read) is not read for an
  observer (`xrt.hw.regs.read_side_effects`). A read costs the few bus cycles any read
  costs: simulated time moves by them, as for the holder's own reads.
- **Memory is not observable.** It belongs to the lease (the local fast path, the clearing
  at the lease end); an operator who needs it reads the registers that point at it.
- **Waveform windows.** ObserveStartWaves/ObserveWavesStatus/ObserveStopWaves advance no
  simulated time: the window fills as the holder's requests, and the engines they
  started, run. The holder goes first (its own StartWaves closes the observer's window,
  `npuemu.sim.waves`), and a lease end closes it before the device is cleared, so an
  observer's window never holds two leases' activity.
- **Logged.** Each access is one INFO line: who (client name and peer), which device and
  holder, what; each refusal a WARNING line (`npuemu.server.service._unary`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import cast

import grpc

from npuemu.server.auth import AdminCredential
from npuemu.server.debug_service import DebugDeviceService
from npuemu.server.devices import SimDevice
from npuemu.server.errors import ServiceError, check_register, clip
from npuemu.server.manager import DeviceManager
from npuemu.server.service import _unary
from npuemu.server.waves_service import MAX_WINDOW_CYCLES, signal_scopes
from xrt.hw.port import (
    RegBatch,
    RegResults,
    WavesStart,
    WavesState,
    WavesStatus,
    WavesStop,
    WavesWindow,
)
from xrt.hw.regops import MASK32, RegKind
from xrt.hw.regs import read_side_effects
from xrt.hw.wire import MAX_BATCH_OPS, DeviceState, pb
from xrt.regtrace import RegisterNamer

__all__ = ["ObserverDeviceService"]

log = logging.getLogger("npuemu.server")

LOGGED_NAMES = 4  # registers named in the log line of an observer's batch
MAX_STATUS_WAIT_MS = 60_000  # ObserveWavesStatus.wait_ms
STATUS_LOOK_S = 0.25  # while it waits: how often it asks the worker (no simulated time)

_STATE = {
    "none": pb.OBSERVER_WINDOW_STATE_NONE,
    "recording": pb.OBSERVER_WINDOW_STATE_RECORDING,
    "stopped": pb.OBSERVER_WINDOW_STATE_STOPPED,
    "full": pb.OBSERVER_WINDOW_STATE_FULL,
    "cut_by_holder": pb.OBSERVER_WINDOW_STATE_CUT_BY_HOLDER,
    "cut_by_lease_end": pb.OBSERVER_WINDOW_STATE_CUT_BY_LEASE_END,
}


class ObserverDeviceService(DebugDeviceService):
    """DeviceService with waveform windows and observers."""

    def __init__(
        self, manager: DeviceManager, waves_enabled: bool, admin_token: str | None = None
    ) -> None:
        super().__init__(manager, waves_enabled)
        self.admin = AdminCredential(admin_token)
        t = manager.target
        self._side_effects = read_side_effects(t.npu_base, t.dma_base)
        self._namer = RegisterNamer.for_target(t.name)

    # ------------------------------------------------------------------ admission
    def _admit(
        self, request, context: grpc.aio.ServicerContext, *, held: bool
    ) -> tuple[SimDevice, str]:
        """Check the admin credential and the device; return the device and who asks.

        With `held`, the device must be LEASED (reads and a new window look at a holder's
        device; a free one is opened normally, a resetting one has nothing to show).
        """
        what = f"observing {clip(request.device) or '(no device)'}"
        self.admin.check(context.invocation_metadata(), what)
        d = self.m.device(request.device)
        if held:
            if d.state == DeviceState.RESTARTING:
                raise d.restarting_error()
            if d.lease is None or d.state != DeviceState.LEASED:
                raise ServiceError(
                    grpc.StatusCode.FAILED_PRECONDITION,
                    f"{d.name} is {d.state.name.lower()}, held by nobody: an observer looks "
                    "at a held device (open a free one as usual: npu-emu regs read without "
                    "--observe)",
                )
        who = f"{clip(request.client) or 'anonymous'}@{clip(context.peer())}"
        return d, who

    def _log(self, who: str, d: SimDevice, what: str) -> None:
        holder = self.m.holder_of(d) or "nobody"
        log.info("observer %s on %s (held by %s): %s", who, d.name, holder, what)

    def _check_read(self, d: SimDevice, address: int, where: str = "") -> None:
        check_register(d.target, address)
        why = self._side_effects.get(address)
        if why:
            raise ServiceError(
                grpc.StatusCode.PERMISSION_DENIED,
                f"{where}{why}: an observer may not read it (it would change the holder's "
                "device; nothing was read)",
            )

    # ------------------------------------------------------------------ registers
    @_unary
    async def ObserveReadRegister(self, request, context):
        d, who = self._admit(request, context, held=True)
        self._check_read(d, request.address)
        self._log(who, d, f"read {self._namer.name(request.address)} ({request.address:#010x})")
        r = await d.observe(RegBatch.read(request.address), d.lease)
        ((status, value, _),) = r.body_as(RegResults)
        return pb.ObserveReadRegisterResponse(
            value=value,
            cycles=r.cycles,
            status=cast(pb.RegisterStatus, status),
            holder=self.m.holder_of(d),
        )

    @_unary
    async def ObserveRegisterBatch(self, request, context):
        d, who = self._admit(request, context, held=True)
        if len(request.ops) > MAX_BATCH_OPS:
            raise ServiceError(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"{len(request.ops)} ops in one batch; at most {MAX_BATCH_OPS}",
            )
        rows = []
        for i, op in enumerate(request.ops):
            kind = op.WhichOneof("op")
            if kind is None:
                raise ServiceError(grpc.StatusCode.INVALID_ARGUMENT, f"op {i} is empty")
            if kind != "read":
                raise ServiceError(
                    grpc.StatusCode.PERMISSION_DENIED,
                    f"op {i} is a {kind.replace('_', ' ')}: an observer only reads registers "
                    "(nothing of the batch was run)",
                )
            try:
                self._check_read(d, op.read.address)
            except ServiceError as exc:
                raise ServiceError(exc.code, f"op {i}: {exc.message}") from None
            rows.append((RegKind.READ, op.read.address, 0, MASK32, 0, 0))
        names = [self._namer.name(row[1]) for row in rows[:LOGGED_NAMES]]
        more = f", ... ({len(rows)} in all)" if len(rows) > LOGGED_NAMES else ""
        self._log(who, d, f"read {', '.join(names) or 'nothing'}{more}")
        r = await d.observe(RegBatch.of_rows(rows), d.lease)
        response = pb.ObserveRegisterBatchResponse(cycles=r.cycles, holder=self.m.holder_of(d))
        for s, v, _ in r.body_as(RegResults):
            response.results.add(status=s, value=v)
        return response

    # ------------------------------------------------------------------ waveforms
    @_unary
    async def ObserveStartWaves(self, request, context):
        d, who = self._admit(request, context, held=True)
        self._check_enabled()
        if request.cycles > MAX_WINDOW_CYCLES:
            raise ServiceError(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"cycles {request.cycles} is more than {MAX_WINDOW_CYCLES}",
            )
        signals = signal_scopes(request.signals)
        length = f"{request.cycles} cycles" if request.cycles else "until stopped"
        self._log(who, d, f"start a waveform window ({length})")
        r = await d.observe(WavesStart(request.cycles, signals), d.lease)
        return pb.ObserveStartWavesResponse(cycles=r.cycles, holder=self.m.holder_of(d))

    @_unary
    async def ObserveWavesStatus(self, request, context):
        d, who = self._admit(request, context, held=False)
        self._check_enabled()
        if request.wait_ms > MAX_STATUS_WAIT_MS:
            raise ServiceError(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"wait_ms {request.wait_ms} is more than {MAX_STATUS_WAIT_MS}",
            )
        wait_s = request.wait_ms / 1000
        remaining = context.time_remaining()
        if remaining is not None:
            wait_s = max(0.0, min(wait_s, remaining - 0.1))
        how = f", waiting up to {wait_s:.1f} s for it to end" if wait_s else ""
        self._log(who, d, f"look at its waveform window{how}")
        # Each look is a worker request that runs no simulated time; between looks the
        # holder's requests (and busy engines) fill the window.
        deadline = time.monotonic() + wait_s
        r = await d.observe(WavesStatus(), None)
        while r.body_as(WavesState).state == "recording" and time.monotonic() < deadline:
            await asyncio.sleep(min(STATUS_LOOK_S, max(0.0, deadline - time.monotonic())))
            r = await d.observe(WavesStatus(), None)
        status = r.body_as(WavesState)
        return pb.ObserveWavesStatusResponse(
            state=_STATE[status.state],
            first_cycle=status.first,
            cycles=r.cycles,
            holder=self.m.holder_of(d),
        )

    @_unary
    async def ObserveStopWaves(self, request, context):
        d, who = self._admit(request, context, held=False)
        self._check_enabled()
        self._log(who, d, "stop its waveform window")
        r = await d.observe(WavesStop(), None)
        window = r.body_as(WavesWindow)
        if window.file is None:
            raise ServiceError(
                grpc.StatusCode.FAILED_PRECONDITION,
                f"no observer's waveform window was started on {d.name}",
            )
        return pb.ObserveStopWavesResponse(
            file=self._wave_file(window.file), cycles=r.cycles, state=_STATE[window.state]
        )
