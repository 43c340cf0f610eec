"""Device URLs, the registry of URL schemes and the default device's URL.

`DeviceURL.parse` splits ``scheme://host[:port][/path][?key=value&...]`` (hex and decimal
integers already converted). `register_device` registers the factory that opens a scheme's
URLs (or a scheme and host's); `xrt.device.Device.open` asks `find_factory`. A scheme
nobody registered is looked up among the entry points of the group ``xrt.devices``
(`ENTRY_POINT_GROUP`: name = scheme, value = the factory), loaded once and registered:
that is how the emulator adds ``sim://`` without the runtime ever importing it.

`default_device_url` is the one place that reads ``$XRT_DEVICE``.
"""

from __future__ import annotations

import importlib.metadata
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, TypeVar
from urllib.parse import parse_qsl, urlsplit

from xrt.errors import ErrorCode, XrtError

__all__ = [
    "DEFAULT_DEVICE_ENV",
    "EMBEDDED_DEVICE_URL",
    "ENTRY_POINT_GROUP",
    "DeviceFactory",
    "DeviceURL",
    "default_device_url",
    "entry_point_failure",
    "entry_point_summary",
    "find_factory",
    "register_device",
    "registered_devices",
    "unregister_device",
]

DEFAULT_DEVICE_ENV = "XRT_DEVICE"
"""The environment variable naming the default device's URL (``Device()``, ``xrt run``)."""

EMBEDDED_DEVICE_URL = "sim://buyi"
"""The default device when `DEFAULT_DEVICE_ENV` is not set: a simulated Buyi NPU owned by
the process (registered by the emulator's entry point)."""

ENTRY_POINT_GROUP = "xrt.devices"
"""Entry points of device URL schemes: name = scheme, value = a factory taking a
`DeviceURL` and returning a `Device`."""


def _param_value(text: str) -> int | str:
    """Query values: ints in Python syntax (``0x40000000``, ``4096``, ``-1``) become ints."""
    try:
        return int(text, 0)
    except ValueError:
        return text


@dataclass(frozen=True)
class DeviceURL:
    """A parsed device URL: ``scheme://host[:port][/path][?key=value&...]``.

    Attributes:
        scheme: Lower-case scheme (``"axi"``, ``"grpc"``, ``"host"``).
        host: Host part, or None when empty.
        port: Port number, or None.
        path: Path ('' when absent), e.g. ``"/npu0"``.
        params: Query parameters; values written as Python int literals (``0x40000000``,
            ``4096``) are ints, others stay strings.
        raw: The URL as given.
    """

    scheme: str
    host: str | None
    port: int | None
    path: str
    params: Mapping[str, int | str] = field(default_factory=dict, hash=False)
    raw: str = ""

    @classmethod
    def parse(cls, url: str) -> DeviceURL:
        """Parse `url`.

        Raises:
            XrtError: 11010 when `url` is no str, 11003 when it has no scheme or two
                (``grpc://grpc://...``), a bad port or a repeated query parameter. A
                parameter without a value (``?verbose``) is ''.
        """
        if not isinstance(url, str):
            raise XrtError(ErrorCode.WRONG_TYPE, f"device URL must be a str, got {url!r}")
        try:
            parts = urlsplit(url.strip())
        except ValueError as exc:
            raise XrtError(ErrorCode.OUT_OF_RANGE, f"device URL {url!r}: {exc}") from None
        if url.partition("?")[0].count("://") > 1:  # "grpc://grpc://...": a pasted prefix
            raise XrtError(
                ErrorCode.OUT_OF_RANGE,
                f"device URL {url!r} has two schemes: write one, as in 'grpc://HOST:PORT'",
            )
        if not parts.scheme or "://" not in url:
            raise XrtError(
                ErrorCode.OUT_OF_RANGE,
                f"device URL {url!r} needs a scheme, as in 'axi://ql100aiu' or 'host://'",
            )
        try:
            port = parts.port
        except ValueError as exc:
            raise XrtError(ErrorCode.OUT_OF_RANGE, f"device URL {url!r}: {exc}") from None
        params: dict[str, int | str] = {}
        for key, value in parse_qsl(parts.query, keep_blank_values=True):
            if key in params:
                raise XrtError(
                    ErrorCode.OUT_OF_RANGE, f"device URL {url!r} repeats parameter {key!r}"
                )
            params[key] = _param_value(value)
        return cls(
            scheme=parts.scheme.lower(),
            host=parts.hostname or None,
            port=port,
            path=parts.path,
            params=MappingProxyType(params),
            raw=url,
        )

    def get_int(self, name: str, default: int | None = None) -> int | None:
        """The int parameter `name`, or `default` when absent.

        Raises:
            XrtError: 11010 when the parameter is present but not an int.
        """
        if not isinstance(name, str):
            raise XrtError(ErrorCode.WRONG_TYPE, f"parameter name must be a str: {name!r}")
        value = self.params.get(name, default)
        if value is not None and not isinstance(value, int):
            raise XrtError(
                ErrorCode.WRONG_TYPE,
                f"device URL {self.raw!r}: parameter {name}={value!r} must be an integer",
            )
        return value

    def __str__(self) -> str:
        return self.raw


DeviceFactory = Callable[[DeviceURL], Any]
"""Opens a URL: called with the parsed `DeviceURL`, returns a `xrt.device.Device`."""
F = TypeVar("F", bound=Callable[..., Any])

_registry: dict[tuple[str, str | None], DeviceFactory] = {}
_registry_lock = threading.Lock()


def _pattern_key(pattern: str) -> tuple[str, str | None]:
    url = DeviceURL.parse(pattern)
    if url.port is not None or url.path not in ("", "/") or url.params:
        raise XrtError(
            ErrorCode.OUT_OF_RANGE,
            f"device pattern {pattern!r} may name only a scheme and a host ('axi://ql100aiu')",
        )
    return url.scheme, url.host


def _pattern_text(key: tuple[str, str | None]) -> str:
    return f"{key[0]}://{key[1] or ''}"


def register_device(pattern: str, *, replace: bool = False) -> Callable[[F], F]:
    """Class (or function) decorator: open URLs matching `pattern` with the decorated
    factory, which is called with the parsed `DeviceURL` and returns a `Device`.

    Args:
        pattern: ``"scheme://"`` for every URL of a scheme, or ``"scheme://host"`` for one
            host (looked up first).
        replace: Allow replacing an existing registration.

    Raises:
        XrtError: 11010 when the pattern is already taken by another factory, 11003 for a
            malformed pattern.
    """
    key = _pattern_key(pattern)

    def decorate(factory: F) -> F:
        if not callable(factory):
            raise XrtError(ErrorCode.WRONG_TYPE, f"device factory must be callable: {factory!r}")
        with _registry_lock:
            old = _registry.get(key)
            if old is not None and old is not factory and not replace:
                raise XrtError(
                    ErrorCode.WRONG_TYPE,
                    f"device URL pattern {_pattern_text(key)!r} is already registered to "
                    f"{getattr(old, '__qualname__', old)!r}",
                )
            _registry[key] = factory
        return factory

    return decorate


def unregister_device(pattern: str) -> None:
    """Remove a registration (no error when there is none)."""
    key = _pattern_key(pattern)
    with _registry_lock:
        _registry.pop(key, None)


def registered_devices() -> list[str]:
    """The registered URL patterns, sorted (``["host://", ...]``)."""
    with _registry_lock:
        return sorted(_pattern_text(k) for k in _registry)


def default_device_url(target: str | None = None) -> str:
    """The URL of the default device: ``$XRT_DEVICE`` when set and not empty, else the
    embedded simulator, `EMBEDDED_DEVICE_URL` (``sim://buyi``), or ``sim://TARGET`` when the
    caller needs a `target` (``xrt run`` of a ZG330 program container). The one place that
    reads the variable: ``Device()``, ``xrt run`` and the tools all ask here."""
    url = os.environ.get(DEFAULT_DEVICE_ENV, "").strip()
    if url:
        return url
    return f"sim://{target}" if target else EMBEDDED_DEVICE_URL


# Entry points of `ENTRY_POINT_GROUP`, each tried once: the schemes tried, and why the ones
# that failed to load did (for the unknown-scheme error).
_entry_points_tried: set[str] = set()
_entry_point_failures: dict[str, str] = {}
_entry_point_lock = threading.Lock()


def _device_entry_points() -> list[importlib.metadata.EntryPoint]:
    # Looked up through the module (not imported by name), so a test can stand in for
    # the installed metadata.
    return list(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP))


def entry_point_failure(scheme: str) -> str | None:
    """Why the entry point of `scheme` failed to load, if it did."""
    return _entry_point_failures.get(scheme)


def _load_entry_point(scheme: str) -> None:
    """Register the factory of the entry point named `scheme`, if one is installed (once per
    scheme and process; a failure is kept for the error message). Another thread asking
    meanwhile waits for the load (the registry's own lock stays free: the import may
    register schemes itself)."""
    with _entry_point_lock:
        if scheme in _entry_points_tried:
            return
        _entry_points_tried.add(scheme)
        found = [ep for ep in _device_entry_points() if ep.name == scheme]
        if not found:
            return
        ep = found[0]
        try:
            factory = ep.load()
        except Exception as exc:  # an entry point that cannot load is reported, not raised
            first = (str(exc).splitlines() or [""])[0]
            _entry_point_failures[scheme] = f"{ep.value}: {type(exc).__name__}: {first}"
            return
        if not callable(factory):
            _entry_point_failures[scheme] = f"{ep.value} is not callable"
            return
        with _registry_lock:  # a factory registered meanwhile (by the import) stays
            _registry.setdefault((scheme, None), factory)


def entry_point_summary() -> str:
    """The entry points of the group, for an error message (their load failures too)."""
    try:
        names = [f"{ep.name} ({ep.value})" for ep in _device_entry_points()]
    except Exception as exc:  # broken metadata must not hide the error being reported
        names = [f"unreadable: {exc}"]
    text = ", ".join(names) or "none"
    failed = "; ".join(f"{k} failed to load: {v}" for k, v in sorted(_entry_point_failures.items()))
    return text + (f"; {failed}" if failed else "")


def find_factory(url: DeviceURL) -> DeviceFactory | None:
    """The factory registered for `url`'s scheme and host, or for its scheme; an entry point
    of the scheme is loaded first when nothing is registered for it."""
    for attempt in range(2):
        with _registry_lock:
            factory = _registry.get((url.scheme, url.host)) or _registry.get((url.scheme, None))
        if factory is not None or attempt:
            return factory
        _load_entry_point(url.scheme)
    return None
