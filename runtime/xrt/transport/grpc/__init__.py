"""The gRPC transport: an emulated NPU served by ``npu-emu serve`` (``grpc://HOST:PORT``).

`GrpcTransport` opens a channel, checks the server's protocol version, takes the lease of a
device (``OpenDevice``) and keeps it with a ``HoldLease`` stream read by a daemon thread
and heartbeats (``KeepAlive`` every TTL/3) from another: the lease lives as long as the
transport and the process answer, and ends with either. It makes:

- `GrpcRegRegion`: a register block. One RPC per single read or write; `RegRegion.execute`
  is one ``RegisterBatch`` RPC (server-side read-modify-write and poll-until);
- `GrpcMemRegion`: host-visible memory (``udma``). Reads and writes stream 1 MiB messages,
  unless the local fast path is on: when client and server share a machine, the client
  proves its lease on the server's local socket, receives the memory file behind the
  region (a descriptor: nothing on disk names it) and maps it (the region
  then has a host map: BOTH pointers, zero-copy views, no RPC per access).

URL: ``grpc://HOST:PORT[/DEVICE][?token=...&local=0|1&client=NAME&ttl=SECONDS&wait=SECONDS
&retry=SECONDS]``; no device name: the first free one. ``token`` (default:
``$NPU_EMU_TOKEN``) goes to the server as ``authorization: Bearer <token>``; ``local=0`` turns
the fast path off; ``wait`` waits that long for the device (or any device) to be free instead
of failing at once; ``retry`` (default 30) bounds how long a call that meets a restart of the
device's simulation worker is retried (`xrt.transport.grpc.retry` says what is retried).

``grpcs://HOST:PORT[...]`` is the same over TLS. The server's certificate is checked against
``ca=PATH`` (default ``$NPU_EMU_TLS_CA``; neither: the system's roots); mutual TLS adds the
client's ``cert=PATH`` and ``key=PATH`` (default ``$NPU_EMU_TLS_CERT``, ``$NPU_EMU_TLS_KEY``).
Prefer the environment for the token: a URL ends up in logs.

Poll limits: the server counts simulated cycles, the data model counts reads and seconds.
A `RegPoll` becomes a ``RegisterPoll`` with the ``max_cycles`` of `xrt.hw.regops`'s
`poll_max_cycles` (the contract's rule: a deterministic limit, which a slow or loaded
machine cannot turn into a spurious timeout).

Every failed call becomes an `XrtError` in `xrt.transport.grpc.errors` (the table is in
docs/runtime-transports.md).

The package, by idea:

- `channel`: URLs (`URL_PARAMS`), TLS credentials (`tls_credentials`), the channel;
- `retry`: what is retried, by whom, for how long;
- `errors`: gRPC statuses and register results -> `XrtError`;
- `calls`: the client every call goes through (the retry loop, deadlines, memory streams);
- `lease`: OpenDevice, the HoldLease stream and the heartbeats, CloseDevice;
- `local_memory`: the local fast path's memory file;
- `regions`: `GrpcRegRegion`, `GrpcMemRegion`;
- `transport`: `GrpcTransport`, `WaveFile`;
- `observer`: `Observer`, an operator's look at a device someone else holds (no lease).
"""

from __future__ import annotations

from xrt.hw.regops import POLL_CYCLES_PER_S, poll_max_cycles
from xrt.hw.wire import PROTOCOL_VERSION
from xrt.hw.wire import pb as pb  # the messages, reachable here as before the split
from xrt.transport.grpc.channel import URL_PARAMS, tls_credentials
from xrt.transport.grpc.observer import ObservedWindow, Observer, WindowStatus
from xrt.transport.grpc.regions import GrpcMemRegion, GrpcRegRegion
from xrt.transport.grpc.transport import GrpcTransport, WaveFile

__all__ = [
    "POLL_CYCLES_PER_S",
    "PROTOCOL_VERSION",
    "URL_PARAMS",
    "GrpcMemRegion",
    "GrpcRegRegion",
    "GrpcTransport",
    "ObservedWindow",
    "Observer",
    "WaveFile",
    "WindowStatus",
    "poll_max_cycles",
    "tls_credentials",
]
