"""Start `npu-emu serve` as a real subprocess and stop it again (tests, demo, benches).

    with ServerProcess.start(devices=2) as srv:
        url = srv.url            # "grpc://127.0.0.1:PORT"
        ...
    # SIGTERM on exit: the server shuts down cleanly; its output is in srv.log

The server picks a free port itself (``--port 0``) and prints where it listens; this waits
for that line (or for the process to die, with its log in the error).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from npuemu.process_guard import unprivileged_command

__all__ = ["ServerProcess"]

_READY = re.compile(r"serving (\d+) (\w+) device\(s\) on ([\d.]+):(\d+)")


@dataclass
class ServerProcess:
    """A running `npu-emu serve` subprocess."""

    proc: subprocess.Popen[str]
    host: str
    port: int
    log_path: Path
    started_s: float
    _log_thread: threading.Thread | None = field(default=None, repr=False)
    _final_log: str | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"grpc://{self.host}:{self.port}"

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def log(self) -> str:
        """Everything the server printed (kept in memory once it has stopped)."""
        if self._final_log is not None:
            return self._final_log
        return self.log_path.read_text(errors="replace")

    @classmethod
    def start(
        cls,
        *,
        target: str = "buyi",
        devices: int = 1,
        token: str | None = None,
        lease_ttl_s: float | None = None,
        watchdog_s: float | None = None,
        timeout_s: float = 600.0,
        extra_args: tuple[str, ...] = (),
        env: dict[str, str] | None = None,
        command: tuple[str, ...] | None = None,
        cwd: Path | None = None,
        prebuild: bool = True,
        unprivileged: bool = False,
    ) -> ServerProcess:
        """Launch the server on 127.0.0.1 and a free port; return once it serves.

        `timeout_s` covers a first build of the verilated model (about 20-30 s here). The
        token goes to the server in its environment ($NPU_EMU_TOKEN), never on its command
        line; `env` adds variables. `command` replaces ``python -m npuemu.cli`` (an
        installed ``npu-emu``); `cwd` is the server's working folder.

        With `prebuild` (the default, for the in-tree server only) the verilated model the
        server will use is built here first, without a time limit, so `timeout_s` covers
        the server's own start and not a cold build on a loaded machine (minutes).
        `unprivileged` runs the server (and so its workers) with no capabilities even when
        this process is root, as a normal user's server runs.
        """
        own_build = env is not None and {"NPU_EMU_RTL_DIR", "NPU_EMU_BUILD_DIR"} & env.keys()
        if prebuild and command is None and cwd is None and not own_build:
            from npuemu.sim.build import build_npu_sim

            traced = "--waves" in extra_args or "--record" in extra_args  # as app.py decides
            build_npu_sim(target, waves=traced)
        args = [
            *(command or (sys.executable, "-m", "npuemu.cli")),
            "serve",
            "--port",
            "0",
            "--target",
            target,
            "--devices",
            str(devices),
            *extra_args,
        ]
        child_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
        if token is not None:
            child_env["NPU_EMU_TOKEN"] = token
        elif not (env and "NPU_EMU_TOKEN" in env):
            child_env.pop("NPU_EMU_TOKEN", None)  # a test's own token is not the server's
        if not (env and "NPU_EMU_ADMIN_TOKEN_FILE" in env):
            child_env.pop("NPU_EMU_ADMIN_TOKEN_FILE", None)  # nor is an operator's
        if lease_ttl_s is not None:
            args += ["--lease-ttl", str(lease_ttl_s)]
        if watchdog_s is not None:
            args += ["--watchdog", str(watchdog_s)]
        log_fd, log_name = tempfile.mkstemp(prefix="npu-emu-serve-", suffix=".log")
        os.close(log_fd)
        log_path = Path(log_name)
        t0 = time.monotonic()
        proc = subprocess.Popen(
            unprivileged_command(args) if unprivileged else args,
            stdout=subprocess.PIPE,
            stderr=log_path.open("a"),  # O_APPEND, as the stdout pump: no overwriting
            text=True,
            env=child_env,
            cwd=cwd,
        )
        ready: list[re.Match[str]] = []
        got = threading.Event()

        def pump() -> None:  # stdout -> log file; catch the ready line
            assert proc.stdout is not None
            with log_path.open("a") as logf:
                for line in proc.stdout:
                    logf.write(line)
                    logf.flush()
                    m = _READY.search(line)
                    if m and not ready:
                        ready.append(m)
                        got.set()
            got.set()

        thread = threading.Thread(target=pump, daemon=True)
        thread.start()
        if not got.wait(timeout_s) or not ready:
            proc.kill()
            proc.wait()
            text = log_path.read_text(errors="replace")
            log_path.unlink(missing_ok=True)
            raise RuntimeError(
                f"npu-emu serve did not come up (exit {proc.returncode}):\n{text[-4000:]}"
            )
        m = ready[0]
        return cls(proc, m.group(3), int(m.group(4)), log_path, time.monotonic() - t0, thread)

    def stop(self, timeout_s: float = 30.0) -> int:
        """SIGTERM, wait for the clean shutdown; SIGKILL if it takes too long."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self._log_thread is not None:
            self._log_thread.join(5)
        if self._final_log is None:
            self._final_log = self.log_path.read_text(errors="replace")
            self.log_path.unlink(missing_ok=True)
        return self.proc.returncode

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
