"""What one client can hold of the server, and the descriptors the server keeps for itself.

A server must keep serving whatever its clients do, so every resource a client can make it
hold is bounded:

- **Memory streams.** A WriteMemory stream is staged whole before any byte is written (a
  refused stream changes nothing), so each open stream holds up to its declared length in
  server memory. `StreamBudget` admits a stream only when its lease has fewer than
  `MAX_STREAMS_PER_LEASE` open and the bytes staged by all streams stay under
  `MAX_STAGED_BYTES`; otherwise RESOURCE_EXHAUSTED, before anything is received.
- **Descriptors and connections.** At start the server raises its soft descriptor limit to
  the hard limit and sizes the gRPC port's connection bound to what is left once the
  devices (memory files at every lease end, worker sockets), ``local.sock``'s clients and
  the server's own descriptors are counted (`plan_descriptors`: `MAX_CONNECTIONS` when the
  limit allows, with a warning when it does not). The port refuses connections past the
  bound (``grpc.max_allowed_incoming_connections``) and drops one that has not finished
  its handshake within `HANDSHAKE_TIMEOUT_S`; ``local.sock`` serves at most its own bound at
  a time (`npuemu.server.local_handout`). So no flood of idle connections can take the
  descriptors a lease end needs.
- **Peers that stop answering.** The server pings every connection (HTTP/2 keepalive,
  `keepalive_options`, derived from ``--lease-ttl``) and closes one whose peer does not
  answer: a client that is stopped (SIGSTOP, a debugger) or gone without a FIN loses its
  streams, its HoldLease among them, whatever its version. Clients may ping the server
  too, down to every `CLIENT_PING_MIN_S`, without being told off (GOAWAY too_many_pings).
"""

from __future__ import annotations

import logging
import resource
from collections import Counter
from dataclasses import dataclass, field

import grpc

from npuemu.server.errors import ServiceError

__all__ = [
    "FDS_PER_DEVICE",
    "HANDSHAKE_TIMEOUT_S",
    "MAX_CONNECTIONS",
    "MAX_STAGED_BYTES",
    "MAX_STREAMS_PER_LEASE",
    "StreamBudget",
    "keepalive_options",
    "plan_descriptors",
]


log = logging.getLogger("npuemu.server")

MAX_STREAMS_PER_LEASE = 4
MAX_STAGED_BYTES = 256 << 20  # all WriteMemory streams of the server together
MAX_CONNECTIONS = 256  # on the gRPC port, when the descriptor limit allows
MIN_CONNECTIONS = 16
HANDSHAKE_TIMEOUT_S = 10.0  # a connection that has not spoken HTTP/2 by then is dropped
FDS_PER_DEVICE = 16  # memory files (old and new at a lease end), worker sockets, its log
FD_HEADROOM = 128  # the server's own: listening sockets, local.sock clients, logs, build
# Keepalive pings: every TTL/2 within these bounds, an answer due within TTL/2 (at least
# 2 s: a live but loaded peer must not be dropped; at most 20 s).
KEEPALIVE_TIME_S = (1.0, 60.0)
KEEPALIVE_TIMEOUT_S = (2.0, 20.0)
CLIENT_PING_MIN_S = 1.0  # clients' own keepalive pings are welcome this often


def keepalive_options(lease_ttl_s: float) -> list[tuple[str, int]]:
    """gRPC server options that close a connection whose peer stops answering within
    about the lease TTL (a ping every TTL/2, an answer due within TTL/2, within bounds)."""
    if not lease_ttl_s > 0:
        raise ValueError(f"lease TTL must be positive: {lease_ttl_s!r}")
    time_s = min(max(lease_ttl_s / 2, KEEPALIVE_TIME_S[0]), KEEPALIVE_TIME_S[1])
    timeout_s = min(max(lease_ttl_s / 2, KEEPALIVE_TIMEOUT_S[0]), KEEPALIVE_TIMEOUT_S[1])
    return [
        ("grpc.keepalive_time_ms", round(time_s * 1000)),
        ("grpc.keepalive_timeout_ms", round(timeout_s * 1000)),
        # gRPC lets any ping (keepalive's too) wait for its answer this long (default 60 s)
        ("grpc.http2.ping_timeout_ms", round(timeout_s * 1000)),
        # Idle connections too: a stopped holder's HoldLease may be its only stream.
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.max_pings_without_data", 0),  # keep pinging an idle connection
        # (GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS)
        ("grpc.http2.min_ping_interval_without_data_ms", round(CLIENT_PING_MIN_S * 1000)),
    ]


def plan_descriptors(devices: int, local_clients: int) -> tuple[int, int]:
    """Raise the soft limit on open descriptors to the hard one; return (the limit, the
    connection bound of the gRPC port that leaves the rest their descriptors)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, 1 << 20) if hard != resource.RLIM_INFINITY else 1 << 20
    if soft < want:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
            soft = want
        except (ValueError, OSError) as exc:
            log.warning("cannot raise the descriptor limit from %d to %d: %s", soft, want, exc)
    reserved = local_clients + devices * FDS_PER_DEVICE + FD_HEADROOM
    connections = min(MAX_CONNECTIONS, soft - reserved)
    if connections < MAX_CONNECTIONS:
        connections = max(MIN_CONNECTIONS, connections)
        log.warning(
            "open-file limit %d leaves room for %d client connections (%d wanted): raise it "
            "(ulimit -n, LimitNOFILE=) to serve more clients at once",
            soft,
            connections,
            MAX_CONNECTIONS,
        )
    return soft, connections


@dataclass
class StreamBudget:
    """Open WriteMemory streams per lease, and the bytes they stage together."""

    max_per_lease: int = MAX_STREAMS_PER_LEASE
    max_bytes: int = MAX_STAGED_BYTES
    staged: int = 0
    _open: Counter[str] = field(default_factory=Counter)

    def admit(self, lease_id: str, nbytes: int) -> None:
        """Reserve room for a stream of `nbytes`; RESOURCE_EXHAUSTED says which bound."""
        if self._open[lease_id] >= self.max_per_lease:
            raise ServiceError(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"this lease already has {self._open[lease_id]} WriteMemory streams open "
                f"(at most {self.max_per_lease}); finish one first (nothing was written)",
            )
        if self.staged + nbytes > self.max_bytes:
            raise ServiceError(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"WriteMemory of {nbytes} bytes refused: streams in flight hold "
                f"{self.staged} of the server's {self.max_bytes} staging bytes; retry "
                "shortly or write in smaller pieces (nothing was written)",
            )
        self._open[lease_id] += 1
        self.staged += nbytes

    def release(self, lease_id: str, nbytes: int) -> None:
        """The stream admitted with these arguments has ended (however it ended)."""
        self._open[lease_id] -= 1
        if self._open[lease_id] <= 0:
            del self._open[lease_id]
        self.staged -= nbytes
