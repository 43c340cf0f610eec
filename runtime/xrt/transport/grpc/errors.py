"""The one place where gRPC outcomes become `XrtError`s.

Every call `xrt.transport.grpc` makes goes through `rpc_error` when it fails; register
results and interrupt waits go through `register_status_error`. The table is documented in
``docs/runtime-transports.md``; keep the two in step.
"""

from __future__ import annotations

import grpc

from xrt.errors import ErrorCode, XrtError
from xrt.hw.wire import ADMIN_KEY, XRT_CODE_KEY, RegisterStatus

__all__ = ["STATUS_TABLE", "register_status_error", "rpc_error"]

_UNAVAILABLE = (
    "the server is shutting down, or the device's simulation worker is restarting: retry shortly"
)

_CONNECTION_HINTS = (
    # (text in gRPC's details, what it means): failures before any server code ran.
    (
        "connection refused",
        "nothing listens at that address and port (connection refused): is `npu-emu serve` "
        "running there?",
    ),
    (
        "wrong_version_number",
        "TLS mismatch: this URL asks for TLS (grpcs://) but the server does not serve it: "
        "use grpc://",
    ),
    (
        "certificate_verify_failed",
        "the server's TLS certificate is not trusted: give its CA bundle as ?ca=FILE",
    ),
    (
        "socket closed",
        "the server closed the connection: if it serves TLS, use grpcs://HOST:PORT?ca=FILE "
        "(plain gRPC cannot talk to a TLS port)",
    ),
    ("domain name not found", "the host name does not resolve"),
    ("dns resolution failed", "the host name does not resolve"),
    ("network is unreachable", "no route to that address"),
    ("no route to host", "no route to that address"),
)


def _unavailable_hint(details: str) -> str:
    """What an UNAVAILABLE means: a connection that never reached the server (refused, TLS
    mismatch, unknown host), or a server that answered it (restart, shutdown)."""
    lowered = details.lower()
    for text, hint in _CONNECTION_HINTS:
        if text in lowered:
            return hint
    return _UNAVAILABLE


STATUS_TABLE: dict[grpc.StatusCode, tuple[ErrorCode, str]] = {
    # The request itself was malformed or out of range (the runtime checks first, so these
    # mean a server with a different memory map or a bug).
    grpc.StatusCode.INVALID_ARGUMENT: (ErrorCode.OUT_OF_RANGE, ""),
    grpc.StatusCode.OUT_OF_RANGE: (ErrorCode.OUT_OF_RANGE, ""),
    # A device name the server does not have (the URL's path).
    grpc.StatusCode.NOT_FOUND: (ErrorCode.FILE_NOT_FOUND, ""),
    # Lease state: the device is held by someone else, no free device, no lease.
    grpc.StatusCode.FAILED_PRECONDITION: (ErrorCode.WRONG_ORDER, ""),
    # The lease ended under us (closed, expired, the server restarted the device).
    grpc.StatusCode.ABORTED: (ErrorCode.WRONG_ORDER, "open the device again"),
    grpc.StatusCode.UNAUTHENTICATED: (
        ErrorCode.DEVICE_INTERNAL,
        "give the server's token as ?token=... in the URL or in NPU_EMU_TOKEN",
    ),
    grpc.StatusCode.PERMISSION_DENIED: (ErrorCode.DEVICE_INTERNAL, ""),
    grpc.StatusCode.UNAVAILABLE: (ErrorCode.DEVICE_INTERNAL, _UNAVAILABLE),
    grpc.StatusCode.DEADLINE_EXCEEDED: (ErrorCode.TIMEOUT, ""),
    grpc.StatusCode.RESOURCE_EXHAUSTED: (ErrorCode.DEVICE_INTERNAL, ""),
    grpc.StatusCode.CANCELLED: (ErrorCode.DEVICE_INTERNAL, ""),
    grpc.StatusCode.UNIMPLEMENTED: (
        ErrorCode.DEVICE_INTERNAL,
        "the server does not know this call: its protocol is older than this runtime's",
    ),
    grpc.StatusCode.INTERNAL: (ErrorCode.DEVICE_INTERNAL, ""),
    grpc.StatusCode.UNKNOWN: (ErrorCode.DEVICE_INTERNAL, ""),
    grpc.StatusCode.DATA_LOSS: (ErrorCode.DEVICE_INTERNAL, ""),
}
"""gRPC status -> (XrtError code, hint appended to the server's message); an UNAVAILABLE's
hint depends on gRPC's details (`_CONNECTION_HINTS`)."""


def rpc_error(exc: grpc.RpcError, what: str) -> XrtError:
    """The `XrtError` for a failed call.

    Args:
        exc: What grpc raised (a `grpc.RpcError`, which is also a `grpc.Call`).
        what: The operation, for the message (``"read of register 0x80000000 on ..."``).
    """
    code_fn = getattr(exc, "code", None)
    status = code_fn() if callable(code_fn) else grpc.StatusCode.UNKNOWN
    details_fn = getattr(exc, "details", None)
    details = (details_fn() if callable(details_fn) else None) or str(exc) or "no details"
    xcode, hint = STATUS_TABLE.get(status, (ErrorCode.DEVICE_INTERNAL, ""))
    xcode = _code_of_server(exc) or xcode
    if status == grpc.StatusCode.UNAVAILABLE:
        hint = _unavailable_hint(details)
    elif ADMIN_KEY in details:  # the operator's credential (observers), not the token
        hint = "give the server's admin token in NPU_EMU_ADMIN_TOKEN"
    name = status.name if isinstance(status, grpc.StatusCode) else str(status)
    message = f"{what}: {details} [{name}]"
    if hint:
        message += f"; {hint}"
    return XrtError(xcode, message)


def _code_of_server(exc: grpc.RpcError) -> ErrorCode | None:
    """The manual's code the server named for its refusal (`XRT_CODE_KEY`), if any."""
    trailing = getattr(exc, "trailing_metadata", None)
    try:
        pairs = (trailing() if callable(trailing) else None) or ()
        for key, value in pairs:
            if key == XRT_CODE_KEY:
                return ErrorCode(int(value))
    except (ValueError, TypeError):
        return None  # a code this runtime does not know: the status's stands
    return None


def register_status_error(
    status: int,
    *,
    index: int | None,
    op: str,
    address: int,
    value: int,
    region: str,
    extra: str = "",
) -> XrtError:
    """The `XrtError` for a register access (single, or op `index` of a batch) that did
    not end OK.

    SLVERR/DECERR (the block refused the access, or nothing decodes the address) are device
    errors (11014); POLL_TIMEOUT is a timeout (11015), as `RegRegion.poll` promises.
    """
    op_at = op if index is None else f"{op} (op {index})"
    where = f"{op_at} of register {address:#x} in region {region!r}"
    if status == RegisterStatus.POLL_TIMEOUT:
        return XrtError(ErrorCode.TIMEOUT, f"{where} gave up{extra}; last value {value:#x}")
    if status == RegisterStatus.SLVERR:
        return XrtError(
            ErrorCode.DEVICE_INTERNAL,
            f"{where} answered SLVERR: no register at that offset, or its access type "
            f"refuses a {op}",
        )
    if status == RegisterStatus.DECERR:
        return XrtError(
            ErrorCode.DEVICE_INTERNAL, f"{where} answered DECERR: nothing decodes that address"
        )
    return XrtError(ErrorCode.DEVICE_INTERNAL, f"{where}: the server answered status {status}")
