"""Where the server's token and TLS material come from, and when serving is refused.

- Token: ``$NPU_EMU_TOKEN`` or ``--token-file`` (first line), or ``--token`` (discouraged:
  a command line is readable by every local user in /proc/PID/cmdline).
- TLS: ``--tls-cert`` + ``--tls-key`` (PEM); ``--tls-client-ca`` adds mutual TLS (client
  certificates signed by that CA are required).
- A non-loopback address with neither a token nor TLS is refused unless the operator passes
  ``--allow-insecure-remote``.
- Admin token (observers of held devices, `npuemu.server.observer`): ``--admin-token-file``
  or ``$NPU_EMU_ADMIN_TOKEN_FILE`` (a file's first line; never a value on the command
  line). It must differ from the client token: otherwise every client could observe.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import stat
from dataclasses import dataclass
from pathlib import Path

import grpc

__all__ = ["SecurityError", "SecurityOptions", "TlsFiles", "is_loopback", "security_options"]

TOKEN_ENV = "NPU_EMU_TOKEN"
ADMIN_TOKEN_FILE_ENV = "NPU_EMU_ADMIN_TOKEN_FILE"


class SecurityError(ValueError):
    """The token or TLS options are unusable, or the combination is refused."""


@dataclass(frozen=True)
class TlsFiles:
    """PEM bytes of the server's TLS identity (and of the client CA for mutual TLS)."""

    cert: bytes
    key: bytes
    client_ca: bytes | None = None

    def credentials(self) -> grpc.ServerCredentials:
        return grpc.ssl_server_credentials(
            [(self.key, self.cert)],
            root_certificates=self.client_ca,
            require_client_auth=self.client_ca is not None,
        )


@dataclass(frozen=True)
class SecurityOptions:
    token: str | None
    tls: TlsFiles | None
    admin_token: str | None = None  # observers (None: observing is off)
    warnings: tuple[str, ...] = ()  # said at start, not refused


def is_loopback(host: str) -> bool:
    """True when `host` names only this machine (127.0.0.0/8, ::1, localhost)."""
    if host in ("localhost", "ip6-localhost"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        try:
            return all(
                ipaddress.ip_address(info[4][0]).is_loopback
                for info in socket.getaddrinfo(host, None)
            )
        except (OSError, ValueError):
            return False


def _read(path: Path, what: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise SecurityError(f"cannot read {what} {path}: {exc.strerror}") from None


def _first_line(path: Path, what: str) -> str:
    lines = _read(path, what).decode(errors="replace").splitlines()
    value = lines[0].strip() if lines else ""
    if not value:
        raise SecurityError(f"{what} {path} is empty")
    return value


def _admin_token(admin_token_file: Path | None, token: str | None) -> tuple[str | None, str]:
    """The admin token and a warning about its file ("" if none)."""
    if admin_token_file is None:
        env = os.environ.get(ADMIN_TOKEN_FILE_ENV)
        admin_token_file = Path(env) if env else None
    if admin_token_file is None:
        return None, ""
    admin = _first_line(admin_token_file, "admin token file")
    if token is not None and admin == token:
        raise SecurityError(
            f"the admin token ({admin_token_file}) is the client token: every client could "
            "observe held devices; give the operator a token of its own"
        )
    warning = ""
    try:
        mode = admin_token_file.stat().st_mode
    except OSError:
        mode = 0
    if mode & (stat.S_IRGRP | stat.S_IROTH):
        warning = (
            f"admin token file {admin_token_file} is readable by other users "
            f"(mode {stat.S_IMODE(mode):o}): chmod 600 it"
        )
    return admin, warning


def security_options(
    *,
    host: str,
    token: str | None = None,
    token_file: Path | None = None,
    tls_cert: Path | None = None,
    tls_key: Path | None = None,
    tls_client_ca: Path | None = None,
    allow_insecure_remote: bool = False,
    admin_token_file: Path | None = None,
) -> SecurityOptions:
    """Resolve the token, the admin token and the TLS files; refuse what must not be served.

    Raises:
        SecurityError: unreadable or empty files, half a TLS identity, an admin token equal
            to the client token, or a non-loopback address with neither token nor TLS
            (without `allow_insecure_remote`).
    """
    if token_file is not None:
        if token:
            raise SecurityError("give the token once: --token or --token-file, not both")
        token = _first_line(token_file, "token file")
    elif not token:
        token = os.environ.get(TOKEN_ENV) or None
    if (tls_cert is None) != (tls_key is None):
        raise SecurityError("TLS needs both --tls-cert and --tls-key")
    if tls_client_ca is not None and tls_cert is None:
        raise SecurityError("--tls-client-ca (mutual TLS) needs --tls-cert and --tls-key")
    tls = None
    if tls_cert is not None and tls_key is not None:
        tls = TlsFiles(
            _read(tls_cert, "TLS certificate"),
            _read(tls_key, "TLS key"),
            _read(tls_client_ca, "client CA") if tls_client_ca is not None else None,
        )
    if not is_loopback(host) and not token and tls is None and not allow_insecure_remote:
        raise SecurityError(
            f"refusing to serve {host} (not loopback) with neither a token nor TLS: set "
            f"${TOKEN_ENV} or --token-file, or --tls-cert/--tls-key; or pass "
            "--allow-insecure-remote if anyone who can reach the port may use the devices"
        )
    admin, warning = _admin_token(admin_token_file, token)
    return SecurityOptions(token, tls, admin, (warning,) if warning else ())
