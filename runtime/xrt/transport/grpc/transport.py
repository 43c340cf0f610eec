"""The gRPC transport: an emulated NPU served by ``npu-emu serve`` (``grpc://HOST:PORT``).

`GrpcTransport` opens a channel, checks the server's protocol version, takes the lease of a
device (``OpenDevice``) and keeps it with a ``HoldLease`` stream read by a daemon thread:
the lease lives as long as the transport and ends with the process. It makes:

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
device's simulation worker is retried (`xrt.transport.grpc_retry` says what is retried).

``grpcs://HOST:PORT[...]`` is the same over TLS. The server's certificate is checked against
``ca=PATH`` (default ``$NPU_EMU_TLS_CA``; neither: the system's roots); mutual TLS adds the
client's ``cert=PATH`` and ``key=PATH`` (default ``$NPU_EMU_TLS_CERT``, ``$NPU_EMU_TLS_KEY``).
Prefer the environment for the token: a URL ends up in logs.

Poll limits: the server counts simulated cycles, the data model counts reads and seconds.
A `RegPoll` becomes a ``RegisterPoll`` with the ``max_cycles`` of `xrt.hw.regops`'s
`poll_max_cycles` (the contract's rule: a deterministic limit, which a slow or loaded
machine cannot turn into a spurious timeout).

Every failed call becomes an `XrtError` in `xrt.transport._grpc_errors` (the table is in
docs/runtime-transports.md).
"""

from __future__ import annotations

import getpass
import math
import mmap
import os
import secrets
import socket
import threading
import time
import weakref
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import grpc

from xrt._checks import as_seconds
from xrt.device import DeviceURL
from xrt.errors import ErrorCode, XrtError
from xrt.hw.regmap import RegisterBlockInfo
from xrt.hw.regops import POLL_CYCLES_PER_S, poll_max_cycles
from xrt.hw.wire import PROTOCOL_VERSION, RegisterStatus, WaitOutcome, pb, pb_grpc
from xrt.registers import RegMaskedWrite, RegOp, RegPoll, RegRead, RegRegion, RegWrite
from xrt.transport import HostRegion, MemoryInfo, NpuInfo, NpuTransport, RegisterBlock
from xrt.transport.grpc.errors import register_status_error, rpc_error
from xrt.transport.grpc.local_memory import receive_memory_file
from xrt.transport.grpc.retry import (
    DEFAULT_RETRY_S,
    REASON_BUSY,
    REASON_RESETTING,
    REASON_RESTARTING,
    SERVICE_CONFIG,
    retry_hint,
)

__all__ = [
    "POLL_CYCLES_PER_S",
    "PROTOCOL_VERSION",
    "URL_PARAMS",
    "GrpcMemRegion",
    "GrpcRegRegion",
    "GrpcTransport",
    "WaveFile",
    "poll_max_cycles",
]

URL_PARAMS = ("token", "local", "client", "ttl", "wait", "retry", "ca", "cert", "key")
"""Query parameters of ``grpc://`` URLs that the transport reads."""

MAX_CHUNK = 1 << 20  # bytes per memory stream message (the server's limit)
MAX_BATCH_OPS = 4096  # register ops per RegisterBatch (the server's limit)
MAX_WAIT_MS = 600_000  # longest WaitInterrupt the server accepts
RPC_SLACK_S = 120.0  # added to every deadline: longer than the server's own watchdog
CLOSE_TIMEOUT_S = 30.0  # CloseDevice: a hung server must not hang close() for long
STREAM_MIN_BYTES_PER_S = 8 << 20  # deadline of memory streams: this slow is broken
SIM_MIN_CYCLES_PER_S = 100_000  # deadline of polls: a simulator this slow is broken


TLS_ENV = {"ca": "NPU_EMU_TLS_CA", "cert": "NPU_EMU_TLS_CERT", "key": "NPU_EMU_TLS_KEY"}
RETRY_UNAVAILABLE_S = DEFAULT_RETRY_S  # a call meeting a worker restart is retried this long


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


def _trailers(exc: grpc.RpcError) -> tuple[tuple[str, str], ...]:
    fn = getattr(exc, "trailing_metadata", None)
    try:
        return tuple(fn() or ()) if callable(fn) else ()
    except Exception:  # a failure without a call behind it has none
        return ()


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def _default_client() -> str:
    try:
        user = getpass.getuser()
    except Exception:
        user = "unknown"
    return f"xrt:{user}@{socket.gethostname()}:{os.getpid()}"


class _Hold:
    """State shared with the HoldLease reader thread (which must not keep the transport
    alive: it holds only this)."""

    def __init__(self) -> None:
        self.beats = 0
        self.ended = False  # the server closed the stream: the lease is over
        self.error: grpc.RpcError | None = None
        self.first = threading.Event()
        self.call: Any = None
        self.thread: threading.Thread | None = None

    def pump(self) -> None:
        try:
            for _ in self.call:
                self.beats += 1
                self.first.set()
            self.ended = True
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.CANCELLED:
                self.error = exc
        except Exception:  # the thread must end quietly
            pass
        finally:
            self.first.set()


def _release(channel: grpc.Channel, hold: _Hold) -> None:
    """Finalizer of a transport dropped without close(): end the stream (the server then
    ends the lease) and the channel."""
    try:
        if hold.call is not None:
            hold.call.cancel()
        channel.close()
    except Exception:
        pass


@dataclass(frozen=True)
class WaveFile:
    """A waveform window's FST file (on the server's machine) and its cycle range."""

    path: str
    first_cycle: int
    last_cycle: int
    size_bytes: int


class GrpcTransport(NpuTransport):
    """A leased device on an ``npu-emu serve`` server.

    Args:
        address: ``HOST:PORT`` of the server.
        device: Device name (``"npu0"``); empty: the first free device.
        token: Bearer token (default: ``$NPU_EMU_TOKEN``, if set).
        local: Ask for the local fast path (mapping host-visible memory directly).
        client: Who is asking, shown to others as the lease holder.
        lease_ttl_s: Lease time-to-live asked for (None: the server's default). The
            HoldLease stream keeps the lease alive anyway; the TTL matters only when the
            stream is lost without the connection closing.
        connect_timeout_s: How long to wait for the server to answer at all.
        tls: Channel credentials (`tls_credentials`): ``grpcs://``; None: plain.
        wait_s: How long to wait for the device (or a free one) when it is leased.
        retry_s: How long a call that meets a restart of the device's simulation worker is
            retried (the server marks such refusals; see `xrt.transport.grpc_retry`).

    Raises:
        XrtError: 11014 when the server cannot be reached or speaks another protocol
            version; the mapped status of a refused OpenDevice (11002 no such device,
            11012 the device is leased / no device is free, 11014 a bad token).
    """

    def __init__(
        self,
        address: str,
        *,
        device: str = "",
        token: str | None = None,
        local: bool = True,
        client: str | None = None,
        lease_ttl_s: float | None = None,
        connect_timeout_s: float = 10.0,
        tls: grpc.ChannelCredentials | None = None,
        wait_s: float = 0.0,
        retry_s: float = RETRY_UNAVAILABLE_S,
    ) -> None:
        super().__init__()
        self.address = address
        self._wait_s = wait_s
        self.retry_s = retry_s  # may be changed at any time
        if token is None:
            token = os.environ.get("NPU_EMU_TOKEN") or None
        self._metadata: tuple[tuple[str, str], ...] = (
            (("authorization", f"Bearer {token}"),) if token else ()
        )
        self._cycles: int | None = None
        self._lease = ""
        self._map: mmap.mmap | None = None
        self._map_view: memoryview | None = None
        self.local_note = "not asked for (local=0)" if not local else ""
        options = [
            ("grpc.max_receive_message_length", MAX_CHUNK + (64 << 10)),
            ("grpc.max_send_message_length", MAX_CHUNK + (64 << 10)),
            # Transport failures of idempotent calls are retried by gRPC (grpc_retry).
            ("grpc.service_config", SERVICE_CONFIG),
        ]
        self._channel = (
            grpc.insecure_channel(address, options=options)
            if tls is None
            else grpc.secure_channel(address, tls, options=options)
        )
        self._stub = pb_grpc.DeviceServiceStub(self._channel)
        self._hold = _Hold()
        self._finalizer = weakref.finalize(self, _release, self._channel, self._hold)
        try:
            self._open(device, local, client or _default_client(), lease_ttl_s, connect_timeout_s)
        except BaseException:
            self._closed = True
            self._close()  # gives back a lease already taken
            raise

    # -- opening ---------------------------------------------------------------------------

    @classmethod
    def from_url(cls, url: DeviceURL | str) -> GrpcTransport:
        """Open the device a ``grpc://`` URL names (see the module docstring).

        Raises:
            XrtError: 11003 without a host or port, 11010 for bad parameter values.
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
            raise XrtError(
                ErrorCode.OUT_OF_RANGE, f"device URL {u.raw!r}: the path is one device name"
            )
        raw = dict(parse_qsl(urlsplit(u.raw.strip()).query, keep_blank_values=True))
        local = u.get_int("local", 1)
        if local not in (0, 1):
            raise XrtError(
                ErrorCode.WRONG_TYPE, f"device URL {u.raw!r}: local={local} must be 0 or 1"
            )
        ttl = u.params.get("ttl")
        if ttl is not None:
            try:
                ttl = float(ttl)
            except ValueError:
                raise XrtError(
                    ErrorCode.WRONG_TYPE, f"device URL {u.raw!r}: ttl={ttl!r} is no number"
                ) from None
        seconds = {}
        for key, default in (("wait", 0.0), ("retry", RETRY_UNAVAILABLE_S)):
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
        return cls(
            f"{host}:{u.port}",
            device=name,
            token=raw.get("token") or None,  # the raw text: tokens may look like numbers
            local=bool(local),
            client=raw.get("client") or None,
            lease_ttl_s=ttl,
            tls=tls,
            wait_s=seconds["wait"],
            retry_s=seconds["retry"],
        )

    def _open(
        self, device: str, local: bool, client: str, ttl_s: float | None, connect_s: float
    ) -> None:
        listing = self._call(
            "ListDevices",
            pb.ListDevicesRequest(),
            f"listing the devices of {self.address}",
            timeout=connect_s,
        )
        if listing.protocol_version != PROTOCOL_VERSION:
            raise XrtError(
                ErrorCode.DEVICE_INTERNAL,
                f"server {self.address} (npu-emu {listing.server_version or '?'}) speaks "
                f"protocol version {listing.protocol_version}, this runtime "
                f"{PROTOCOL_VERSION}: upgrade the older side",
            )
        request = pb.OpenDeviceRequest(
            device=device,
            client=client,
            protocol_version=PROTOCOL_VERSION,
            lease_ttl_ms=0 if ttl_s is None else max(1, round(ttl_s * 1000)),
        )
        if local:
            request.local_host.hostname = socket.gethostname()
            request.local_host.boot_id = _boot_id()
        what = f"opening device {device or '(first free)'} on {self.address}"
        resp = self._call(
            "OpenDevice", request, what, timeout=connect_s + RPC_SLACK_S, wait_s=self._wait_s
        )
        self._lease = resp.lease_id
        i = resp.info
        self.info = NpuInfo(
            name=i.name,
            target=i.target,
            register_blocks={
                b.name: RegisterBlock(b.name, b.base, b.size) for b in i.register_blocks
            },
            memories={
                m.name: MemoryInfo(m.name, m.base, m.size, m.host_visible) for m in i.regions
            },
            dma_bus_bytes=i.dma_bus_bytes or 16,
            clock_period_ps=i.clock_period_ps or None,
            hw_version=i.hw_version,
        )
        self.lease_ttl_s = resp.lease_ttl_ms / 1000
        self._start_hold()
        if local:
            self._map_local(resp.local_mappings)

    def _start_hold(self) -> None:
        hold = self._hold
        hold.call = self._stub.HoldLease(
            pb.HoldLeaseRequest(lease_id=self._lease), metadata=self._metadata
        )
        hold.thread = threading.Thread(
            target=hold.pump, name=f"xrt-hold-{self.info.name}", daemon=True
        )
        hold.thread.start()
        hold.first.wait(RPC_SLACK_S)
        if hold.error is not None:
            raise rpc_error(hold.error, f"holding the lease of {self.info.name}")

    def _map_local(self, mappings: Sequence[pb.LocalMapping]) -> None:
        """Map the memory file of ``udma`` when the server offered it, and prove it is the
        same memory (a byte pattern written through the server must show in the map)."""
        m = next((m for m in mappings if m.region == "udma"), None)
        if m is None:
            self.local_note = "the server did not offer it (another machine)"
            return
        mem = self.info.memory("udma")
        if m.size != mem.size:
            self.local_note = f"mapping of {m.size} B for a {mem.size}-byte region"
            return
        try:
            fd = receive_memory_file(m.socket, self._lease, m.size)
        except (OSError, ValueError) as exc:
            self.local_note = f"no memory file from {m.socket}: {exc}"
            return
        try:
            mapped = mmap.mmap(fd, m.size)
        except (OSError, ValueError) as exc:
            self.local_note = f"cannot map the memory file: {exc}"
            return
        finally:
            os.close(fd)
        probe = mem.end - 16
        old = bytes(self._read_memory(probe, 16))
        nonce = secrets.token_bytes(16)
        self._write_memory(probe, memoryview(nonce))
        same = mapped[m.size - 16 :] == nonce
        self._write_memory(probe, memoryview(old))
        if not same:
            mapped.close()
            self.local_note = "the memory file is not the server's memory"
            return
        self._map = mapped
        self._map_view = memoryview(mapped)
        self.local_note = f"mapped the memory file from {m.socket}"

    # -- what it is ------------------------------------------------------------------------

    @property
    def lease_id(self) -> str:
        """The lease this transport holds."""
        return self._lease

    @property
    def local_fast_path(self) -> bool:
        """True when host-visible memory is mapped directly (see `local_note` otherwise)."""
        return self._map_view is not None

    @property
    def cycles(self) -> int | None:
        return self._cycles

    @property
    def lease_alive(self) -> bool:
        """False once the HoldLease stream has ended (the lease is over) or the transport
        is closed."""
        return self._hold.error is None and not self._hold.ended and not self._closed

    def __repr__(self) -> str:
        name = getattr(getattr(self, "info", None), "name", "?")
        state = " closed" if self._closed else ""
        return f"<GrpcTransport {self.address}/{name}{state}>"

    # -- calls -----------------------------------------------------------------------------

    def _call(
        self, method: str, request: Any, what: str, *, timeout: float, wait_s: float = 0.0
    ) -> Any:
        """One unary call; failures become XrtError (in `_grpc_errors`).

        A refusal the server marks as safe to retry (trailing metadata, see
        `xrt.transport.grpc_retry`) is retried: a worker restart or a device being reset
        for up to `retry_s`, a leased device (OpenDevice) for up to `wait_s`. Anything
        else (among it the call during which a worker died: its effect is unknown) fails
        at once; transport failures of idempotent methods are gRPC's own retries.
        """
        start = time.monotonic()
        attempts = 0
        while True:
            attempts += 1
            try:
                resp = getattr(self._stub, method)(
                    request, timeout=timeout, metadata=self._metadata
                )
                break
            except grpc.RpcError as exc:
                reason, after_s = retry_hint(_trailers(exc))
                spent = time.monotonic() - start
                if reason in (REASON_RESTARTING, REASON_RESETTING):
                    budget = max(self.retry_s, wait_s)
                elif reason == REASON_BUSY:
                    budget = wait_s
                else:
                    raise rpc_error(exc, what) from None
                if spent + after_s > budget:
                    gave_up = f"{what} (gave up after {attempts} attempt(s) in {spent:.1f} s"
                    gave_up += f" of a {budget:.0f} s retry budget)"
                    raise rpc_error(exc, gave_up) from None
                time.sleep(max(after_s, 0.05))
        cycles = getattr(resp, "cycles", None)
        if cycles:
            self._cycles = int(cycles)
        return resp

    def _read_memory(self, addr: int, nbytes: int) -> bytearray:
        out = bytearray(nbytes)
        pos = 0
        what = f"read of {nbytes} B at {addr:#x} on {self.info.name}"
        request = pb.ReadMemoryRequest(lease_id=self._lease, address=addr, length=nbytes)
        try:
            for msg in self._stub.ReadMemory(
                request, timeout=self._stream_timeout(nbytes), metadata=self._metadata
            ):
                data = msg.data
                if pos + len(data) > nbytes:
                    raise XrtError(
                        ErrorCode.DEVICE_INTERNAL, f"{what}: the server sent too many bytes"
                    )
                out[pos : pos + len(data)] = data
                pos += len(data)
        except grpc.RpcError as exc:
            raise rpc_error(exc, what) from None
        if pos != nbytes:
            raise XrtError(
                ErrorCode.DEVICE_INTERNAL, f"{what}: the server sent {pos} B, then stopped"
            )
        return out

    def _write_memory(self, addr: int, data: memoryview) -> None:
        n = len(data)
        lease = self._lease

        def messages() -> Iterator[pb.WriteMemoryRequest]:
            yield pb.WriteMemoryRequest(
                lease_id=lease, address=addr, length=n, data=data[:MAX_CHUNK].tobytes()
            )
            for off in range(MAX_CHUNK, n, MAX_CHUNK):
                yield pb.WriteMemoryRequest(data=data[off : off + MAX_CHUNK].tobytes())

        what = f"write of {n} B at {addr:#x} on {self.info.name}"
        try:
            resp = self._stub.WriteMemory(
                messages(), timeout=self._stream_timeout(n), metadata=self._metadata
            )
        except grpc.RpcError as exc:
            raise rpc_error(exc, what) from None
        if resp.bytes_written != n:
            raise XrtError(
                ErrorCode.DEVICE_INTERNAL, f"{what}: the server wrote {resp.bytes_written} B"
            )

    @staticmethod
    def _stream_timeout(nbytes: int) -> float:
        return RPC_SLACK_S + nbytes / STREAM_MIN_BYTES_PER_S

    # -- regions ---------------------------------------------------------------------------

    def reg_region(self, name: str, regmap: RegisterBlockInfo | None = None) -> GrpcRegRegion:
        self._check_open()
        block = self.info.block(name)
        return GrpcRegRegion(self, name, block.base, block.size, regmap=regmap)

    def host_region(
        self,
        name: str = "udma",
        *,
        base: int | None = None,
        size: int | None = None,
        min_alignment: int = 64,
    ) -> GrpcMemRegion:
        self._check_open()
        mem, b, n = self._window(name, base, size)
        view = None
        if self._map_view is not None and name == "udma":
            view = self._map_view[b - mem.base : b - mem.base + n]
        return GrpcMemRegion(self, name, b, n, view, min_alignment=min_alignment)

    # -- time and interrupt ----------------------------------------------------------------

    def wait_irq(self, timeout_s: float, max_cycles: int | None = None) -> bool:
        """Wait for the interrupt line (one WaitInterrupt RPC per 10 minutes of waiting).

        ``timeout_s=0`` just looks (one simulated cycle). See `NpuTransport.wait_irq`.
        """
        t = as_seconds(timeout_s, "timeout_s")
        if max_cycles is not None and (
            not isinstance(max_cycles, int) or isinstance(max_cycles, bool) or max_cycles < 1
        ):
            raise XrtError(
                ErrorCode.OUT_OF_RANGE, f"max_cycles must be an int >= 1: {max_cycles!r}"
            )
        self._check_open()
        cycles_left = 1 if t == 0 and max_cycles is None else max_cycles
        deadline = time.monotonic() + t
        while True:
            remaining = deadline - time.monotonic()
            ms = min(MAX_WAIT_MS, max(1, math.ceil(remaining * 1000)))
            resp = self._call(
                "WaitInterrupt",
                pb.WaitInterruptRequest(
                    lease_id=self._lease, timeout_ms=ms, max_cycles=cycles_left or 0
                ),
                f"wait for the interrupt of {self.info.name}",
                timeout=ms / 1000 + RPC_SLACK_S,
            )
            if resp.outcome == WaitOutcome.INTERRUPT:
                return True
            if resp.outcome == WaitOutcome.CYCLE_LIMIT:
                return False
            if resp.outcome != WaitOutcome.DEADLINE:
                raise XrtError(
                    ErrorCode.DEVICE_INTERNAL,
                    f"wait for the interrupt of {self.info.name}: unknown outcome {resp.outcome}",
                )
            if cycles_left is not None:
                cycles_left -= resp.waited_cycles
                if cycles_left <= 0:
                    return False
            if time.monotonic() >= deadline - 0.001:
                return False

    def reset(self) -> None:
        """Pulse the device's reset (ResetDevice); memories keep their contents."""
        self._check_open()
        self._call(
            "ResetDevice",
            pb.ResetDeviceRequest(lease_id=self._lease),
            f"reset of {self.info.name}",
            timeout=RPC_SLACK_S,
        )

    def counters(self) -> pb.GetCountersResponse:
        """The server's counters of this device (cycles, requests, bytes; needs no lease)."""
        return self._call(
            "GetCounters",
            pb.GetCountersRequest(device=self.info.name),
            f"counters of {self.info.name}",
            timeout=RPC_SLACK_S,
        )

    # -- waveforms (a server started with --waves) -----------------------------------------

    def start_waves(self, cycles: int = 0) -> int:
        """Open a waveform window on the device: every signal into an FST file on the
        server's machine, for `cycles` simulated cycles (0: until `stop_waves`).

        Returns:
            The device's cycle count when the window opened.

        Raises:
            XrtError: 11012 when the server has no --waves or a window is already open.
        """
        self._check_open()
        resp = self._call(
            "StartWaves",
            pb.StartWavesRequest(lease_id=self._lease, cycles=cycles),
            f"starting a waveform window on {self.info.name}",
            timeout=RPC_SLACK_S,
        )
        return int(resp.cycles)

    def stop_waves(self) -> WaveFile:
        """Close the open window (if any) and return the last window's file of this lease.

        Raises:
            XrtError: 11012 when no window was started in this lease.
        """
        self._check_open()
        resp = self._call(
            "StopWaves",
            pb.StopWavesRequest(lease_id=self._lease),
            f"stopping the waveform window of {self.info.name}",
            timeout=RPC_SLACK_S,
        )
        f = resp.file
        return WaveFile(f.path, f.first_cycle, f.last_cycle, f.size_bytes)

    # -- closing ---------------------------------------------------------------------------

    def _close(self) -> None:
        """End the lease (CloseDevice; the server resets the device for the next holder),
        then the HoldLease stream and the channel. A server already gone is no error."""
        try:
            if self._lease:
                self._stub.CloseDevice(
                    pb.CloseDeviceRequest(lease_id=self._lease),
                    timeout=CLOSE_TIMEOUT_S,
                    metadata=self._metadata,
                )
        except grpc.RpcError:
            pass  # the lease is gone already (or the server is): nothing left to release
        finally:
            self._finalizer()
            if self._hold.thread is not None:
                self._hold.thread.join(5.0)
            self._unmap()

    def _unmap(self) -> None:
        view, mapped = self._map_view, self._map
        self._map_view = self._map = None
        if view is not None and mapped is not None:
            try:
                view.release()
                mapped.close()
            except BufferError:
                pass  # chunks still hold views: the mapping goes with them


class GrpcRegRegion(RegRegion):
    """A register block of a leased device (see the module docstring)."""

    def __init__(
        self,
        transport: GrpcTransport,
        name: str,
        base: int,
        size: int,
        *,
        regmap: RegisterBlockInfo | None = None,
    ) -> None:
        self._t = transport
        super().__init__(name, base, size, regmap=regmap)

    @property
    def transport(self) -> GrpcTransport:
        return self._t

    def _read32(self, addr: int) -> int:
        t = self._t
        t._check_open()
        resp = t._call(
            "ReadRegister",
            pb.ReadRegisterRequest(lease_id=t._lease, address=addr),
            f"read of register {addr:#x} in region {self.name!r}",
            timeout=RPC_SLACK_S,
        )
        if resp.status != RegisterStatus.OK:
            raise register_status_error(
                resp.status, index=None, op="read", address=addr, value=resp.value, region=self.name
            )
        return int(resp.value)

    def _write32(self, addr: int, value: int) -> None:
        t = self._t
        t._check_open()
        resp = t._call(
            "WriteRegister",
            pb.WriteRegisterRequest(lease_id=t._lease, address=addr, value=value),
            f"write of register {addr:#x} in region {self.name!r}",
            timeout=RPC_SLACK_S,
        )
        if resp.status != RegisterStatus.OK:
            raise register_status_error(
                resp.status, index=None, op="write", address=addr, value=value, region=self.name
            )

    def _batch(self, ops: Sequence[RegOp]) -> list[int | None]:
        """One RegisterBatch per 4096 ops; masked writes are read-modify-writes in the
        simulation worker, which serves one request at a time (atomic)."""
        self._t._check_open()
        results: list[int | None] = []
        for start in range(0, len(ops), MAX_BATCH_OPS):
            results += self._run(ops[start : start + MAX_BATCH_OPS], start)
        return results

    def _run(self, ops: Sequence[RegOp], first_index: int) -> list[int | None]:
        t = self._t
        request = pb.RegisterBatchRequest(lease_id=t._lease)
        # Fields set on added messages: a fifth of the cost of building each op with
        # RegisterOp(read=RegisterRead(...)) (measured: that was several us per op).
        add = request.ops.add
        poll_cycles = 0
        limits: dict[int, int] = {}
        for i, op in enumerate(ops):
            kind = type(op)
            if kind is RegRead:
                add().read.address = op.addr
            elif kind is RegWrite:
                body = add().write
                body.address = op.addr
                body.value = op.value
            elif kind is RegMaskedWrite:
                body = add().masked_write
                body.address = op.addr
                body.value = op.value
                body.mask = op.mask
            elif kind is RegPoll:
                cycles = poll_max_cycles(op)
                limits[i] = cycles
                poll_cycles += cycles
                body = add().poll
                body.address = op.addr
                body.mask = op.mask
                body.expected = op.expected
                body.max_cycles = cycles
            else:  # pragma: no cover - execute() passes only the four op types
                raise XrtError(ErrorCode.WRONG_TYPE, f"unknown register op {op!r}")
        resp = t._call(
            "RegisterBatch",
            request,
            f"batch of {len(ops)} register ops in region {self.name!r}",
            timeout=RPC_SLACK_S + poll_cycles / SIM_MIN_CYCLES_PER_S,
        )
        out: list[int | None] = []
        for i, (op, res) in enumerate(zip(ops, resp.results, strict=False)):
            if res.status != RegisterStatus.OK:
                kind = type(op)
                name = {RegRead: "read", RegPoll: "poll"}.get(kind, "write")
                extra = ""
                if kind is RegPoll:
                    extra = (
                        f" after {limits[i]} simulated cycles (from max_polls={op.max_polls}, "
                        f"timeout_s={op.timeout_s}) waiting for value & {op.mask:#x} == "
                        f"{op.expected:#x}"
                    )
                raise register_status_error(
                    res.status,
                    index=first_index + i,
                    op=name,
                    address=op.addr,
                    value=res.value,
                    region=self.name,
                    extra=extra,
                )
            out.append(int(res.value) if type(op) in (RegRead, RegPoll) else None)
        if len(out) != len(ops):
            raise XrtError(
                ErrorCode.DEVICE_INTERNAL,
                f"batch in region {self.name!r}: the server answered {len(resp.results)} "
                f"results for {len(ops)} ops",
            )
        return out


class GrpcMemRegion(HostRegion):
    """Host-visible memory (or a window of it) of a leased device.

    Streams bytes with ReadMemory/WriteMemory, or, on the local fast path, is a view of the
    mapped shared-memory file (then the base class never calls `_read`/`_write`).
    """

    def __init__(
        self,
        transport: GrpcTransport,
        name: str,
        base: int,
        size: int,
        view: memoryview | None,
        *,
        min_alignment: int = 64,
    ) -> None:
        self._t = transport
        self._view = view
        super().__init__(name, base, size, min_alignment=min_alignment)

    @property
    def transport(self) -> GrpcTransport:
        return self._t

    def _read(self, addr: int, nbytes: int) -> bytearray:
        self._t._check_open()
        return self._t._read_memory(addr, nbytes)

    def _write(self, addr: int, data: memoryview) -> None:
        self._t._check_open()
        self._t._write_memory(addr, data)

    def _host_map(self) -> memoryview | None:
        return self._view
