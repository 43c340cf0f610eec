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
and writes itself. The memory files have no name: the simulator's main receives them from
the server at start (after making the process non-dumpable and proving its pid; see
`npuemu.server.worker_process`), and they come over NPU_WORKER_FD_CHANNEL when the server
renews one.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import logging
import mmap
import os
import socket
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import cocotb
from cocotb.triggers import (
    Edge,
    FallingEdge,
    First,
    NextTimeStep,
    ReadWrite,
    Timer,
    current_gpi_trigger,
)
from cocotb.utils import get_sim_time

from npuemu.sim.harness import NpuHarness
from npuemu.sim.lockstep import LaunchVetter
from npuemu.sim.waves import HOLDER, OBSERVER, WaveRecorder, WavesUnavailableError
from npuemu.worker.protocol import (
    STATE_SLACK_BYTES,
    BlockingChannel,
    ChannelClosedError,
    Op,
    Refusal,
    read_only_refusal,
)
from xrt.hw.regops import RegKind, RegRow
from xrt.hw.regs import read_side_effects
from xrt.hw.ring import RingSlot
from xrt.hw.targets import CLOCK_PERIOD_PS, target

log = logging.getLogger("npuemu.worker")

BUSY_SLICE_CYCLES = 2048  # while an engine runs: cycles between looks at the socket
WATCH_SLICE_CYCLES = 4096  # while a request runs: cycles between looks for a cancel
WATCHED_OPS = (
    Op.BATCH,
    Op.WAIT_IRQ,
    Op.MODEL_SAVE,
    Op.MODEL_RESTORE,
)  # requests that may run long: cancellable
_MAP_FIXED = 0x10


def remap_memory(old: tuple[int, int], fd: int) -> None:
    """Map memory file `fd` over the mapping(s) of the file `old` (device, inode) in this
    process, at the same address (MAP_FIXED), so the DPI-C memory model's pointers stay
    valid. Runs between requests (the simulation is frozen). The server uses it to give
    each lease a fresh ``udma`` file."""
    dev, ino = old
    spans = []
    for line in Path("/proc/self/maps").read_text().splitlines():
        parts = line.split(maxsplit=5)  # range perms offset major:minor inode [path]
        if len(parts) < 5 or int(parts[4]) != ino:
            continue
        major, minor = (int(x, 16) for x in parts[3].split(":"))
        if os.makedev(major, minor) == dev:
            start, end = (int(x, 16) for x in parts[0].split("-"))
            spans.append((start, end, int(parts[2], 16)))
    if not spans:
        raise ValueError(f"memory file (device {dev}, inode {ino}) is not mapped in this worker")
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [
        ctypes.c_void_p,
        ctypes.c_size_t,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_long,
    ]
    for start, end, offset in spans:
        got = libc.mmap(
            start,
            end - start,
            mmap.PROT_READ | mmap.PROT_WRITE,
            mmap.MAP_SHARED | _MAP_FIXED,
            fd,
            offset,
        )
        if got != start:
            err = ctypes.get_errno()
            raise OSError(err, f"cannot map the new memory at {start:#x}: {os.strerror(err)}")


def receive_fds(count: int, what: str) -> list[int]:
    """`count` descriptors the server sent over NPU_WORKER_FD_CHANNEL (SCM_RIGHTS)."""
    with socket.socket(fileno=os.dup(int(os.environ["NPU_WORKER_FD_CHANNEL"]))) as chan:
        _, fds, _, _ = socket.recv_fds(chan, 16, count)
    if len(fds) != count:
        for fd in fds:
            os.close(fd)
        raise ValueError(f"expected {count} descriptor(s) ({what}) from the server, got {len(fds)}")
    return fds


class MainLoop:
    """The harness main loop's own services (rtl/sim/npu_ring_service.h), when the model was
    built with them (npu_sim: idle time and the register ring are the main loop's)."""

    def __init__(self) -> None:
        lib = ctypes.CDLL(None)  # the simulator executable itself
        self.available = hasattr(lib, "npu_worker_idle_begin")
        if not self.available:
            return
        self.idle_begin = lib.npu_worker_idle_begin
        self.idle_begin.argtypes = (ctypes.c_int,)
        self.idle_begin.restype = None
        self.ring_attach = lib.npu_worker_ring_attach
        self.ring_attach.argtypes = (ctypes.c_int,) * 5  # slot, file, kick, done, revoke
        self.ring_attach.restype = ctypes.c_int
        self.ring_detach = lib.npu_worker_ring_detach
        self.ring_detach.argtypes = (ctypes.c_int,)  # slot
        self.ring_detach.restype = None
        self.savable = hasattr(lib, "npu_worker_model_save")  # built with --savable
        if self.savable:  # rtl/sim/npu_sim_main.cpp, npu_model_state.h
            self.model_save = lib.npu_worker_model_save
            self.model_save.argtypes = (ctypes.c_char_p,)
            self.model_restore = lib.npu_worker_model_restore
            self.model_restore.argtypes = (ctypes.c_char_p, ctypes.c_size_t)
            self.model_error = lib.npu_worker_model_error
            self.model_error.argtypes = ()
            self.model_error.restype = ctypes.c_char_p
            self.pristine_save = lib.npu_worker_pristine_save
            self.pristine_restore = lib.npu_worker_pristine_restore
            self.state_bytes = lib.npu_worker_state_bytes
            self.state_bytes.restype = ctypes.c_ulonglong
            for fn in (self.model_save, self.model_restore, self.pristine_save,
                       self.pristine_restore):  # fmt: skip
                fn.restype = ctypes.c_int


class DeviceBusyError(RuntimeError):
    """A checkpoint asked for while an engine runs (the state would be half a transfer)."""

    refusal = Refusal.BUSY


class ModelStateError(ValueError):
    """A model state that is not one of this model's (the simulator's check says why)."""

    refusal = Refusal.BAD_STATE


def failed_reply(exc: Exception) -> dict[str, Any]:
    """The reply fields of a request that raised `exc`."""
    out: dict[str, Any] = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    refusal = getattr(exc, "refusal", None)
    if refusal is not None:
        out["refusal"] = str(refusal)
        out["error"] = str(exc)
    return out


class Worker:
    """Request handlers over one harness.

    The register master is the RTL one inside the simulation; NPU_EMU_REG_MASTER=cocotbext
    selects cocotbext-axi's instead (the reference, for comparisons in benches).
    """

    def __init__(self, dut: Any) -> None:
        self.dut = dut
        master = os.environ.get("NPU_EMU_REG_MASTER", "auto")
        self.h = NpuHarness(dut, CLOCK_PERIOD_PS, master=master)
        self._waves: WaveRecorder | None = None
        self._server = int(os.environ.get("NPU_SERVER_PID", "0"))
        self._busy_h = dut.busy_o
        self._wake_h = getattr(dut, "host_wake_i", None)
        self.engine_busy = _bit_reader(self._busy_h)
        cfg = target(os.environ.get("NPU_TARGET", "buyi"))
        # Registers an observer's read-only requests may not read (their read is an act).
        self.read_side_effects = read_side_effects(cfg.npu_base, cfg.dma_base)
        self.main_loop = MainLoop()
        # Replay (npuemu.replay): time runs only when a request asks (Op.ADVANCE), never
        # while the worker waits for one, so every request starts where the replay says.
        self.frozen_idle = os.environ.get("NPU_EMU_FROZEN_IDLE", "0") == "1"
        self.pristine_is_boot = True  # the state leases start from is the boot state

    async def advance_to(self, to_ps: int | None) -> None:
        """Replay: run the clock to the instant `to_ps` (None: stay there), and end after
        that instant's evaluation, where a request woken from idle starts (the main loop
        wakes Python after evaluating the time step), so the next request starts exactly
        where the recorded one did. A timer fires before its instant's evaluation: then
        wait for that evaluation (ReadWrite, the same instant)."""
        now = int(get_sim_time("ps"))
        if to_ps is not None and to_ps > now:
            await Timer(to_ps - now, unit="ps")
        if isinstance(current_gpi_trigger(), (Timer, NextTimeStep)):
            await ReadWrite()

    def waves(self) -> WaveRecorder:
        """The waveform recorder (a traced model and NPU_EMU_WAVES_DIR set by the server)."""
        if self._waves is None:
            folder = os.environ.get("NPU_EMU_WAVES_DIR")
            if not folder:
                raise WavesUnavailableError("the server was started without --waves DIR")
            device = os.environ.get("NPU_DEVICE", "npu")
            clock = f"{self.dut._path}.clk_o"
            self._waves = WaveRecorder(Path(folder), device, clock, CLOCK_PERIOD_PS)
        return self._waves

    def handle_waves(self, op: str, req: dict[str, Any]) -> dict[str, Any]:
        """Waveform windows; none of these advances simulated time. A read-only request's
        window is the observer's, any other's the holder's (`npuemu.sim.waves`)."""
        owner = OBSERVER if req.get("read_only") else HOLDER
        if op == Op.WAVES_START:
            self.waves().start(self.h.cycles * CLOCK_PERIOD_PS, req["cycles"], owner)
            return {}
        if op == Op.WAVES_FORGET:
            if self._waves is not None:
                self._waves.forget()
            return {}
        rec = self.waves()
        if op == Op.WAVES_STATUS:
            return {"state": rec.state(), "first": rec.observer_first_cycle()}
        window = rec.finish(owner)  # waves_stop
        reply: dict[str, Any] = {"state": rec.state()} if owner == OBSERVER else {}
        if window is None:
            return {**reply, "file": None}
        return {**reply, "file": (str(window.path), window.first_cycle, window.last_cycle)}

    async def handle(self, req: dict[str, Any]) -> dict[str, Any]:
        op = req["op"]
        h = self.h
        if op == Op.RESET:
            await h.reset()
            return {}
        if op == Op.READ_REG:
            ((status, value, _),) = await h.run_rows([RegRow(RegKind.READ, req["addr"])])
            return {"status": status, "value": value}
        if op == Op.WRITE_REG:
            row = RegRow(RegKind.WRITE, req["addr"], req["value"])
            ((status, _, _),) = await h.run_rows([row])
            return {"status": status}
        if op == Op.BATCH:
            return {"results": await self.batch(req["ops"])}
        if op == Op.REMAP:
            (fd,) = receive_fds(1, "a memory file")
            try:
                remap_memory(tuple(req["old"]), fd)
            finally:
                os.close(fd)
            return {}
        if op == Op.RING_ATTACH:
            fds = receive_fds(4, "the ring and its kick, done and revoke eventfds")
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
                raise ValueError(refusal)
            slot = RingSlot(req.get("slot", RingSlot.LEASE))
            got = self.main_loop.ring_attach(slot, *fds)  # takes the descriptors
            if got != 0:
                raise OSError(-got, f"cannot attach the register ring: {os.strerror(-got)}")
            return {}
        if op == Op.RING_DETACH:
            if self.main_loop.available:
                self.main_loop.ring_detach(RingSlot(req.get("slot", RingSlot.LEASE)))
            return {}
        if op in (Op.MODEL_SAVE, Op.MODEL_RESTORE):
            return await self.model_state(
                op, req["path"], req.get("max_cycles", 0), req.get("read", ())
            )
        if op in (Op.PRISTINE_SAVE, Op.PRISTINE_RESTORE):
            return await self.pristine(op == Op.PRISTINE_SAVE)
        if op.startswith("waves_"):
            try:
                return self.handle_waves(op, req)
            except WavesUnavailableError as exc:
                return {"waves_error": str(exc)}
        if op == Op.WAIT_IRQ:
            w = await h.wait_irq(req["max_cycles"], req["wall_s"])
            return {"outcome": int(w.outcome), "waited": w.cycles}
        if op == Op.ADVANCE:
            await self.advance_to(req.get("to_ps"))
            return {}
        raise ValueError(f"unknown worker request {op!r}")

    def _clock_high(self) -> bool:
        return bool(self.h.clock.value)

    async def model_state(
        self, op: str, path: str, max_cycles: int, read: Sequence[int] = ()
    ) -> dict[str, Any]:
        """Save the model's state into `path`, or restore it from there (a checkpoint,
        `npuemu.server.checkpoint`), at a quiescent point: engines idle (waiting up to
        `max_cycles` for them), in the low half of a clock cycle (no edge is made or lost;
        the state is the one the last rising edge left). A state to restore is read with
        its size bounded and checked by the simulator against the model's own layout
        before Verilator reads it (rtl/sim/npu_model_state.h).

        A save with `read` then reads those registers (a checkpoint's configuration
        registers) and puts the saved state back, so the save leaves the model as it was:
        the reply's ``registers`` holds (status, value) per address."""
        loop = self._savable_loop()
        if self.engine_busy() and max_cycles > 0:
            await First(FallingEdge(self._busy_h), Timer(max_cycles * CLOCK_PERIOD_PS, unit="ps"))
        if self.engine_busy():
            raise DeviceBusyError(
                "an engine is running (STATUS.DMA_BUSY or COMPUTE_BUSY): a checkpoint is taken "
                "or restored with the engines idle; wait for the transfer or program to end"
                + (f" (waited {max_cycles} cycles)" if max_cycles else "")
            )
        state = (
            _read_bounded(path, loop.state_bytes() + STATE_SLACK_BYTES)
            if (op == Op.MODEL_RESTORE)
            else b""
        )
        await self._low_half()
        if op == Op.MODEL_SAVE:
            got = loop.model_save(os.fsencode(path))
            if got == 0 and read:
                saved_at = int(get_sim_time("ps"))
                rows = [RegRow(RegKind.READ, a) for a in read]
                registers = [(s, v) for s, v, _ in await self.h.run_rows(rows)]
                state = _read_bounded(path, loop.state_bytes() + STATE_SLACK_BYTES)
                await self._low_half()
                if loop.model_restore(state, len(state)) != 0:
                    raise ModelStateError(f"the state just saved: {loop.model_error().decode()}")
                self.h.master.restored()
                return {"time_ps": saved_at, "registers": registers}
        else:
            got = loop.model_restore(state, len(state))
            if got == -errno.EINVAL:
                raise ModelStateError(
                    f"the model state is not this model's: {loop.model_error().decode()}"
                )
            if got == 0:
                self.h.master.restored()
        if got != 0:
            raise OSError(-got, f"{op} {path}: {os.strerror(-got)}")
        return {"time_ps": int(get_sim_time("ps"))}

    async def pristine(self, save: bool) -> dict[str, Any]:
        """Make the state now the one every lease starts from (`save`: after a warm start),
        or go back to it (a lease has ended): every flop and SRAM as they were, whatever
        the reset tree clears. Going back needs no idle engine: the state replaces all of
        it (the server has cancelled the request in flight)."""
        loop = self._savable_loop()
        await self._low_half()
        got = loop.pristine_save() if save else loop.pristine_restore()
        if got != 0:
            raise OSError(-got, f"pristine {'save' if save else 'restore'}: {os.strerror(-got)}")
        if save:
            self.pristine_is_boot = False
        else:
            self.h.master.restored()
        return {"time_ps": int(get_sim_time("ps"))}

    def _savable_loop(self) -> MainLoop:
        loop = self.main_loop
        if not (loop.available and loop.savable):
            raise ValueError("this model cannot save its state (built without --savable)")
        return loop

    async def _low_half(self) -> None:
        if self._clock_high():  # the low half of a cycle: nothing changes until it rises
            await FallingEdge(self.h.clock)

    async def batch(self, rows: list[tuple]) -> list[tuple[int, int]]:
        """Run rows (`xrt.hw.regops.RegRow`'s fields); stop at the first failure. One
        ``(status, value)`` per row run, the status an `xrt.hw.wire.RegisterStatus`.

        The whole batch is one hand-over to the register bus master in the simulation.
        """
        return [(s, v) for s, v, _ in await self.h.run_rows(rows)]

    async def idle_or_busy(self, chan: BlockingChannel) -> None:
        """Until a request is waiting: advance time while an engine is busy.

        With the harness's own main loop the idle time is the loop's (it runs busy engines,
        serves the register ring, sleeps when there is nothing to do, and toggles
        ``host_wake_i`` when the socket has a request). Otherwise: run busy engines here,
        in slices, and return when the device is idle or a request waits (the caller then
        blocks on the socket, simulated time standing still). The look at ``busy_o`` is the
        cheap one (`_bit_reader`).
        """
        if self.main_loop.available:
            if not chan.pending():
                self.main_loop.idle_begin(chan.sock.fileno())
                await Edge(self._wake_h)
            return
        while self.engine_busy() and not chan.pending():
            if _orphaned(self._server):  # the parent-death signal's backstop
                log.error("the server is gone: stopping")
                os._exit(0)
            await First(
                FallingEdge(self._busy_h),
                Timer(BUSY_SLICE_CYCLES * CLOCK_PERIOD_PS, unit="ps"),
            )


def _read_bounded(path: str, limit: int) -> bytes:
    """The bytes of the file at `path`, refused when it holds more than `limit`."""
    with open(path, "rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise ModelStateError(f"the model state is larger than this model's ({limit} bytes)")
    return data


def _bit_reader(handle: Any) -> Callable[[], bool]:
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


def _orphaned(server: int) -> bool:
    return bool(server) and os.getppid() != server


def _may_run_long(req: dict[str, Any]) -> bool:
    """A request that may take long enough for its caller to give up on it: run it as a
    cancellable task with watches. A batch without polls is a few cycles per op (at most
    4096 ops: well under a second of simulation), so it skips the task and its triggers."""
    op = req["op"]
    if op == Op.BATCH:
        return any(row[0] == RegKind.POLL for row in req["ops"])
    return op in WATCHED_OPS


async def run_request(
    worker: Worker, chan: BlockingChannel, req: dict[str, Any], server: int
) -> dict[str, Any]:
    """Run one request as a task, looking at the socket between slices of simulated time:
    a cancel for this request stops it (the server's caller went away); a server that died
    ends the process."""

    async def guarded() -> dict[str, Any]:  # an error must not end the (cocotb) test
        try:
            return {"ok": True, **(await worker.handle(req))}
        except Exception as exc:
            log.exception("request %s failed", req.get("op"))
            return failed_reply(exc)

    task = cocotb.start_soon(guarded())
    cancelled = False
    while not task.done():
        await First(task.complete, Timer(WATCH_SLICE_CYCLES * CLOCK_PERIOD_PS, unit="ps"))
        if task.done():
            break
        if _orphaned(server):
            log.error("the server is gone: stopping")
            os._exit(0)
        while chan.pending():
            msg = chan.recv()
            if msg.get("op") == Op.CANCEL and msg.get("id") == req["id"] and not cancelled:
                task.cancel()
                cancelled = True
            # a cancel for an earlier request (already answered) needs nothing
    if task.cancelled():
        return {"cancelled": True, "ok": False}
    return task.result()


@cocotb.test()
async def serve(dut) -> None:
    """The request loop (the only 'test' of this module): runs until told to quit."""
    # The simulator's main made this process non-dumpable and tied it to the server's life
    # (parent-death signal) before anything else ran (rtl/sim/npu_sim_main.cpp).
    server = int(os.environ.get("NPU_SERVER_PID", "0"))
    if _orphaned(server):
        os._exit(0)
    worker = Worker(dut)
    # serve --lockstep: launches that ended are checked before the next answer.
    vetter = LaunchVetter.from_env(os.environ.get("NPU_TARGET", "buyi"))
    await worker.h.reset()
    # The boot state: every lease starts from it (the server makes a warm start's state the
    # pristine one instead). A model that cannot save (coverage builds) is replaced at a
    # lease end instead (npuemu.server.devices).
    savable = worker.main_loop.available and worker.main_loop.savable
    if savable:
        await worker.pristine(save=True)
        worker.pristine_is_boot = True
    chan = BlockingChannel(socket.socket(fileno=int(os.environ["NPU_WORKER_FD"])))
    state_bytes = int(worker.main_loop.state_bytes()) if savable else 0
    hello = {"event": "ready", "cycles": worker.h.cycles, "savable": savable}
    chan.send({**hello, "state_bytes": state_bytes})
    while True:
        if not worker.frozen_idle:
            await worker.idle_or_busy(chan)
        try:
            req = chan.recv()  # blocks with the simulation frozen
        except ChannelClosedError:
            log.info("server closed the channel: stopping")
            return
        started = int(get_sim_time("ps"))  # where a recording pins the request
        if req["op"] == Op.CANCEL:
            continue  # its request was already answered
        if req["op"] == Op.QUIT:
            if worker._waves is not None:
                worker._waves.close_all()  # name a window left open
            chan.send({"id": req["id"], "ok": True, "cycles": worker.h.cycles})
            return
        if req.get("read_only"):
            why = read_only_refusal(req, worker.read_side_effects)
            if why:  # the server checks first: this is the gate, should the server not
                log.error("refused a read-only request %s: %s", req["op"], why)
                error = f"refused on the read-only path: {why}"
                chan.send({"id": req["id"], "ok": False, "error": error, "cycles": worker.h.cycles})
                continue
        try:
            if _may_run_long(req):
                result = await run_request(worker, chan, req, server)
            else:  # a few cycles per op at most: no task, no watch (the register round trip)
                result = {"ok": True, **(await worker.handle(req))}
            reply = {"id": req["id"], "cycles": worker.h.cycles, "start_ps": started, **result}
        except Exception as exc:
            log.exception("request %s failed", req.get("op"))
            reply = {
                "id": req["id"],
                **failed_reply(exc),
                "cycles": worker.h.cycles,
                "start_ps": started,
            }
        if vetter is not None:
            if req["op"] == Op.MODEL_RESTORE:
                vetter.forget()
            elif req["op"] == Op.PRISTINE_RESTORE and reply.get("ok"):
                vetter.restart(fresh=worker.pristine_is_boot)
            reply = vetter.vet(reply)
        chan.send(reply)


__all__ = ["Worker", "serve"]
