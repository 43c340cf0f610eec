"""The server's handle on one simulation worker process.

`WorkerProcess.start()` launches the verilated model with the worker's request loop
(`npuemu.worker.sim_main`) and one end of a Unix socket pair; `call()` sends one request and
waits for its answer under a wall-clock watchdog. A worker that exits or stops answering
makes the call fail with `WorkerUnavailableError` (the caller restarts it); it never hangs.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import signal
import socket
from pathlib import Path
from typing import Any

from npuemu.sim.build import BuiltModel
from npuemu.sim.cocotb_run import simulator_env
from npuemu.worker.protocol import ChannelClosedError, read_frame, write_frame

__all__ = ["WorkerError", "WorkerProcess", "WorkerUnavailableError"]

log = logging.getLogger("npuemu.worker")

WORKER_MODULE = "npuemu.worker.sim_main"


class WorkerUnavailableError(Exception):
    """The worker died or stopped answering; the message says which and when."""


class WorkerError(Exception):
    """The worker answered that a request failed (a bug, not a device response)."""


class WorkerProcess:
    """One simulator process running the worker loop.

    Args:
        name: Device name, for messages and logs.
        model: The built `npu_sim` model.
        plusargs: Simulator plusargs (the shared-memory files).
        workdir: Folder for the worker's log and results file.
        extra_env: More environment for the simulator process.
    """

    def __init__(
        self,
        name: str,
        model: BuiltModel,
        plusargs: list[str],
        workdir: Path,
        extra_env: dict[str, str] | None = None,
    ) -> None:
        self.name = name
        self.extra_env = dict(extra_env or {})
        self.model = model
        self.plusargs = plusargs
        self.workdir = workdir
        self.proc: asyncio.subprocess.Process | None = None
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._ids = itertools.count(1)
        self._lock = asyncio.Lock()
        self.cycles = 0

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
        """Launch the simulator and wait for its worker loop to report ready."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        env = simulator_env(
            self.model,
            WORKER_MODULE,
            self.workdir / "results.xml",
            {**self.extra_env, "NPU_WORKER_FD": str(child.fileno()), "NPU_DEVICE": self.name},
        )
        with self.log_path.open("ab") as logf:
            self.proc = await asyncio.create_subprocess_exec(
                str(self.model.executable),
                *self.plusargs,
                cwd=self.workdir,
                env=env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=logf,
                stderr=asyncio.subprocess.STDOUT,
                pass_fds=(child.fileno(),),
                start_new_session=True,  # its own process group: killed as a whole
            )
        child.close()
        self._reader, self._writer = await asyncio.open_unix_connection(sock=parent)
        try:
            hello = await asyncio.wait_for(read_frame(self._reader), timeout_s)
        except (TimeoutError, ChannelClosedError) as exc:
            await self.kill()
            raise WorkerUnavailableError(
                f"simulation worker of {self.name} did not start:\n{self.log_tail()}"
            ) from exc
        self.cycles = int(hello.get("cycles", 0))
        log.info("worker %s ready (pid %d)", self.name, self.proc.pid)

    async def call(self, op: str, timeout_s: float, **args: Any) -> dict[str, Any]:
        """Send one request; return the worker's answer (with "cycles").

        Raises:
            WorkerUnavailableError: the worker is gone or did not answer in `timeout_s`
                (it is killed then; the caller restarts it).
            WorkerError: the worker reported the request as failed.
        """
        async with self._lock:
            if self.proc is None or self.proc.returncode is not None or self._writer is None:
                raise WorkerUnavailableError(f"simulation worker of {self.name} is not running")
            assert self._reader is not None
            req_id = next(self._ids)
            try:
                await write_frame(self._writer, {"id": req_id, "op": op, **args})
                reply = await asyncio.wait_for(read_frame(self._reader), timeout_s)
            except TimeoutError:
                await self.kill()
                raise WorkerUnavailableError(
                    f"simulation worker of {self.name} did not answer {op} within "
                    f"{timeout_s:.0f} s; it was stopped and is being restarted"
                ) from None
            except (ChannelClosedError, ConnectionError, BrokenPipeError):
                code = await self._reap()
                raise WorkerUnavailableError(
                    f"simulation worker of {self.name} died (exit status {code}) during {op}; "
                    "it is being restarted"
                ) from None
        if reply.get("id") != req_id:
            await self.kill()
            raise WorkerUnavailableError(f"simulation worker of {self.name} answered out of turn")
        self.cycles = int(reply.get("cycles", self.cycles))
        if not reply.get("ok"):
            raise WorkerError(f"{op} failed in the worker of {self.name}: {reply.get('error')}")
        return reply

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

    def _close_channel(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    async def stop(self, timeout_s: float = 10.0) -> None:
        """Ask the worker loop to quit; kill it if it does not."""
        if self.proc is None or self.proc.returncode is not None:
            self._close_channel()
            return
        try:
            await self.call("quit", timeout_s)
            await asyncio.wait_for(self.proc.wait(), timeout_s)
        except (WorkerUnavailableError, WorkerError, TimeoutError):
            pass
        await self.kill()
