"""The server's handle on one simulation worker process.

`WorkerProcess.start()` launches the verilated model with the worker's request loop
(`npuemu.worker.sim_main`); `call()` sends one request and waits for its answer under a
wall-clock watchdog. A worker that exits or stops answering makes the call fail with
`WorkerUnavailableError` (the caller restarts it); it never hangs.

The worker inherits no descriptor worth taking: its main (rtl/sim/npu_sim_main.cpp) makes
itself non-dumpable first, then connects to a hand-out socket of this server, which checks
the connecting process's pid (SO_PEERCRED) against the process it started and only then
sends the IPC socket and the memory files. A process of the same user that opens the
worker's /proc/PID/fd while it starts finds nothing there; one that connects to the
hand-out socket is refused.

Requests and replies are the device port's records (`xrt.hw.port`). Register batches
without polls go to the simulator through the server's own register ring
(`npuemu.server.register_ring.ServerRing`) when the model serves one: no frame and no
Python in the simulator process. Everything else (polls and waits, which may run long and
can be stopped; waveforms; an observer's reads, which the worker checks) goes over the
pipe. `WorkerConfig.server_ring` off sends everything over the pipe.

A worker whose taps are on (`WorkerConfig.taps`) sends every request it served, whatever
its route, as a ``served`` event on the pipe; `on_served` gets each (`Served`), in order.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import secrets
import signal
import socket
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

from npuemu.server.register_ring import ServerRing
from npuemu.server.watchdog import Watchdog
from npuemu.sim.build import BuiltModel
from npuemu.sim.cocotb_run import simulator_env
from npuemu.worker.config import Hello, WorkerConfig
from npuemu.worker.protocol import ChannelClosedError, FrameProtocol, frame
from xrt.hw.debug import DebugReply, DebugRequest, decode_debug_reply, encode_debug_request
from xrt.hw.port import (
    Cancel,
    DeviceEvent,
    PortError,
    PortErrorCode,
    Quit,
    RegBatch,
    Remap,
    Reply,
    Request,
    RingAttach,
    Route,
    Served,
)
from xrt.hw.port_pipe import decode_event, decode_reply, decode_request, encode_request
from xrt.hw.ring import RingSlot
from xrt.hw.ring_core import RingError

__all__ = ["WorkerCancelledError", "WorkerError", "WorkerProcess", "WorkerUnavailableError"]

log = logging.getLogger("npuemu.worker")

WORKER_MODULE = "npuemu.worker.sim_main"


class WorkerUnavailableError(Exception):
    """The worker died or stopped answering; the message says which and when."""


class WorkerError(Exception):
    """The worker answered that a request failed; `error.code` says whether the caller
    must fix it (`PortErrorCode`) or the worker failed (INTERNAL)."""

    def __init__(self, message: str, error: PortError) -> None:
        super().__init__(message)
        self.error = error

    @property
    def code(self) -> PortErrorCode:
        return self.error.code

    @property
    def detail(self) -> str:
        """The worker's own words."""
        return self.error.message


class WorkerCancelledError(Exception):
    """The worker stopped a request before it ended (its caller or its lease went away)."""


class WorkerProcess:
    """One simulator process running the worker loop.

    Args:
        name: Device name, for messages and logs.
        model: The built `npu_sim` model.
        memories: Memory name -> descriptor of its file (handed to the worker at start).
        workdir: Folder for the worker's log and results file.
        config: The worker's configuration (handed out with the descriptors).
    """

    def __init__(
        self,
        name: str,
        model: BuiltModel,
        memories: dict[str, int],
        workdir: Path,
        config: WorkerConfig,
    ) -> None:
        self.name = name
        self.memories = dict(memories)
        self._fd_channel: socket.socket | None = None  # hands the worker new memory files
        self.config = config
        self.model = model
        self.workdir = workdir
        self.proc: asyncio.subprocess.Process | None = None
        self._transport: asyncio.Transport | None = None
        self._hello: asyncio.Future[dict[str, Any]] | None = None
        self.on_served: Callable[[Served], None] | None = None  # the worker's taps' events
        self.on_event: Callable[[DeviceEvent], None] | None = None  # the device's own events
        self.on_debug: Callable[[DebugReply], None] | None = None  # the device stopped
        # The debugger: stops counted; while stopped, no request's watchdog runs out (the
        # model stands still on purpose, it is not hung).
        self.debug_stops = 0
        self.debug_stopped = False
        self.debug_used = False  # a lease's end clears the stop unit (resuming it) first
        self._stop_event = asyncio.Event()
        self._ids = itertools.count(1)
        self._lock = asyncio.Lock()
        self._pending: dict[int, asyncio.Future[Any]] = {}  # by request id
        self._current: int | None = None
        self._drain_task: asyncio.Task[None] | None = None
        self._channel_closed = False
        self._ring: ServerRing | None = None  # the server's register ring into the simulator
        self.on_exit: Callable[[str], None] | None = None  # told when the worker goes away
        self.cycles = 0
        self.savable = False  # from its hello: it can save and restore its state
        self.state_bytes = 0

    @property
    def busy(self) -> bool:
        """A request is in flight."""
        return self._lock.locked()

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    @property
    def log_path(self) -> Path:
        return self.workdir / "worker.log"

    def log_tail(self, lines: int = 20) -> str:
        """The end of the worker's log (for error messages)."""
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no worker log)"

    async def start(self, timeout_s: float = 120.0) -> None:
        """Launch the simulator, hand it its descriptors once it proves who it is, and wait
        for its worker loop to report ready."""
        self.workdir.mkdir(mode=0o700, parents=True, exist_ok=True)
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        fd_parent, fd_child = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._fd_channel = fd_parent
        # An abstract name: no file to clean up; anyone may connect, only the worker is served.
        handout_name = f"npu-emu-{os.getpid()}-{self.name}-{secrets.token_hex(8)}"
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind("\0" + handout_name)
        listener.listen(8)
        listener.setblocking(False)
        # Only the process's bootstrap goes in the environment (the hand-out socket, and the
        # server's pid: the simulator's main ties itself to it before anything else); the
        # worker's configuration comes with the hand-out.
        env = simulator_env(
            self.model,
            WORKER_MODULE,
            self.workdir / "results.xml",
            {"NPU_WORKER_HANDOUT": "@" + handout_name, "NPU_SERVER_PID": str(os.getpid())},
        )
        loop = asyncio.get_running_loop()
        try:
            log_flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
            with os.fdopen(os.open(self.log_path, log_flags, 0o600), "ab") as logf:
                self.proc = await asyncio.create_subprocess_exec(
                    str(self.model.executable),
                    cwd=self.workdir,
                    env=env,
                    stdin=asyncio.subprocess.DEVNULL,
                    stdout=logf,
                    stderr=asyncio.subprocess.STDOUT,
                    start_new_session=True,  # its own process group: killed as a whole
                    # Its files (waveform windows, the tracer's own, state files) are the
                    # holder's: nobody else's to read (npuemu.sim.waves).
                    umask=0o077,
                )
            handout = [("ipc", child.fileno()), ("fdchan", fd_child.fileno())]
            handout += [(f"mem:{name}", fd) for name, fd in self.memories.items()]
            await asyncio.wait_for(self._hand_out(listener, handout), timeout_s)
            self._hello = loop.create_future()
            self._transport, _ = await loop.create_unix_connection(
                lambda: FrameProtocol(self._on_frame, self._on_lost), sock=parent
            )
            hello = await asyncio.wait_for(self._hello, timeout_s)
        except (TimeoutError, ChannelClosedError, OSError) as exc:
            await self.kill()
            raise WorkerUnavailableError(
                f"simulation worker of {self.name} did not start:\n{self.log_tail()}"
            ) from exc
        finally:
            listener.close()
            child.close()
            fd_child.close()
        said = Hello.decode(hello)
        self.cycles = said.cycles
        self.savable = said.savable  # it keeps a pristine state
        self.state_bytes = said.state_bytes  # the size of its saved state
        if self.config.server_ring:
            await self._attach_server_ring(timeout_s)
        log.info("worker %s ready (pid %d)", self.name, self.proc.pid)

    async def _attach_server_ring(self, timeout_s: float) -> None:
        """Have the simulator serve the server's own ring (a model without the ring service
        refuses: everything then goes over the IPC socket)."""
        assert self._fd_channel is not None
        ring = ServerRing(asyncio.get_running_loop())
        try:
            socket.send_fds(self._fd_channel, [b"ring"], ring.ring.fds)
            await self.call(RingAttach(RingSlot.SERVER), timeout_s)
        except WorkerError as exc:
            ring.close()
            log.info("worker %s: no register ring for the server (%s)", self.name, exc)
            return
        except BaseException:
            ring.close()
            raise
        self._ring = ring

    async def call(
        self,
        request: Request,
        timeout_s: float,
        guard: Callable[[], bool] | None = None,
        *,
        read_only: bool = False,
    ) -> Reply:
        """Send one request; return the worker's reply (with its cycles).

        Requests go one at a time. A caller cancelled while its request runs (its client's
        deadline, a client gone) sends the worker a cancel for that request id and returns
        at once; the worker stops the request and answers it, and that stale answer is
        dropped by id. The next request waits until it has arrived, so a cancelled call
        never costs the simulation.

        Raises:
            WorkerUnavailableError: the worker is gone or did not answer in `timeout_s`
                (it is killed then; the caller restarts it).
            WorkerError: the worker answered that the request failed (`PortError`).
            WorkerCancelledError: the worker stopped the request (see `cancel_current`), or
                `guard()` was false once the request's turn came (nothing was sent).
        """
        await self._lock.acquire()
        release = True
        what = request.TAG
        try:
            transport = self._transport
            if (
                self.proc is None
                or self.proc.returncode is not None
                or transport is None
                or transport.is_closing()
                or self._channel_closed
            ):
                raise WorkerUnavailableError(f"simulation worker of {self.name} is not running")
            if guard is not None and not guard():  # e.g. its lease ended while it queued
                raise WorkerCancelledError(f"{what} on {self.name} was no longer wanted")
            req_id = next(self._ids)
            loop = asyncio.get_running_loop()
            batch = request if isinstance(request, RegBatch) else None
            ring = self._ring if batch is not None and _ring_carries(batch, read_only) else None
            fut: asyncio.Future[Any] = (
                loop.create_future() if ring is None or batch is None else ring.submit(batch)
            )
            self._pending[req_id] = fut
            self._current = req_id
            # The answer's future is awaited directly, its watchdog a timer on the loop: no
            # wait_for/shield, which add event-loop iterations to every request.
            timer = Watchdog(loop, timeout_s, fut, lambda: self.debug_stopped)
            try:
                # One request at a time, at most a few hundred KiB (4096 ops): the transport
                # sends it at once or buffers the rest; nothing to drain.
                if ring is None:
                    transport.write(frame(encode_request(req_id, request, read_only=read_only)))
                    reply = decode_reply(await fut)
                else:
                    await fut
                    reply = _ring_reply(req_id, ring)
            except asyncio.CancelledError:
                if fut.done() and not fut.cancelled():
                    raise  # the answer is in: nothing left in the worker to stop
                # The caller went away: stop the request in the worker (a ring request, a
                # few cycles per op, runs to its end); a task keeps the lock until its
                # (dropped) answer is in, or kills a worker that never answers.
                release = False
                stale: asyncio.Future[Any] | asyncio.Future[None]
                if ring is None:
                    self._send_cancel(req_id)
                    stale = loop.create_future()
                else:
                    stale = ring.rewait()
                self._pending[req_id] = stale
                self._drain_task = loop.create_task(self._drain(stale, req_id, timeout_s))
                raise
            except TimeoutError:
                await self.kill()
                raise WorkerUnavailableError(
                    f"simulation worker of {self.name} did not answer {what} within "
                    f"{timeout_s:.0f} s; it was stopped and is being restarted"
                ) from None
            except (ChannelClosedError, ConnectionError, BrokenPipeError):
                code = await self._reap()
                raise WorkerUnavailableError(
                    f"simulation worker of {self.name} died (exit status {code}) during "
                    f"{what}; it is being restarted"
                ) from None
            finally:
                timer.cancel()
                self._current = None
                if release:
                    self._pending.pop(req_id, None)
        finally:
            if release:
                self._lock.release()
        self.cycles = reply.cycles or self.cycles
        if reply.cancelled:
            raise WorkerCancelledError(f"{what} on {self.name} was stopped before it ended")
        if reply.error is not None:
            raise WorkerError(
                f"{what} failed in the worker of {self.name}: {reply.error.message}", reply.error
            )
        return reply

    async def debug_call(self, request: DebugRequest, timeout_s: float) -> DebugReply:
        """A debugger's request, sent at once: not behind the request in flight, which a
        stopped device holds (the worker answers debugger requests between slices of a
        running request, while stopped, and between requests).

        Raises:
            WorkerUnavailableError: the worker is gone.
            TimeoutError: no answer in `timeout_s` (the worker runs on: a request of the
                register ring does not let it look at its pipe until it ends).
            WorkerError: the worker refused the request (BAD_REQUEST, its message).
        """
        transport = self._transport
        if transport is None or transport.is_closing() or self._channel_closed:
            raise WorkerUnavailableError(f"simulation worker of {self.name} is not running")
        loop = asyncio.get_running_loop()
        req_id = next(self._ids)
        fut: asyncio.Future[Any] = loop.create_future()
        self._pending[req_id] = fut
        timer = loop.call_later(timeout_s, _expire, fut)
        self.debug_used = True
        try:
            transport.write(frame(encode_debug_request(req_id, request)))
            msg = await fut
        finally:
            timer.cancel()
            self._pending.pop(req_id, None)
        if msg.get("t") != DebugReply.TAG:
            reply = decode_reply(msg)
            assert reply.error is not None
            raise WorkerError(
                f"debug {request.op} on {self.name}: {reply.error.message}", reply.error
            )
        out = decode_debug_reply(msg)
        self.debug_stopped = out.state.stopped
        self.debug_stops = max(self.debug_stops, out.stops)
        return out

    async def wait_debug_stop(self, after: int, timeout_s: float) -> bool:
        """Wait until the device stopped more than `after` times; False after `timeout_s`."""
        while self.debug_stops <= after:
            try:
                await asyncio.wait_for(self._stop_event.wait(), timeout_s)
            except TimeoutError:
                return self.debug_stops > after
        return True

    async def _hand_out(self, listener: socket.socket, handout: list[tuple[str, int]]) -> None:
        """Serve the hand-out socket until the worker itself connects: send it `handout`
        (roles and descriptors) and its configuration (the lines after the roles). Any
        other process that connects (a same-user process that found the name) is refused
        and logged; a worker that exits first ends the wait."""
        loop = asyncio.get_running_loop()
        assert self.proc is not None
        exited = loop.create_task(self.proc.wait())
        try:
            while True:
                accept = loop.create_task(loop.sock_accept(listener))
                await asyncio.wait({accept, exited}, return_when=asyncio.FIRST_COMPLETED)
                if not accept.done():
                    accept.cancel()
                    raise ChannelClosedError(f"the worker exited (status {exited.result()})")
                conn, _ = accept.result()
                with conn:
                    pid, uid, _ = struct.unpack("3i", conn.getsockopt(
                        socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")
                    ))  # fmt: skip
                    if pid != self.proc.pid or uid != os.getuid():
                        log.warning(
                            "worker %s: refused a hand-out connection from pid %d (uid %d)",
                            self.name, pid, uid,
                        )  # fmt: skip
                        continue
                    roles = " ".join(role for role, _ in handout)
                    message = f"{roles}\n{self.config.encode()}".encode()
                    conn.setblocking(True)
                    socket.send_fds(conn, [message], [fd for _, fd in handout])
                    return
        finally:
            if not exited.done():
                exited.cancel()

    def cancel_current(self) -> None:
        """Ask the worker to stop the request in flight, if any (its caller then gets
        `WorkerCancelledError`). Used when a lease ends under a running call."""
        if self._current is not None:
            self._send_cancel(self._current)

    def _send_cancel(self, req_id: int) -> None:
        if self._transport is not None and not self._transport.is_closing():
            self._transport.write(frame(encode_request(0, Cancel(req_id))))

    async def _drain(self, fut: asyncio.Future[Any], req_id: int, timeout_s: float) -> None:
        try:
            await asyncio.wait_for(fut, timeout_s)
        except TimeoutError:
            log.error(
                "worker %s: cancelled request %d got no answer: killing it", self.name, req_id
            )
            await self.kill()
        except Exception:
            pass  # the channel closed: the next call reports the dead worker
        finally:
            self._pending.pop(req_id, None)
            self._lock.release()

    def _on_frame(self, reply: dict[str, Any]) -> None:
        """Every message from the worker, in the loop's reader callback: the first is its
        hello; a ``served`` event goes to `on_served`, a ``device`` event (the device's own
        log lines: npuemu.worker.device_watch) to `on_event`; each other one answers the request
        of its id (a stale answer nobody waits for any more is dropped)."""
        if self._hello is not None and not self._hello.done():
            self._hello.set_result(reply)
            return
        if reply.get("ev") == "served":
            if self.on_served is not None:
                self.on_served(decode_served(reply))
            return
        if reply.get("ev") == "debug":
            stop = decode_debug_reply(reply)
            self.debug_stops = max(self.debug_stops, stop.stops)
            self.debug_stopped = True
            self._stop_event.set()
            self._stop_event = asyncio.Event()
            if self.on_debug is not None:
                self.on_debug(stop)
            return
        if reply.get("ev") == "device":
            if self.on_event is not None:
                try:
                    self.on_event(decode_event(reply))
                except ValueError as exc:
                    log.error("worker %s: a malformed device event: %s", self.name, exc)
            return
        fut = self._pending.pop(reply.get("id", -1), None)
        if fut is None or fut.done():
            log.debug("worker %s: dropped a stale answer (id %s)", self.name, reply.get("id"))
            return
        fut.set_result(reply)

    def _on_lost(self, exc: Exception | None) -> None:
        """The channel closed (EOF, a broken frame): every waiter learns the worker is gone."""
        if self._channel_closed:
            return
        self._channel_closed = True
        gone = ChannelClosedError(str(exc) if exc else "worker closed the channel")
        if self._hello is not None and not self._hello.done():
            self._hello.set_exception(gone)  # start() reports it
            return
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(gone)
        self._pending.clear()
        if self.on_exit is not None and self._transport is not None:
            # an idle worker's death is noticed too (not a channel closed on purpose)
            self.on_exit(f"simulation worker of {self.name} exited")

    async def _reap(self, timeout_s: float = 5.0) -> int | None:
        if self.proc is None:
            return None
        try:
            return await asyncio.wait_for(self.proc.wait(), timeout_s)
        except TimeoutError:
            await self.kill()
            return self.proc.returncode

    async def kill(self) -> None:
        """SIGKILL the worker's process group and collect it."""
        if self.proc is not None and self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.proc.wait(), 10)
        self._close_channel()

    async def remap_memory(self, old_fd: int, new_fd: int, timeout_s: float) -> None:
        """Have the worker map memory file `new_fd` where it maps file `old_fd` (the
        DPI-C model's pointers stay valid). The new descriptor goes over a socket of its
        own (SCM_RIGHTS), the old file is named by its device and inode."""
        if self._fd_channel is None:
            raise WorkerUnavailableError(f"simulation worker of {self.name} is not running")
        socket.send_fds(self._fd_channel, [b"fd"], [new_fd])
        st = os.fstat(old_fd)
        await self.call(Remap((st.st_dev, st.st_ino)), timeout_s)

    async def attach_ring(self, fds: list[int], timeout_s: float) -> None:
        """Have the worker serve a lease's register ring (`npuemu.server.register_ring`):
        its file and eventfds go over the descriptor socket, as a memory file does."""
        if self._fd_channel is None:
            raise WorkerUnavailableError(f"simulation worker of {self.name} is not running")
        socket.send_fds(self._fd_channel, [b"ring"], fds)
        await self.call(RingAttach(RingSlot.LEASE), timeout_s)

    def _close_channel(self) -> None:
        ring, self._ring = self._ring, None
        if ring is not None:
            ring.close()
        fd_channel, self._fd_channel = self._fd_channel, None
        if fd_channel is not None:
            fd_channel.close()
        transport, self._transport = self._transport, None
        if transport is not None:
            transport.close()

    async def stop(self, timeout_s: float = 10.0) -> None:
        """Ask the worker loop to quit (it closes a waveform window left open); kill it
        if it has not exited within `timeout_s` in all (a request still running included)."""
        if self.proc is None or self.proc.returncode is not None:
            self._close_channel()
            return
        proc = self.proc

        async def quit_and_exit() -> None:
            await self.call(Quit(), timeout_s)
            await proc.wait()

        with contextlib.suppress(WorkerUnavailableError, WorkerError, TimeoutError):
            await asyncio.wait_for(quit_and_exit(), timeout_s)
        await self.kill()


def _expire(fut: asyncio.Future[dict[str, Any]]) -> None:
    """The watchdog of one request: its answer did not come in time."""
    if not fut.done():
        fut.set_exception(TimeoutError())


def _ring_carries(batch: RegBatch, read_only: bool) -> bool:
    """Whether the server's ring can carry `batch`: the holder's (1..4096 ops) without polls
    (a poll may run long, and only the pipe can stop it). An observer's goes over the pipe,
    where the worker checks it."""
    return not read_only and batch.n > 0 and not batch.has_poll


def _ring_reply(req_id: int, ring: ServerRing) -> Reply:
    """The server ring's answer, as the pipe's would be."""
    try:
        return Reply(req_id, ring.cycles, None, ring.results())
    except RingError as exc:
        code = PortErrorCode.BAD_REQUEST if exc.status == 1 else PortErrorCode.INTERNAL
        return Reply(req_id, ring.cycles, None, None, PortError(code, str(exc)))


def decode_served(msg: dict[str, Any]) -> Served:
    """A ``served`` event of the worker's taps (`npuemu.worker.port.encode_served`)."""
    _, request, read_only = decode_request(msg["request"])
    return Served(request, decode_reply(msg["reply"]), Route(int(msg["route"])), read_only)
