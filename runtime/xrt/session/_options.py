"""The debugging options of a `Session` and the results of its last run (the manual's
log, dump, callback, time profile and trace options): a base class of `Session`, kept
apart so the session's running logic stays readable."""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING

from xrt._checks import as_bool
from xrt.errors import ErrorCode, XrtError
from xrt.session.profile import OpTime, format_profile_table
from xrt.tensor import DUMP_FORMATS, Tensor
from xrt.timeline import TraceEvent, TraceRecorder

if TYPE_CHECKING:
    from xrt.backend._base import Backend
    from xrt.network import NetworkView, Operator
    from xrt.session._session import Callback

__all__ = ["SessionOptions"]

_TIME_UNITS = {"s": 1.0, "ms": 1e3, "us": 1e6}
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def _safe_name(name: str) -> str:
    return _SAFE.sub("_", name).strip("._") or "value"


class SessionOptions:
    """Options and results of a `Session`; `Session.__init__` sets every attribute below."""

    network_view: NetworkView
    backends: list[Backend]
    _producer: dict[str, Operator]
    _log_io: bool
    _log_time: bool
    _dump: tuple[str, str] | None
    _output_paths: dict[str, str]
    _pre: Callback | None
    _post: Callback | None
    _profile: bool
    _tracing: bool
    _trace: TraceRecorder | None
    _times: dict[int, OpTime]
    _io_s: float
    _total_s: float

    # -- options ------------------------------------------------------------------------------

    def set_log_io(self, enabled: bool) -> None:
        """Log each unit's inputs and outputs (logger ``xrt.session``, level INFO)."""
        self._log_io = as_bool(enabled, "enabled")

    def set_log_time(self, enabled: bool) -> None:
        """Log each unit's times (logger ``xrt.session``, level INFO); implies timing."""
        self._log_time = as_bool(enabled, "enabled")

    def set_dump_outputs(
        self, enabled: bool, folder: str | os.PathLike[str] = ".", format: str = "SFB"
    ) -> None:
        """Write every unit's outputs into `folder`, one file per value.

        Files are named ``<op id>_<value name>.<format>`` (the value name with characters
        other than letters, digits, ``.``, ``_`` and ``-`` replaced by ``_``; the format in
        lower case) and written with `Tensor.dump` in `format`, falling back from H to S
        and from Q to F where a tensor cannot give them (the file name shows the format
        written). The folder is created if needed.

        A merged subgraph (a HardOp) has one unit's outputs; its intermediates are dumped
        too where the backend can read them back (manual 1.4.3: the NPU backends compile
        their programs again so that every intermediate keeps its own bytes, and read each
        from where it lives, the ZG330's OCM included). Turning merging off
        (``auto_merge``) gives every operator its own unit instead.

        Raises:
            XrtError: 11010 for a bad format or types; 11002 when the folder cannot be made.
        """
        on = as_bool(enabled, "enabled")
        for b in self.backends:
            if hasattr(b, "keep_intermediates"):
                b.keep_intermediates = on
        if not isinstance(format, str) or format not in DUMP_FORMATS:
            raise XrtError(
                ErrorCode.WRONG_TYPE,
                f"dump format must be one of {', '.join(DUMP_FORMATS)}, got {format!r}",
            )
        if not isinstance(folder, str | os.PathLike):
            raise XrtError(ErrorCode.WRONG_TYPE, f"dump folder must be a path, got {folder!r}")
        if not on:
            self._dump = None
            return
        path = os.fspath(folder)
        try:
            os.makedirs(path, exist_ok=True)
        except OSError as exc:
            raise XrtError(
                ErrorCode.FILE_NOT_FOUND, f"cannot create dump folder {path!r}: {exc}"
            ) from None
        self._dump = (path, format)

    def set_pre_callback(self, callback: Callback | None) -> None:
        """Call ``callback(session, op, backend, inputs)`` before each unit (None: none)."""
        if callback is not None and not callable(callback):
            raise XrtError(ErrorCode.WRONG_TYPE, f"callback must be callable: {callback!r}")
        self._pre = callback

    def set_post_callback(self, callback: Callback | None) -> None:
        """Call ``callback(session, op, backend, outputs)`` after each unit (None: none)."""
        if callback is not None and not callable(callback):
            raise XrtError(ErrorCode.WRONG_TYPE, f"callback must be callable: {callback!r}")
        self._post = callback

    def enable_time_profile(self, enabled: bool = True) -> None:
        """Record per-unit wall, memory, hardware and other time (`time_profile_results`)."""
        self._profile = as_bool(enabled, "enabled")

    # -- results of the last call -------------------------------------------------------------

    def enable_trace(self, enabled: bool = True) -> None:
        """Record a timeline of each run: units, and what backends add (DMA, NPU units)."""
        self._tracing = as_bool(enabled, "enabled")

    def trace_events(self) -> list[TraceEvent]:
        """The timeline of the current (or last) run while tracing was enabled."""
        return list(self._trace.events) if self._trace is not None else []

    def write_trace(self, path: str | os.PathLike[str]) -> None:
        """Write the last run's timeline as Chrome trace JSON (opens in ui.perfetto.dev).

        Raises:
            XrtError: 11012 when no traced run happened; 11002 when the file cannot be
                written.
        """
        if self._trace is None:
            raise XrtError(ErrorCode.WRONG_ORDER, "no traced run: enable_trace(True), then forward")
        self._trace.write(path)

    def time_profile_results(self) -> dict[int, OpTime]:
        """Op id -> `OpTime` for each unit run by the current (or last) run, in order.

        Filled while profiling is enabled (or `set_log_time` is on); a merged subgraph is
        filed under its first op id.
        """
        return dict(self._times)

    def total_time(self, unit: str = "s") -> float:
        """Wall time of the last `forward` or `step_to` call (always measured).

        Args:
            unit: ``"s"`` (default), ``"ms"`` or ``"us"``: the manual's
                ``totalTime<seconds>()`` / ``<milliseconds>`` / ``<microseconds>``.
        """
        scale = _TIME_UNITS.get(unit) if isinstance(unit, str) else None
        if scale is None:
            raise XrtError(
                ErrorCode.WRONG_TYPE, f"time unit must be one of {sorted(_TIME_UNITS)}: {unit!r}"
            )
        return self._total_s * scale

    def profile_table(self) -> str:
        """`time_profile_results` as a text table (milliseconds), with totals."""
        return format_profile_table(
            self._times, self._total_s, self._io_s, f"time profile of {self._title()}"
        )

    def _title(self) -> str:
        graph = self.network_view
        full = graph.op_ids == graph.network.op_ids
        return f"network {graph.network.name!r}" if full else f"view {graph.name!r}"

    def _dump_values(self, produced: list[tuple[str, Tensor]]) -> None:
        assert self._dump is not None
        folder, fmt = self._dump
        for name, t in produced:
            op = self._producer[name]
            written = t.resolve_dump_format(fmt, fallback=True)
            path = os.path.join(folder, f"{op.op_id}_{_safe_name(name)}.{written.lower()}")
            t.dump(path, written)

    def output_paths(self) -> dict[str, str]:
        """How each output of the last `forward` reached its tensor: ``"written by the
        engine at ADDR (REGION)"`` (a ZG330 program stored it into the caller-placed tensor,
        manual 1.3.2), ``"copied: WHY"`` (the backend copied it in, and why it could not
        store it directly) or ``"copied by the session"``."""
        return dict(self._output_paths)
