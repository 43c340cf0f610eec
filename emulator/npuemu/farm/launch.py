"""Start a whole farm on loopback from tests and benches: a labgrid coordinator, one
``npu-emu serve`` (`ServerProcess`) and one exporter per host, a reaper, and places.

    with LoopbackFarm.start(hosts=2, target="zg330", grace_s=3.0) as farm:
        farm.coordinator          # "127.0.0.1:PORT"
        farm.places               # ["zg330-0", "zg330-1"], tagged target=zg330

Every process is started on a free port (port 0, then the address it prints), waited for
by a line it prints, and stopped by its PID (SIGTERM, then SIGKILL) on exit.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from npuemu.server.launch import ServerProcess

__all__ = ["FarmJob", "FarmProcess", "LoopbackFarm", "lg_client"]

BIN = Path(sys.executable).parent


@dataclass
class FarmProcess:
    """A subprocess whose output goes to a log file, started once it printed `ready`."""

    name: str
    proc: subprocess.Popen[str]
    log_path: Path
    match: re.Match[str]
    _lines: list[str] = field(default_factory=list)
    _cond: threading.Condition = field(default_factory=threading.Condition)

    @classmethod
    def start(
        cls,
        name: str,
        args: list[str],
        ready: str,
        *,
        cwd: Path,
        env: dict[str, str] | None = None,
        timeout_s: float = 120.0,
    ) -> FarmProcess:
        log_path = cwd / f"{name}.log"
        proc = subprocess.Popen(
            args,
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            env={**os.environ, **(env or {}), "PYTHONUNBUFFERED": "1"},
        )
        lines: list[str] = []
        cond = threading.Condition()

        def pump() -> None:
            assert proc.stdout is not None
            with log_path.open("w") as log:
                for line in proc.stdout:
                    log.write(line)
                    log.flush()
                    with cond:
                        lines.append(line)
                        cond.notify_all()
            with cond:
                lines.append("")  # end of output
                cond.notify_all()

        threading.Thread(target=pump, daemon=True, name=f"pump-{name}").start()
        pattern = re.compile(ready)
        found: list[re.Match[str]] = []

        def seen() -> bool:
            found[:] = [m for m in map(pattern.search, lines) if m][:1]
            return bool(found) or (bool(lines) and lines[-1] == "")

        with cond:
            ok = cond.wait_for(seen, timeout_s)
        if not ok or not found:
            proc.kill()
            proc.wait()
            raise RuntimeError(
                f"{name} ({' '.join(args)}) did not print {ready!r} "
                f"(exit {proc.returncode}):\n{''.join(lines)[-4000:]}"
            )
        return cls(name, proc, log_path, found[0], lines, cond)

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def log(self) -> str:
        with self._cond:
            return "".join(self._lines)

    def wait_output(self, pattern: str, timeout_s: float) -> re.Match[str] | None:
        """Wait until the process printed a line matching `pattern` (or it ended)."""
        rx = re.compile(pattern)
        out: list[re.Match[str]] = []

        def seen() -> bool:
            out[:] = [m for m in map(rx.search, self._lines) if m][:1]
            return bool(out) or (bool(self._lines) and self._lines[-1] == "")

        with self._cond:
            self._cond.wait_for(seen, timeout_s)
        return out[0] if out else None

    def stop(self, timeout_s: float = 15.0) -> int:
        """SIGTERM by PID, SIGKILL if it does not end within `timeout_s`."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


def lg_client(coordinator: str, *args: str, env: dict[str, str] | None = None) -> str:
    """Run ``labgrid-client -x COORDINATOR ARGS`` and return its output (raises on failure)."""
    r = subprocess.run(
        [str(BIN / "labgrid-client"), "-x", coordinator, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
        check=False,
    )
    if r.returncode:
        raise RuntimeError(f"labgrid-client {' '.join(args)}: exit {r.returncode}\n{r.stderr}")
    return r.stdout


@dataclass
class LoopbackFarm:
    """A coordinator, `hosts` servers with one exporter each, a reaper, one place per device."""

    workdir: Path
    coordinator_proc: FarmProcess
    servers: list[ServerProcess] = field(default_factory=list)
    exporters: list[FarmProcess] = field(default_factory=list)
    reaper: FarmProcess | None = None
    places: list[str] = field(default_factory=list)
    _own_workdir: bool = True

    @property
    def coordinator(self) -> str:
        return self.coordinator_proc.match.group(1)

    @property
    def env(self) -> dict[str, str]:
        """Environment for a job of this farm."""
        return {"LG_COORDINATOR": self.coordinator}

    @classmethod
    def start(
        cls,
        *,
        hosts: int = 2,
        target: str = "zg330",
        grace_s: float | None = 3.0,
        workdir: Path | None = None,
    ) -> LoopbackFarm:
        """Start it all; on any failure, stop what was started."""
        own = workdir is None
        wd = Path(tempfile.mkdtemp(prefix="npu-emu-farm-")) if workdir is None else workdir
        coord = FarmProcess.start(
            "coordinator",
            [str(BIN / "labgrid-coordinator"), "-l", "127.0.0.1:0"],
            r"listening on (127\.0\.0\.1:\d+)",
            cwd=wd,  # it keeps places.yaml in its working folder
        )
        farm = cls(wd, coord, _own_workdir=own)
        try:
            with ThreadPoolExecutor(hosts) as pool:  # servers start in parallel
                starting = [pool.submit(ServerProcess.start, target=target) for _ in range(hosts)]
                for i, fut in enumerate(starting):
                    farm.add_host(f"host{i}", target, fut.result())
            if grace_s is not None:
                farm.start_reaper(grace_s)
        except BaseException:
            farm.stop()
            raise
        return farm

    def add_host(self, name: str, target: str, srv: ServerProcess | None = None) -> str:
        """One server (one device; `srv` if already started) and its exporter; a place
        ``TARGET-N`` tagged ``target=TARGET`` matching it. Returns the place's name."""
        if srv is None:
            srv = ServerProcess.start(target=target, devices=1)
        self.servers.append(srv)
        self.exporters.append(
            FarmProcess.start(
                f"exporter-{name}",
                [
                    sys.executable,
                    "-m",
                    "npuemu.farm.cli",
                    "-v",
                    "export",
                    "--device",
                    srv.url,
                    "-c",
                    self.coordinator,
                    "-n",
                    name,
                ],
                r"Exporter ready",
                cwd=self.workdir,
            )
        )
        place = f"{target}-{len(self.places)}"
        lg_client(self.coordinator, "-p", place, "create")
        lg_client(self.coordinator, "-p", place, "add-match", f"{name}/npu0/NpuEmuDevice")
        lg_client(self.coordinator, "-p", place, "set-tags", f"target={target}")
        self.places.append(place)
        return place

    def start_reaper(self, grace_s: float) -> None:
        self.reaper = FarmProcess.start(
            "reaper",
            [
                sys.executable,
                "-m",
                "npuemu.farm.cli",
                "reaper",
                "-c",
                self.coordinator,
                "--grace",
                str(grace_s),
                "--interval",
                "0.2",
            ],
            r"reaper: watching",
            cwd=self.workdir,
        )

    def stop(self) -> None:
        """Stop everything by PID: reaper, exporters, servers, coordinator."""
        procs = [self.reaper, *self.exporters]
        for p in procs:
            if p is not None:
                with contextlib.suppress(Exception):
                    p.stop()
        for srv in self.servers:
            with contextlib.suppress(Exception):
                srv.stop()
        self.coordinator_proc.stop()
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> LoopbackFarm:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class FarmJob:
    """One `npuemu.farm.job` subprocess (a farm job); its JSON events are collected as they come.

    A job that ends without the event waited for is reported at once as having ended, with
    its exit status and all it wrote to stderr (its traceback); only a job still running
    when the wait runs out is reported as hanging, with its Python stacks.
    """

    def __init__(
        self,
        farm: LoopbackFarm,
        tags: str = "target=zg330",
        wait_s: float = 300,
        *,
        launcher: Sequence[str] = (),
    ):
        """`launcher`: a script (and its arguments) that runs ``-m npuemu.farm.job ...``
        itself, e.g. under a forced thread schedule (tests/farm/starve_grpc.py)."""
        self.proc = subprocess.Popen(
            [sys.executable, *launcher, "-m", "npuemu.farm.job", tags, str(wait_s)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **farm.env},
        )
        self.events: list[dict] = []
        self._err: list[str] = []
        self._cond = threading.Condition()
        self._out_done = False  # its stdout ended
        self._err_done = False  # its stderr ended
        threading.Thread(target=self._pump, daemon=True).start()
        threading.Thread(target=self._pump_err, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with contextlib.suppress(ValueError), self._cond:
                self.events.append(json.loads(line))
                self._cond.notify_all()
        with self._cond:
            self._out_done = True
            self._cond.notify_all()

    def _pump_err(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            with self._cond:
                self._err.append(line)
        with self._cond:
            self._err_done = True
            self._cond.notify_all()

    @property
    def stderr(self) -> str:
        """What the job wrote to stderr: all of it once the job has ended (the pump is
        waited for, up to 30 s), else so far."""
        if self.proc.poll() is not None:
            with self._cond:
                self._cond.wait_for(lambda: self._err_done, 30)
        with self._cond:
            return "".join(self._err)

    def _ended(self, timeout_s: float) -> int | None:
        """The exit status once the job has closed its output and exited (None: running)."""
        with self._cond:
            self._cond.wait_for(lambda: self._out_done and self._err_done, timeout_s)
        try:
            return self.proc.wait(timeout_s if self._out_done else 0)
        except subprocess.TimeoutExpired:
            return None

    def _report(self, what: str, waited_s: float) -> str:
        """Why `what` did not happen: the job ended (status, stderr) or still runs (stacks)."""
        code = self._ended(30 if self._out_done else 0)  # closed its output: exiting
        with self._cond:
            events = list(self.events)
        if code is not None:
            return (
                f"job {self.proc.pid} exited with status {code} after {waited_s:.1f} s "
                f"without {what}: {events}\n{self.stderr[-6000:]}"
            )
        return (
            f"job {self.proc.pid} is still running after {waited_s:.1f} s without {what}: "
            f"{events}\nits stderr so far:\n{self.stderr[-3000:]}\n"
            f"where job {self.proc.pid} is:\n{self.stacks()}"
        )

    def wait_event(self, name: str, timeout_s: float) -> dict:
        """The first event `name`; fails at once when the job ends without it, or after
        `timeout_s`, saying which (with its stderr, or its stacks while it runs)."""

        def got() -> dict | None:
            return next((e for e in self.events if e["event"] == name), None)

        t0 = time.monotonic()
        with self._cond:
            self._cond.wait_for(lambda: got() is not None or self._out_done, timeout_s)
            event = got()
        if event is None:
            raise AssertionError(self._report(f"sending {name!r}", time.monotonic() - t0))
        return event

    def has(self, name: str) -> bool:
        with self._cond:
            return any(e["event"] == name for e in self.events)

    def give_back(self, timeout_s: float = 120) -> dict:
        """Tell the job to give its device back; its ``released`` event once it has exited
        with status 0 (else AssertionError saying what happened)."""
        assert self.proc.stdin is not None
        t0 = time.monotonic()
        self.proc.stdin.write("done\n")
        self.proc.stdin.flush()
        event = self.wait_event("released", timeout_s)
        code = self._ended(max(0.0, timeout_s - (time.monotonic() - t0)))
        if code != 0:
            raise AssertionError(self._report("exiting with status 0", time.monotonic() - t0))
        return event

    def stacks(self) -> str:
        """The job's Python stacks now (py-spy, when this process may trace it)."""
        spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
        try:
            out = subprocess.run(
                [spy, "dump", "--pid", str(self.proc.pid)],
                capture_output=True,
                text=True,
                timeout=60,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"(no stacks: {exc})"
        return (out.stdout + out.stderr)[-6000:]

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)
