"""What a simulation worker is told at start, and what it says when it is ready.

`WorkerConfig` is the worker's whole configuration, one typed record: the server (or a
replay) writes it into the hand-out message after the descriptors' roles
(`npuemu.server.worker_process`), the simulator's main keeps it (rtl/sim/npu_sim_main.cpp:
it reads ``lockstep`` itself, for the RTL's trace at time zero) and the worker's Python
reads it from there (`npu_worker_config`). Its text form is one ``key=value`` line per
field, so the C++ side can read a key without a parser. Only the process's bootstrap
travels in the environment: the hand-out socket's name and the server's pid, which the
simulator's main needs before anything else (its parent-death guard).

`Hello` is the worker's first message on the pipe.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

__all__ = ["MAX_CONFIG_BYTES", "Hello", "WorkerConfig"]

MAX_CONFIG_BYTES = 3072  # the hand-out message holds the roles and this (npu_sim_main.cpp)
_MASTERS = ("auto", "regbus", "cocotbext")


@dataclass(frozen=True)
class WorkerConfig:
    """One worker's configuration.

    Attributes:
        target: The target the model was built for (``buyi``, ``zg330``).
        device: The device's name (log lines, waveform file names).
        waves_dir: Where waveform windows go (``serve --waves``); ``""``: none.
        server_ring: Attach the server's own register ring at start.
        reg_master: The register bus master: ``regbus`` (the RTL one, ``auto``) or
            ``cocotbext`` (cocotbext-axi's, the reference for benches).
        frozen_idle: Replay: simulated time runs only when a request asks (`Advance`).
        lockstep: Check every launch of the compute engine against the golden model.
        taps: Send every request served, whatever its route, to the server (`Served`
            events: the server records or traces them); rings are then served through
            the worker's port in Python.
    """

    target: str = "buyi"
    device: str = "npu0"
    waves_dir: str = ""
    server_ring: bool = True
    reg_master: str = "auto"
    frozen_idle: bool = False
    lockstep: bool = False
    taps: bool = False

    def __post_init__(self) -> None:
        if self.reg_master not in _MASTERS:
            raise ValueError(f"reg_master {self.reg_master!r} is not one of {_MASTERS}")
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, str) and any(c in value for c in "\n\0="):
                raise ValueError(f"{f.name} {value!r}: no newline, NUL or '=' in a setting")

    def encode(self) -> str:
        """The ``key=value`` lines."""
        lines = []
        for f in fields(self):
            value = getattr(self, f.name)
            lines.append(f"{f.name}={int(value) if isinstance(value, bool) else value}")
        text = "\n".join(lines)
        if len(text.encode()) > MAX_CONFIG_BYTES:
            raise ValueError(f"a worker configuration of {len(text)} bytes is too long")
        return text

    @classmethod
    def decode(cls, text: str) -> WorkerConfig:
        """The record of `encode`'s lines.

        Raises:
            ValueError: an unknown key or a value of the wrong kind (named).
        """
        kinds = {f.name: type(getattr(cls(), f.name)) for f in fields(cls)}
        values: dict[str, Any] = {}
        for line in text.splitlines():
            if not line:
                continue
            key, sep, value = line.partition("=")
            if not sep or key not in kinds:
                raise ValueError(f"worker configuration: unknown setting {line[:60]!r}")
            if kinds[key] is bool:
                if value not in ("0", "1"):
                    raise ValueError(f"worker configuration: {key}={value[:20]!r} is not 0 or 1")
                values[key] = value == "1"
            else:
                values[key] = value
        return cls(**values)


@dataclass(frozen=True)
class Hello:
    """The worker's first message: the cycle it is at, whether its model can save its
    state (it then took its boot state as the pristine one) and that state's size."""

    cycles: int
    savable: bool
    state_bytes: int

    def encode(self) -> dict[str, Any]:
        return {"ev": "ready", "cycles": self.cycles, "savable": self.savable,
                "state_bytes": self.state_bytes}  # fmt: skip

    @classmethod
    def decode(cls, msg: dict[str, Any]) -> Hello:
        return cls(
            int(msg.get("cycles", 0)),
            bool(msg.get("savable", False)),
            int(msg.get("state_bytes", 0)),
        )
