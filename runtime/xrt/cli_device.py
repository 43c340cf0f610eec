"""The one address syntax of the ``xrt`` and ``npu-emu`` commands: ``--device/-d URL``.

Every command that talks to a device or a server takes its address as a device URL
(docs/runtime-transports.md), given with `add_device_option` and read with
`device_from_args`, so the option, its default (``$XRT_DEVICE``) and its checks are the
same everywhere. A bad URL (``grpc://grpc://...``, an unknown scheme, a server without a
port) is an `XrtError` whose message names the URL and what was expected.

The spellings before (``--server HOST:PORT``, ``$NPU_EMU_SERVER``, a positional URL or
device name) still work for one release; each use prints one line on stderr naming the new
spelling.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from xrt.device_url import DEFAULT_DEVICE_ENV, DeviceURL, entry_point_summary, find_factory
from xrt.errors import ErrorCode, XrtError

__all__ = [
    "DEFAULT_SERVER_URL",
    "LEGACY_SERVER_ENV",
    "SERVER_SCHEMES",
    "add_device_option",
    "check_device_url",
    "deprecated",
    "device_from_args",
]

DEFAULT_SERVER_URL = "grpc://127.0.0.1:50051"
"""Where a server command looks when neither ``--device`` nor ``$XRT_DEVICE`` says: the
address ``npu-emu serve`` binds by default."""

LEGACY_SERVER_ENV = "NPU_EMU_SERVER"
"""The server's HOST:PORT before ``$XRT_DEVICE`` (deprecated)."""

SERVER_SCHEMES = ("grpc", "grpcs")
"""The schemes of a device server (``npu-emu devices``, ``health``, ``wait``, ``--observe``)."""


def add_device_option(
    parser: argparse.ArgumentParser,
    *,
    help: str | None = None,
    legacy_server: bool = False,
) -> None:
    """Add ``--device/-d URL`` (dest ``device``) to `parser`; with `legacy_server`, the
    deprecated ``--server HOST:PORT`` too (dest ``legacy_server``, hidden from --help)."""
    parser.add_argument(
        "--device",
        "-d",
        metavar="URL",
        default=None,
        help=help
        or "the device or server: grpc://HOST:PORT[/DEVICE], sim://buyi, ... (default "
        f"${DEFAULT_DEVICE_ENV})",
    )
    if legacy_server:
        parser.add_argument("--server", dest="legacy_server", default=None, help=argparse.SUPPRESS)


def deprecated(prog: str, old: str, new: str) -> None:
    """The one stderr line an old spelling gets: what to write instead."""
    print(
        f"{prog}: {old} is deprecated and goes in the next release: use {new}",
        file=sys.stderr,
        flush=True,
    )


def _known_schemes() -> str:
    from xrt.device_url import registered_devices

    return f"registered: {', '.join(registered_devices()) or 'none'}; entry points: " + (
        entry_point_summary()
    )


def check_device_url(text: str, *, schemes: Sequence[str] | None = None) -> DeviceURL:
    """Parse `text` as a device URL a command can use, or say why not.

    Args:
        text: The URL as the user wrote it.
        schemes: The schemes the command accepts (default: any a factory is known for).

    Raises:
        XrtError: naming `text` and what was expected: 11003 for two schemes, no scheme,
            a scheme not one of `schemes`, a grpc URL without its port; 11010 for a scheme
            nobody opens.
    """
    url = DeviceURL.parse(text)
    if schemes is not None and url.scheme not in schemes:
        wanted = " or ".join(f"{s}://" for s in schemes)
        raise XrtError(
            ErrorCode.OUT_OF_RANGE,
            f"device URL {text!r}: this command needs a server's URL, {wanted}HOST:PORT",
        )
    if url.scheme in SERVER_SCHEMES:
        if not url.host or url.port is None:
            raise XrtError(
                ErrorCode.OUT_OF_RANGE,
                f"device URL {text!r} needs a host and a port: {url.scheme}://HOST:PORT[/DEVICE]",
            )
    elif find_factory(url) is None:  # 11010 as `Device.open` says it
        raise XrtError(
            ErrorCode.WRONG_TYPE,
            f"device URL {text!r}: no device opens scheme {url.scheme!r} ({_known_schemes()})",
        )
    return url


def _legacy_server_url(text: str) -> str:
    """``--server``'s HOST:PORT (or a server URL) as a URL."""
    text = text.strip()
    return text if "://" in text else f"grpc://{text}"


def device_from_args(
    args: argparse.Namespace,
    prog: str,
    *,
    name: str | None = None,
    schemes: Sequence[str] | None = None,
    server_default: bool = False,
) -> str | None:
    """The device URL a command was given, checked (`check_device_url`).

    In order: ``--device``; the deprecated ``--server`` (with `name`, the deprecated
    positional device name or URL, as its path); ``$XRT_DEVICE``; the deprecated
    ``$NPU_EMU_SERVER``; with `server_default`, `DEFAULT_SERVER_URL`; else None. Each old
    spelling prints its deprecation line.

    Raises:
        XrtError: 11003 for a bad URL (`check_device_url`), or both spellings at once.
    """
    url: str | None = args.device
    legacy = getattr(args, "legacy_server", None)
    if name is not None and "://" in name:  # a positional URL
        if url is not None:
            raise XrtError(
                ErrorCode.OUT_OF_RANGE, f"give the device once: --device {url} or {name}"
            )
        deprecated(prog, f"the positional URL {name!r}", f"--device {name}")
        url, name = name, None
    if legacy is not None:
        if url is not None:
            raise XrtError(
                ErrorCode.OUT_OF_RANGE,
                f"give --device {url} or --server {legacy}, not both (--server is deprecated)",
            )
        url = _legacy_server_url(legacy)
        deprecated(prog, f"--server {legacy}", f"--device {url}{'/' + name if name else ''}")
    explicit = url is not None
    if url is None:
        url = os.environ.get(DEFAULT_DEVICE_ENV, "").strip() or None
    if url is None and os.environ.get(LEGACY_SERVER_ENV, "").strip():
        url = _legacy_server_url(os.environ[LEGACY_SERVER_ENV])
        deprecated(prog, f"${LEGACY_SERVER_ENV}", f"--device {url} or ${DEFAULT_DEVICE_ENV}")
    if url is None and (server_default or name is not None):
        url = DEFAULT_SERVER_URL
    if url is None:
        return None
    parsed = check_device_url(url, schemes=schemes)
    if name is not None:
        base, _, query = url.partition("?")
        if parsed.path.strip("/") and not explicit:  # $XRT_DEVICE's device: the name wins
            base = base[: len(base) - len(parsed.path)]
        elif parsed.path.strip("/"):
            raise XrtError(
                ErrorCode.OUT_OF_RANGE,
                f"device {name!r} given twice: {url} names {parsed.path.strip('/')!r} already",
            )
        if legacy is None:  # --server said it already
            deprecated(prog, f"the positional device {name!r}", f"--device {url}/{name}")
        url = f"{base.rstrip('/')}/{name}" + (f"?{query}" if query else "")
    return url
