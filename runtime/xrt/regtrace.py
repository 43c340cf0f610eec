"""A log of register accesses: simulated cycle, device, address, register name, value.

One line per access, easy to grep and to diff between two runs::

    cycle=1234 npu0 write 0x80000010 dma.SRC_LO = 0x00001000
    cycle=1301 npu0 read  0x40000000 npu.MAGIC = 0x4e505530
    cycle=1402 npu0 poll  0x80000004 dma.STATUS = 0x00000002

The server writes it with ``npu-emu serve --trace-registers FILE`` (the cycle is the one
the worker reported at the end of the request); the runtime with ``XRT_TRACE_REGISTERS=FILE``
(``-`` for stderr), for every register region of every device it opens (the cycle is the
device's last known cycle count; ``-`` on hardware, which has none). Names come from the
generated register maps, so an address is shown as ``block.REGISTER``.
"""

from __future__ import annotations

import os
import stat
import sys
import threading
from pathlib import Path
from typing import TextIO

from xrt.hw.port import RegBatch, RegResults, Served
from xrt.hw.regmap import RegisterBlockInfo
from xrt.hw.regops import RegKind
from xrt.hw.regs import DMA, NPU
from xrt.hw.targets import target as target_config
from xrt.hw.wire import RegisterStatus

__all__ = ["RegisterNamer", "RegisterTraceLog", "env_trace_log"]

ENV = "XRT_TRACE_REGISTERS"
_KINDS = {RegKind.WRITE: "write", RegKind.MASKED_WRITE: "rmw", RegKind.POLL: "poll"}


def _status(s: int) -> str:
    return RegisterStatus(s).name if s in RegisterStatus._value2member_map_ else str(s)


class RegisterNamer:
    """Physical address -> ``block.REGISTER`` for blocks at known bases."""

    def __init__(self, blocks: dict[str, tuple[int, RegisterBlockInfo]]) -> None:
        self._blocks = blocks

    @classmethod
    def for_target(cls, target: str) -> RegisterNamer:
        cfg = target_config(target)
        return cls({"npu": (cfg.npu_base, NPU), "dma": (cfg.dma_base, DMA)})

    def name(self, addr: int) -> str:
        for block, (base, info) in self._blocks.items():
            if base <= addr < base + info.size:
                reg = info.at(addr - base)
                return f"{block}.{reg.name}" if reg else f"{block}+{addr - base:#x}"
        return "?"


def _open_private(path: str) -> TextIO:
    """`path` for appending lines, its owner's only: created 0600, an existing regular
    file of ours made 0600 (a trace shows what a driver did)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
    st = os.fstat(fd)
    if stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid() and st.st_mode & 0o077:
        os.fchmod(fd, 0o600)
    return os.fdopen(fd, "a", buffering=1)


class RegisterTraceLog:
    """Writes one line per register access to a file or stderr (thread-safe)."""

    def __init__(self, destination: str | Path, namer: RegisterNamer | None = None) -> None:
        self.destination = str(destination)
        self.namer = namer
        self._lock = threading.Lock()
        to_stderr = self.destination == "-"
        self._out: TextIO = sys.stderr if to_stderr else _open_private(self.destination)

    def record(
        self,
        device: str,
        kind: str,
        addr: int,
        value: int | None,
        cycle: int | None,
        status: str = "",
        name: str | None = None,
    ) -> None:
        """One line; `name` defaults to what the namer calls `addr`."""
        if name is None:
            name = self.namer.name(addr) if self.namer else "?"
        shown = "-" if value is None else f"{value:#010x}"
        tail = f" {status}" if status and status != "OK" else ""
        when = "-" if cycle is None else str(cycle)
        line = f"cycle={when} {device} {kind:<5} {addr:#010x} {name} = {shown}{tail}\n"
        with self._lock:
            self._out.write(line)

    def served(self, device: str, served: Served) -> None:
        """The register accesses of one request the device port served (`xrt.hw.port`:
        the server's taps give it every one, whatever its route); other requests are not
        register accesses. The cycle is the reply's (end of the request). An observer's
        reads are ``peek`` lines, so a holder's trace stays its own."""
        request, reply = served.request, served.reply
        if not isinstance(request, RegBatch):
            return
        results = reply.body if isinstance(reply.body, RegResults) else RegResults(b"")
        read = "peek" if served.read_only else "read"
        for row, (status, got, _) in zip(request.rows(), results, strict=False):
            shown = row.value if row.kind == RegKind.WRITE else got  # a masked write: written
            what = read if row.kind == RegKind.READ else _KINDS.get(row.kind, str(row.kind))
            self.record(device, what, row.addr, shown, reply.cycles, _status(status))

    def close(self) -> None:
        if self._out is not sys.stderr:
            self._out.close()


_env_log: RegisterTraceLog | None = None
_env_lock = threading.Lock()


def env_trace_log() -> RegisterTraceLog | None:
    """The process-wide log named by ``$XRT_TRACE_REGISTERS``, or None when unset."""
    global _env_log
    dest = os.environ.get(ENV)
    if not dest:
        return None
    with _env_lock:
        if _env_log is None or _env_log.destination != dest:
            _env_log = RegisterTraceLog(dest)
        return _env_log
