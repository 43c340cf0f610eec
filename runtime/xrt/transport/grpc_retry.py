"""The runtime's gRPC retry policy, under the name bench/ and the docs use: it lives in
`xrt.transport.grpc.retry` (what is retried, by whom, for how long)."""

from __future__ import annotations

from xrt.transport.grpc.retry import (
    DEFAULT_RETRY_S,
    NO_PUSHBACK,
    REASON_BUSY,
    REASON_RESETTING,
    REASON_RESTARTING,
    RETRY_AFTER_KEY,
    RETRY_REASON_KEY,
    SERVICE_CONFIG,
    retry_hint,
)

__all__ = [
    "DEFAULT_RETRY_S",
    "NO_PUSHBACK",
    "REASON_BUSY",
    "REASON_RESETTING",
    "REASON_RESTARTING",
    "RETRY_AFTER_KEY",
    "RETRY_REASON_KEY",
    "SERVICE_CONFIG",
    "retry_hint",
]
