"""What the simulated device does for each request of the device port (`xrt.hw.port`): one
handler per request type, over one harness (`npuemu.sim.harness.NpuHarness`).

`Worker.handlers` is the table `npuemu.worker.port.WorkerPort` dispatches with. A handler
takes the request and whether it is an observer's (read-only: its waveform window is the
observer's, not the holder's) and returns the reply's body. A failure the caller must fix
raises a `PortRefusal` carrying its `PortErrorCode`.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from cocotb.triggers import (
    FallingEdge,
    First,
    NextTimeStep,
    ReadWrite,
    Timer,
    current_gpi_trigger,
)
from cocotb.utils import get_sim_time

from npuemu.sim.harness import NpuHarness
from npuemu.sim.waves import HOLDER, OBSERVER, WaveRecorder, WavesUnavailableError
from npuemu.worker.config import WorkerConfig
from npuemu.worker.mainloop import MainLoop, receive_fds, remap_memory
from npuemu.worker.protocol import STATE_SLACK_BYTES
from xrt.hw.port import (
    Advance,
    Done,
    ModelRestore,
    ModelSave,
    PortErrorCode,
    PristineRestore,
    PristineSave,
    RegBatch,
    RegResults,
    Remap,
    ReplyBody,
    Request,
    Reset,
    RingAttach,
    RingDetach,
    StateSaved,
    StateTime,
    TapFlush,
    WaitIrq,
    WaitResult,
    WatchRings,
    WavesForget,
    WavesStart,
    WavesState,
    WavesStatus,
    WavesStop,
    WavesWindow,
)
from xrt.hw.targets import CLOCK_PERIOD_PS

__all__ = ["DeviceBusyError", "ModelStateError", "PortRefusal", "Worker"]

Handler = Callable[[Any, bool], Awaitable[ReplyBody]]


class PortRefusal(Exception):  # noqa: N818 - a refusal, not an error of ours
    """A request the caller must fix (or the model cannot do): `code` says which."""

    code = PortErrorCode.BAD_REQUEST


class DeviceBusyError(PortRefusal):
    """A state saved or restored while an engine runs (the state would be half a transfer)."""

    code = PortErrorCode.BUSY


class ModelStateError(PortRefusal):
    """A model state that is not one of this model's (the simulator's check says why)."""

    code = PortErrorCode.BAD_STATE


class UnsupportedError(PortRefusal):
    """The model cannot do it (built without --savable, without the ring service)."""

    code = PortErrorCode.UNSUPPORTED


class Worker:
    """Request handlers over one harness (the register master is the RTL one inside the
    simulation, or cocotbext-axi's: `WorkerConfig.reg_master`)."""

    def __init__(self, dut: Any, config: WorkerConfig, main_loop: MainLoop) -> None:
        self.dut = dut
        self.config = config
        self.main_loop = main_loop
        self.h = NpuHarness(dut, CLOCK_PERIOD_PS, master=config.reg_master)
        self._waves: WaveRecorder | None = None
        self._busy_h = dut.busy_o
        self.engine_busy = bit_reader(self._busy_h)
        self.pristine_is_boot = True  # the state leases start from is the boot state
        self.taps_on = False  # taps need every ring request handed over (sim_main sets it)
        self.log_followed = False  # someone follows the device's log (WatchRings)
        self.handlers: dict[type[Request], Handler] = {
            RegBatch: self.batch,
            WaitIrq: self.wait_irq,
            Reset: self.reset,
            ModelSave: self.model_save,
            ModelRestore: self.model_restore,
            PristineSave: self.pristine_save,
            PristineRestore: self.pristine_restore,
            Remap: self.remap,
            RingAttach: self.ring_attach,
            RingDetach: self.ring_detach,
            WavesStart: self.waves_start,
            WavesStop: self.waves_stop,
            WavesStatus: self.waves_status,
            WavesForget: self.waves_forget,
            Advance: self.advance,
            TapFlush: self.done,
            WatchRings: self.watch_rings,
        }

    # ------------------------------------------------------------------ registers, waits
    async def batch(self, req: RegBatch, read_only: bool = False) -> RegResults:
        """The whole batch is one hand-over to the register bus master in the simulation."""
        try:
            return RegResults(await self.h.master.run_records(req.records, req.n))
        except ValueError as exc:  # a field out of range (the master checks them)
            raise PortRefusal(str(exc)) from None

    async def wait_irq(self, req: WaitIrq, read_only: bool = False) -> WaitResult:
        w = await self.h.wait_irq(req.max_cycles, req.wall_s)
        return WaitResult(int(w.outcome), w.cycles)

    async def reset(self, req: Reset, read_only: bool = False) -> Done:
        await self.h.reset()
        return Done()

    async def done(self, req: Request, read_only: bool = False) -> Done:
        return Done()

    async def watch_rings(self, req: WatchRings, read_only: bool = False) -> Done:
        """Hand ring requests to the port while the device's log is followed (its watch
        sees them then), or while taps are on."""
        self.log_followed = req.on
        if self.main_loop.available:
            self.main_loop.set_handover(1 if req.on or self.taps_on else 0)
        return Done()

    async def advance(self, req: Advance, read_only: bool = False) -> Done:
        """Replay: run the clock to the instant `to_ps` (None: stay there), and end after
        that instant's evaluation, where a request woken from idle starts (the main loop
        wakes Python after evaluating the time step), so the next request starts exactly
        where the recorded one did. A timer fires before its instant's evaluation: then
        wait for that evaluation (ReadWrite, the same instant)."""
        now = int(get_sim_time("ps"))
        if req.to_ps is not None and req.to_ps > now:
            await Timer(req.to_ps - now, unit="ps")
        if isinstance(current_gpi_trigger(), (Timer, NextTimeStep)):
            await ReadWrite()
        return Done()

    # ------------------------------------------------------------------ memories and rings
    async def remap(self, req: Remap, read_only: bool = False) -> Done:
        (fd,) = receive_fds(self.main_loop.fd("fdchan"), 1, "a memory file")
        try:
            remap_memory(req.old, fd)
        finally:
            os.close(fd)
        return Done()

    async def ring_attach(self, req: RingAttach, read_only: bool = False) -> Done:
        fds = receive_fds(
            self.main_loop.fd("fdchan"), 4, "the ring and its kick, done and revoke eventfds"
        )
        refusal = (
            "this model's main loop serves no register ring"
            if not self.main_loop.available
            else "the register master is cocotbext-axi's (requests go through Python)"
            if self.h.master_name != "regbus"
            else ""
        )
        if refusal:
            for fd in fds:
                os.close(fd)
            raise UnsupportedError(refusal)
        got = self.main_loop.ring_attach(req.slot, *fds)  # takes the descriptors
        if got != 0:
            raise OSError(-got, f"cannot attach the register ring: {os.strerror(-got)}")
        return Done()

    async def ring_detach(self, req: RingDetach, read_only: bool = False) -> Done:
        if self.main_loop.available:
            self.main_loop.ring_detach(req.slot)
        return Done()

    # ------------------------------------------------------------------ the model's state
    async def model_save(self, req: ModelSave, read_only: bool = False) -> StateSaved:
        """Save the model's state into `req.path` at a quiescent point (`_quiesce`); with
        `req.read`, then read those registers (a checkpoint's configuration registers) and
        put the saved state back, so the save leaves the model as it was."""
        loop = self._savable_loop()
        await self._quiesce(req.max_cycles)
        got = loop.model_save(os.fsencode(req.path))
        if got != 0:
            raise OSError(-got, f"model_save {req.path}: {os.strerror(-got)}")
        saved_at = int(get_sim_time("ps"))
        if not req.read:
            return StateSaved(saved_at)
        results = await self.h.master.run_records(RegBatch.of_rows(
            [(0, a, 0, 0xFFFF_FFFF, 0, 0) for a in req.read]).records, len(req.read))  # fmt: skip
        await self._restore_file(req.path)
        return StateSaved(saved_at, tuple((s, v) for s, v, _ in RegResults(results)))

    async def model_restore(self, req: ModelRestore, read_only: bool = False) -> StateTime:
        """Restore the state in `req.path` (engines idle): read with its size bounded, and
        checked by the simulator against the model's own layout before Verilator reads it
        (rtl/sim/npu_model_state.h)."""
        self._savable_loop()
        await self._quiesce(0)
        await self._restore_file(req.path)
        return StateTime(int(get_sim_time("ps")))

    async def pristine_save(self, req: PristineSave, read_only: bool = False) -> StateTime:
        """The state now becomes the one every lease starts from (after a warm start)."""
        got = await self._pristine(save=True)
        self.pristine_is_boot = False
        return got

    async def pristine_restore(self, req: PristineRestore, read_only: bool = False) -> StateTime:
        """Back to the state every lease starts from: every flop and SRAM as they were,
        whatever the reset tree clears. No idle engine needed: the state replaces all of it
        (the server has cancelled the request in flight)."""
        got = await self._pristine(save=False)
        self.h.master.restored()
        return got

    async def _pristine(self, *, save: bool) -> StateTime:
        loop = self._savable_loop()
        await self._low_half()
        got = loop.pristine_save() if save else loop.pristine_restore()
        if got != 0:
            raise OSError(-got, f"pristine {'save' if save else 'restore'}: {os.strerror(-got)}")
        return StateTime(int(get_sim_time("ps")))

    async def _quiesce(self, max_cycles: int) -> None:
        """Engines idle (waiting up to `max_cycles` for them), then the low half of a clock
        cycle (no edge is made or lost; the state is the one the last rising edge left)."""
        if self.engine_busy() and max_cycles > 0:
            await First(FallingEdge(self._busy_h), Timer(max_cycles * CLOCK_PERIOD_PS, unit="ps"))
        if self.engine_busy():
            raise DeviceBusyError(
                "an engine is running (STATUS.DMA_BUSY or COMPUTE_BUSY): a checkpoint is taken "
                "or restored with the engines idle; wait for the transfer or program to end"
                + (f" (waited {max_cycles} cycles)" if max_cycles else "")
            )
        await self._low_half()

    async def _restore_file(self, path: str) -> None:
        loop = self.main_loop
        state = _read_bounded(path, loop.state_bytes() + STATE_SLACK_BYTES)
        await self._low_half()
        got = loop.model_restore(state, len(state))
        if got == -errno.EINVAL:
            raise ModelStateError(
                f"the model state is not this model's: {loop.model_error().decode()}"
            )
        if got != 0:
            raise OSError(-got, f"model_restore {path}: {os.strerror(-got)}")
        self.h.master.restored()

    def _savable_loop(self) -> MainLoop:
        if not self.main_loop.savable:
            raise UnsupportedError("this model cannot save its state (built without --savable)")
        return self.main_loop

    async def _low_half(self) -> None:
        if self.h.clock.value:  # the low half of a cycle: nothing changes until it rises
            await FallingEdge(self.h.clock)

    # ------------------------------------------------------------------ waveform windows
    # None of these advances simulated time. A read-only request's window is the
    # observer's, any other's the holder's (`npuemu.sim.waves`).
    def waves(self) -> WaveRecorder:
        """The waveform recorder (a traced model and a waves folder from the server)."""
        if self._waves is None:
            if not self.config.waves_dir:
                raise WavesUnavailableError("the server was started without --waves DIR")
            clock = f"{self.dut._path}.clk_o"
            self._waves = WaveRecorder(
                Path(self.config.waves_dir), self.config.device, clock, CLOCK_PERIOD_PS
            )
        return self._waves

    async def waves_start(self, req: WavesStart, read_only: bool = False) -> Done:
        owner = OBSERVER if read_only else HOLDER
        self.waves().start(self.h.cycles * CLOCK_PERIOD_PS, req.cycles, owner, req.signals)
        return Done()

    async def waves_stop(self, req: WavesStop, read_only: bool = False) -> WavesWindow:
        rec = self.waves()
        window = rec.finish(OBSERVER if read_only else HOLDER)
        state = rec.state() if read_only else ""
        if window is None:
            return WavesWindow(None, state)
        return WavesWindow((str(window.path), window.first_cycle, window.last_cycle), state)

    async def waves_status(self, req: WavesStatus, read_only: bool = False) -> WavesState:
        rec = self.waves()
        return WavesState(rec.state(), rec.observer_first_cycle())

    async def waves_forget(self, req: WavesForget, read_only: bool = False) -> Done:
        if self._waves is not None:
            self._waves.forget()
        return Done()

    def close_waves(self) -> None:
        """Name a window left open (the worker quits)."""
        if self._waves is not None:
            self._waves.close_all()


def _read_bounded(path: str, limit: int) -> bytes:
    """The bytes of the file at `path`, refused when it holds more than `limit`."""
    with open(path, "rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise ModelStateError(f"the model state is larger than this model's ({limit} bytes)")
    return data


def bit_reader(handle: Any) -> Callable[[], bool]:
    """A function that tells whether the one-bit signal `handle` is 1.

    cocotb's ``handle.value`` reads the signal as a binary string and builds a `Logic`
    from it: about 2 us per look, against 0.15 us for the GPI object's integer read
    (``get_signal_val_long``, what cocotb's own integer handles use; measured by
    bench/probe_worker_request.py), and the worker looks after every request. Verilator's
    signals are two-state, so the integer read loses nothing. Falls back to
    ``handle.value`` where the GPI object lacks it (another cocotb).
    """
    read_long = getattr(getattr(handle, "_handle", None), "get_signal_val_long", None)
    if read_long is None:
        return lambda: bool(handle.value)
    return lambda: read_long() != 0
