"""`Context`: the devices an application runs on, with its log and error callbacks.

The AIC100 runtime's ``Context`` (docs/aic.md): made first, handed to everything else. It
holds the devices (URLs it opens and owns, or devices the caller opened), a log level, a
log callback and an error handler that gets the context's id with each critical error
(a device lost mid-run, an inference that failed on every activation).

With ``collect_device_logs=True`` (the AIC100 ``QAIC_CONTEXT_COLLECT_DEVICE_LOGS`` bit), the
device server's log lines about each device this context holds (lease, worker restarts,
checkpoints, faults) are streamed to the log callback as ``LogLevel`` records whose message
starts with ``device NAME:``; devices that cannot stream (a board, ``axi://``) say so once.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Callable, Iterable
from enum import IntEnum
from typing import Protocol

from xrt.device import Device
from xrt.errors import ErrorCode, XrtError

__all__ = ["Context", "ErrorHandler", "LogCallback", "LogLevel", "ProgramSource"]

_log = logging.getLogger("xrt.aic")
_ids = itertools.count(1)


class LogLevel(IntEnum):
    """The AIC100 ``QLogLevel``: the least severe record a context passes on."""

    DEBUG = logging.DEBUG
    INFO = logging.INFO
    WARN = logging.WARNING
    ERROR = logging.ERROR


LogCallback = Callable[[LogLevel, str], None]
"""``log_callback(level, message)``."""
ErrorHandler = Callable[[int, XrtError], None]
"""``error_handler(context_id, error)``: called for critical errors, from any thread."""


class ProgramSource(Protocol):
    """What `Context.find_device` and `InferenceSet` need of a program (an `xrt.aic.Qpc`)."""

    @property
    def target(self) -> str: ...


def _default_log(level: LogLevel, message: str) -> None:
    _log.log(int(level), "%s", message)


def _default_error(context_id: int, error: XrtError) -> None:
    _log.error("context %d: %s", context_id, error)


class Context:
    """Devices plus log and error callbacks (the AIC100 ``Context``).

    Args:
        devices: Device URLs (``grpc://HOST:PORT[/DEVICE]``, ``labgrid://PLACE``,
            ``axi://...``), opened here and closed by `close`, or opened `Device` objects,
            which stay the caller's. A URL given N times opens N devices (a server picks a
            free one for each).
        log_callback: Gets ``(level, message)`` for records at or above `log_level`;
            default: the ``xrt.aic`` logger.
        error_handler: Gets ``(context id, XrtError)`` for critical errors; default: logs
            them.
        log_level: The initial level (`set_log_level`).
        collect_device_logs: Stream the device server's log lines about these devices to
            `log_callback` (see the module docstring).

    Raises:
        XrtError: 11003 for no devices; a URL that does not open raises its own error, and
            the devices opened before it are closed again.
    """

    obj_name = "Context"

    def __init__(
        self,
        devices: Iterable[str | Device],
        log_callback: LogCallback | None = None,
        error_handler: ErrorHandler | None = None,
        *,
        log_level: LogLevel = LogLevel.INFO,
        collect_device_logs: bool = False,
    ) -> None:
        self.id = next(_ids)
        self._log_callback = log_callback or _default_log
        self._error_handler = error_handler or _default_error
        self._level = LogLevel(log_level)
        self._lock = threading.Lock()
        self._owned: list[Device] = []
        self._claimed: set[int] = set()
        self._closed = False
        self._log_streams: list[Callable[[], None]] = []
        given = [devices] if isinstance(devices, str | Device) else list(devices)
        if not given:
            raise XrtError(ErrorCode.OUT_OF_RANGE, "Context: no devices given")
        opened: list[Device] = []
        try:
            for d in given:
                if isinstance(d, Device):
                    opened.append(d)
                elif isinstance(d, str):
                    dev = Device.open(d)
                    self._owned.append(dev)
                    opened.append(dev)
                else:
                    raise XrtError(
                        ErrorCode.WRONG_TYPE, f"Context: {d!r} is neither a URL nor a Device"
                    )
        except BaseException:
            for dev in self._owned:
                dev.close()
            raise
        self.devices: tuple[Device, ...] = tuple(opened)
        self.log(LogLevel.INFO, f"context {self.id}: {len(opened)} device(s): {self._names()}")
        if collect_device_logs:
            self._start_device_logs()

    # -- logging and errors -------------------------------------------------------------------

    def set_log_level(self, level: LogLevel) -> None:
        """Pass on records at `level` and above."""
        self._level = LogLevel(level)

    def get_log_level(self) -> LogLevel:
        return self._level

    def log(self, level: LogLevel, message: str) -> None:
        """Give `message` to the log callback when `level` passes the context's level. A
        callback that raises is logged on ``xrt.aic`` and otherwise ignored (it must not
        stop an inference)."""
        if level < self._level:
            return
        try:
            self._log_callback(LogLevel(level), message)
        except Exception:
            _log.exception("context %d: the log callback raised", self.id)

    def report_error(self, error: XrtError) -> None:
        """Call the error handler with this context's id (errors it raises are logged)."""
        self.log(LogLevel.ERROR, f"context {self.id}: {error}")
        try:
            self._error_handler(self.id, error)
        except Exception:
            _log.exception("context %d: the error handler raised", self.id)

    # -- devices ------------------------------------------------------------------------------

    def _names(self) -> str:
        return ", ".join(d.name or repr(d) for d in self.devices)

    def find_device(self, program: ProgramSource | None = None) -> Device:
        """A device of this context no activation holds, of `program`'s target when given.

        Raises:
            XrtError: 11003 when every suitable device is taken (naming how many there
                are), 11010 when none is of the program's target, 11012 after `close`.
        """
        with self._lock:
            if self._closed:
                raise XrtError(ErrorCode.WRONG_ORDER, f"context {self.id} is closed")
            want = program.target if program is not None else None
            fits = [d for d in self.devices if want is None or d.target == want]
            if not fits:
                have = sorted({str(d.target) for d in self.devices})
                raise XrtError(
                    ErrorCode.WRONG_TYPE,
                    f"context {self.id} has no {want} device (its devices are {have})",
                )
            for d in fits:
                if id(d) not in self._claimed and not d.closed:
                    return d
            raise XrtError(
                ErrorCode.OUT_OF_RANGE,
                f"context {self.id}: all {len(fits)} {want or ''} device(s) are in use by "
                "activations; give the context more devices or ask for fewer activations",
            )

    def claim(self, device: Device) -> None:
        """Mark `device` as held by an activation (`find_device` skips it)."""
        with self._lock:
            self._claimed.add(id(device))

    def release(self, device: Device) -> None:
        """Give `device` back (an activation ended)."""
        with self._lock:
            self._claimed.discard(id(device))

    def claim_named(self, program: ProgramSource, names: Iterable[str]) -> list[Device]:
        """The devices called `names`, claimed together (all or none; AIC100 ``devMapping``).

        Raises:
            XrtError: 11010 for a name that is none of this context's devices or a device
                of another target than `program`'s; 11003 for one in use or named twice.
        """
        with self._lock:
            got: list[Device] = []
            for name in names:
                dev = next((d for d in self.devices if d.name == name), None)
                if dev is None:
                    raise XrtError(
                        ErrorCode.WRONG_TYPE,
                        f"dev_mapping names {name!r}: not a device of context {self.id} "
                        f"({self._names()})",
                    )
                if dev.target != program.target:
                    raise XrtError(
                        ErrorCode.WRONG_TYPE,
                        f"dev_mapping names {name!r}, a {dev.target} device; the program is "
                        f"for {program.target}",
                    )
                if id(dev) in self._claimed or dev in got or dev.closed:
                    raise XrtError(
                        ErrorCode.OUT_OF_RANGE, f"dev_mapping: device {name!r} is in use"
                    )
                got.append(dev)
            self._claimed.update(id(d) for d in got)
            return got

    def claim_devices(self, program: ProgramSource, count: int) -> list[Device]:
        """`count` free devices for `program`, claimed together (all or none)."""
        got: list[Device] = []
        try:
            for _ in range(count):
                dev = self.find_device(program)
                self.claim(dev)
                got.append(dev)
        except XrtError:
            for dev in got:
                self.release(dev)
            raise
        return got

    # -- device logs --------------------------------------------------------------------------

    def _start_device_logs(self) -> None:
        for dev in self.devices:
            try:
                self._log_streams.append(dev.follow_server_log(self._device_log_line))
            except XrtError as exc:
                self.log(
                    LogLevel.WARN,
                    f"context {self.id}: {dev!r} cannot stream device logs ({exc.message})",
                )

    def _device_log_line(self, level: int, device: str, message: str) -> None:
        self.log(_nearest_level(level), f"device {device}: {message}")

    # -- life cycle ---------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Stop the device log streams and close the devices this context opened (the
        caller's own devices stay open). Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        for stop in self._log_streams:
            stop()
        self._log_streams = []
        for dev in self._owned:
            dev.close()

    def __enter__(self) -> Context:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else self._names()
        return f"Context(id={self.id}, {state})"


def _nearest_level(level: int) -> LogLevel:
    for candidate in sorted(LogLevel, reverse=True):
        if level >= candidate:
            return candidate
    return LogLevel.DEBUG
