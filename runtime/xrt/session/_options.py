"""The debugging options of a `Session` (the manual's log, dump, callback, time profile and
trace options): a plain record the session holds and its executor reads, and the checks the
session's setters make before filling it in."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from xrt.backend import Backend
from xrt.errors import ErrorCode, XrtError
from xrt.network import Operator
from xrt.session._units import Unit
from xrt.tensor import DUMP_FORMATS, Tensor

__all__ = [
    "DumpTarget",
    "SessionOptions",
    "UnitCallback",
    "as_callback",
    "dump_target",
    "time_scale",
]

UnitCallback = Callable[[Any, Unit, Backend, list[Tensor]], Any]
"""A callback as the options hold it: ``callback(session, op, backend, tensors)``. The
session passes itself first; `xrt.session.Callback` is the same type with the first
argument a `Session` (this module sits below the session, so it does not name it)."""

_TIME_UNITS = {"s": 1.0, "ms": 1e3, "us": 1e6}
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def _safe_name(name: str) -> str:
    return _UNSAFE.sub("_", name).strip("._") or "value"


class DumpTarget(NamedTuple):
    """Where and how `Session.set_dump_outputs` writes each unit's outputs."""

    folder: str
    format: str

    @property
    def hardware(self) -> bool:
        """An ``H`` format: values as the hardware stores them (`Backend.stored_values`)."""
        return self.format.startswith("H")

    def write(
        self,
        produced: list[tuple[str, Tensor]],
        producer: Mapping[str, Operator],
        stored: Mapping[str, Tensor] | None = None,
    ) -> None:
        """Write each (value, tensor) as ``<producer op id>_<value name>.<format>``, the format
        falling back where a tensor cannot give it (the file name shows the one written).
        With an ``H`` format, a value the backend gave in its hardware layout (`stored`)
        is written as stored (HQB on an NPU's output: its channel tiles, padding included)."""
        for name, t in produced:
            op = producer[name]
            if stored and t.hw_layout is None:
                t = stored.get(name, t)
            written = t.resolve_dump_format(self.format, fallback=True)
            path = os.path.join(self.folder, f"{op.op_id}_{_safe_name(name)}.{written.lower()}")
            t.dump(path, written)


@dataclass
class SessionOptions:
    """What a session does around each unit besides running it (all off by default).

    Attributes:
        log_io: Log each unit's inputs and outputs.
        log_time: Log each unit's times (implies timing).
        dump: Write each unit's outputs there; None: no dumps.
        pre: Called before each unit with its inputs.
        post: Called after each unit with its outputs.
        profile: Record each unit's times (`Session.time_profile_results`).
        tracing: Record a timeline of each run (`Session.trace_events`).
    """

    log_io: bool = False
    log_time: bool = False
    dump: DumpTarget | None = None
    pre: UnitCallback | None = None
    post: UnitCallback | None = None
    profile: bool = False
    tracing: bool = False

    @property
    def timing(self) -> bool:
        """True when units are timed: profiling, or logging times."""
        return self.profile or self.log_time


def dump_target(enabled: bool, folder: object, format: object) -> DumpTarget | None:
    """The checked dump target of ``set_dump_outputs(enabled, folder, format)`` (None when
    disabled); the folder is created when enabled.

    Raises:
        XrtError: 11010 for a bad format or folder type; 11002 when the folder cannot be made.
    """
    if not isinstance(format, str) or format not in DUMP_FORMATS:
        raise XrtError(
            ErrorCode.WRONG_TYPE,
            f"dump format must be one of {', '.join(DUMP_FORMATS)}, got {format!r}",
        )
    if not isinstance(folder, str | os.PathLike):
        raise XrtError(ErrorCode.WRONG_TYPE, f"dump folder must be a path, got {folder!r}")
    if not enabled:
        return None
    path = os.fspath(folder)
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        raise XrtError(
            ErrorCode.FILE_NOT_FOUND, f"cannot create dump folder {path!r}: {exc}"
        ) from None
    return DumpTarget(path, format)


def as_callback(callback: object) -> UnitCallback | None:
    """`callback` when callable or None; XrtError 11010 otherwise."""
    if callback is not None and not callable(callback):
        raise XrtError(ErrorCode.WRONG_TYPE, f"callback must be callable: {callback!r}")
    return callback  # type: ignore[return-value]


def time_scale(unit: object) -> float:
    """Seconds -> `unit` (``"s"``, ``"ms"`` or ``"us"``); XrtError 11010 for another unit."""
    scale = _TIME_UNITS.get(unit) if isinstance(unit, str) else None
    if scale is None:
        raise XrtError(
            ErrorCode.WRONG_TYPE, f"time unit must be one of {sorted(_TIME_UNITS)}: {unit!r}"
        )
    return scale
