"""Retrying gRPC calls to ``npu-emu serve``: what may be retried, by whom, and for how long.

Two layers, so that nothing is retried whose effect is unknown:

- **Transport failures** (the connection could not be made or broke: UNAVAILABLE with no
  answer from the server) are retried by gRPC itself, per the channel's service config
  (`SERVICE_CONFIG`), for the idempotent methods only: listing, counters, keep-alive,
  register reads and memory reads. A write, a batch, a wait or an open is never repeated
  blindly.
- **The server's own refusals** are never retried by gRPC: every status the server sends
  carries ``grpc-retry-pushback-ms: -1`` (gRPC's standard "do not retry"). When the server
  did nothing and the call will work later, it says so in trailing metadata:
  ``npu-emu-retry-reason`` (`REASON_RESTARTING`: the device's simulation worker is being
  restarted; `REASON_RESETTING`: the device is being cleared between two holders;
  `REASON_BUSY`: the device is leased, or none is free; `REASON_STARTING`: the server is
  still starting its devices) and ``npu-emu-retry-after-ms`` (when to try again). The
  runtime's own loop retries `REASON_RESTARTING` and `REASON_RESETTING` within a bounded
  budget (`DEFAULT_RETRY_S`, the URL's ``retry=``), `REASON_BUSY` only while
  ``Device.open(...?wait=SECONDS)`` waits, and `REASON_STARTING` always, up to
  `START_WAIT_S` (or a longer ``wait=``), with one line on stderr saying so: a client
  started right after its server (``make serve &``) waits for it instead of failing. The
  call during which a worker died carries no such key: its effect is unknown and it fails
  at once.

The key names and reasons are the wire's (`xrt.hw.wire`): one source for both sides. The
loop itself is `DeviceClient.unary` (`xrt.transport.grpc.calls`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from xrt.hw.wire import (
    NO_PUSHBACK,
    REASON_BUSY,
    REASON_RESETTING,
    REASON_RESTARTING,
    REASON_STARTING,
    RETRY_AFTER_KEY,
    RETRY_REASON_KEY,
)

__all__ = [
    "DEFAULT_RETRY_S",
    "NO_PUSHBACK",
    "REASON_BUSY",
    "REASON_RESETTING",
    "REASON_RESTARTING",
    "REASON_STARTING",
    "RETRY_AFTER_KEY",
    "RETRY_REASON_KEY",
    "SERVICE_CONFIG",
    "START_WAIT_S",
    "retry_hint",
]


DEFAULT_RETRY_S = 30.0
"""How long a call that meets a worker restart is retried (a restart takes 1-2 s here; one
that keeps failing is reported in the error once this budget is spent)."""

START_WAIT_S = 300.0
"""How long a client waits for a server that is still starting its devices (a worker
starts in seconds here; a loaded CI machine starting several takes longer)."""

_IDEMPOTENT = ("ListDevices", "GetCounters", "KeepAlive", "ReadRegister", "ReadMemory")

SERVICE_CONFIG = json.dumps(
    {
        "methodConfig": [
            {
                "name": [{"service": "npuemu.v1.DeviceService", "method": m} for m in _IDEMPOTENT],
                "retryPolicy": {
                    "maxAttempts": 5,
                    "initialBackoff": "0.1s",
                    "maxBackoff": "1s",
                    "backoffMultiplier": 2,
                    "retryableStatusCodes": ["UNAVAILABLE"],
                },
            }
        ]
    }
)
"""gRPC service config of the runtime's channels (option ``grpc.service_config``)."""


def retry_hint(metadata: Iterable[tuple[str, str | bytes]] | None) -> tuple[str, float]:
    """(reason, seconds to wait) the server put in a status's trailing metadata; ("", 0)
    when it did not mark the call as safe to retry."""
    reason, after_ms = "", 0.0
    for key, value in metadata or ():
        text = value.decode(errors="replace") if isinstance(value, bytes) else value
        if key == RETRY_REASON_KEY:
            reason = text
        elif key == RETRY_AFTER_KEY:
            try:
                after_ms = max(0.0, float(text))
            except ValueError:
                after_ms = 0.0
    return reason, after_ms / 1000
