"""Reaching a server: ``grpc://`` and ``grpcs://`` URLs, TLS credentials, the channel.

`parse_url` turns a device URL into `GrpcURL` (the arguments of `GrpcTransport`), reading
the TLS files a ``grpcs://`` URL names; `open_channel` opens the channel with the message
size limits and the service config (gRPC's own retries, `xrt.transport.grpc.retry`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import grpc

from xrt.device import DeviceURL
from xrt.errors import ErrorCode, XrtError
from xrt.hw.wire import MAX_CHUNK
from xrt.transport.grpc.retry import DEFAULT_RETRY_S, SERVICE_CONFIG

__all__ = [
    "TLS_ENV",
    "URL_PARAMS",
    "GrpcURL",
    "open_channel",
    "parse_url",
    "tls_credentials",
]

URL_PARAMS = ("token", "local", "ring", "client", "ttl", "wait", "retry", "ca", "cert", "key")
"""Query parameters of ``grpc://`` URLs that the transport reads."""


TLS_ENV = {"ca": "NPU_EMU_TLS_CA", "cert": "NPU_EMU_TLS_CERT", "key": "NPU_EMU_TLS_KEY"}
"""Environment variables naming the TLS files a URL does not name."""


def tls_credentials(
    ca: str | None = None, cert: str | None = None, key: str | None = None
) -> grpc.ChannelCredentials:
    """Channel credentials for ``grpcs://``: files from the arguments or the environment.

    Raises:
        XrtError: 11002 when a file cannot be read, 11003 for a certificate without its key.
    """
    paths = {"ca": ca, "cert": cert, "key": key}
    data: dict[str, bytes | None] = {}
    for name, path in paths.items():
        path = path or os.environ.get(TLS_ENV[name]) or None
        if path is None:
            data[name] = None
            continue
        try:
            data[name] = Path(path).read_bytes()
        except OSError as exc:
            raise XrtError(
                ErrorCode.FILE_NOT_FOUND, f"TLS {name} file {path}: {exc.strerror}"
            ) from None
    if (data["cert"] is None) != (data["key"] is None):
        raise XrtError(ErrorCode.OUT_OF_RANGE, "mutual TLS needs both a client cert and its key")
    return grpc.ssl_channel_credentials(data["ca"], data["key"], data["cert"])


def open_channel(address: str, tls: grpc.ChannelCredentials | None) -> grpc.Channel:
    """A channel to ``HOST:PORT``: plain, or TLS with `tls`; messages up to a stream chunk
    (and its framing), gRPC's retries per `SERVICE_CONFIG`."""
    options = [
        ("grpc.max_receive_message_length", MAX_CHUNK + (64 << 10)),
        ("grpc.max_send_message_length", MAX_CHUNK + (64 << 10)),
        # Transport failures of idempotent calls are retried by gRPC (grpc.retry).
        ("grpc.service_config", SERVICE_CONFIG),
    ]
    if tls is None:
        return grpc.insecure_channel(address, options=options)
    return grpc.secure_channel(address, tls, options=options)


@dataclass(frozen=True)
class GrpcURL:
    """What a ``grpc://`` or ``grpcs://`` URL asks for: the arguments of `GrpcTransport`."""

    address: str
    device: str
    token: str | None
    local: bool
    ring: bool
    client: str | None
    lease_ttl_s: float | None
    tls: grpc.ChannelCredentials | None
    wait_s: float
    retry_s: float


def parse_url(url: DeviceURL | str) -> GrpcURL:
    """Read a ``grpc://`` URL (see `xrt.transport.grpc`); a ``grpcs://`` URL's TLS files too.

    Raises:
        XrtError: 11003 without a host or port, 11010 for bad parameter values; those of
            `tls_credentials`.
    """
    u = DeviceURL.parse(url) if isinstance(url, str) else url
    if u.scheme not in ("grpc", "grpcs"):
        raise XrtError(ErrorCode.WRONG_TYPE, f"{u.raw!r} is not a grpc:// or grpcs:// URL")
    if not u.host or u.port is None:
        raise XrtError(
            ErrorCode.OUT_OF_RANGE,
            f"device URL {u.raw!r} needs a host and a port: grpc://HOST:PORT[/DEVICE]",
        )
    name = u.path.strip("/")
    if "/" in name:
        raise XrtError(ErrorCode.OUT_OF_RANGE, f"device URL {u.raw!r}: the path is one device name")
    raw = dict(parse_qsl(urlsplit(u.raw.strip()).query, keep_blank_values=True))
    local, ring = u.get_int("local", 1), u.get_int("ring", 1)
    for key, value in (("local", local), ("ring", ring)):
        if value not in (0, 1):
            raise XrtError(
                ErrorCode.WRONG_TYPE, f"device URL {u.raw!r}: {key}={value} must be 0 or 1"
            )
    ttl_text = u.params.get("ttl")
    ttl: float | None = None
    if ttl_text is not None:
        try:
            ttl = float(ttl_text)
        except ValueError:
            raise XrtError(
                ErrorCode.WRONG_TYPE, f"device URL {u.raw!r}: ttl={ttl_text!r} is no number"
            ) from None
    seconds = {}
    for key, default in (("wait", 0.0), ("retry", DEFAULT_RETRY_S)):
        text = raw.get(key)
        try:
            seconds[key] = float(text) if text else default
            if not 0 <= seconds[key] <= 86_400:
                raise ValueError
        except ValueError:
            raise XrtError(
                ErrorCode.WRONG_TYPE,
                f"device URL {u.raw!r}: {key}={text!r} is no number of seconds in [0, 86400]",
            ) from None
    tls = None
    if u.scheme == "grpcs":
        tls = tls_credentials(raw.get("ca"), raw.get("cert"), raw.get("key"))
    elif any(raw.get(k) for k in ("ca", "cert", "key")):
        raise XrtError(ErrorCode.WRONG_TYPE, f"device URL {u.raw!r}: ca/cert/key need grpcs://")
    host = f"[{u.host}]" if ":" in u.host else u.host
    return GrpcURL(
        address=f"{host}:{u.port}",
        device=name,
        token=raw.get("token") or None,  # the raw text: tokens may look like numbers
        local=bool(local),
        ring=bool(ring),
        client=raw.get("client") or None,
        lease_ttl_s=ttl,
        tls=tls,
        wait_s=seconds["wait"],
        retry_s=seconds["retry"],
    )
