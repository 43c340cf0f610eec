"""A device's lease: taken with OpenDevice, held by a HoldLease stream and heartbeats,
ended by CloseDevice.

`Lease.open` checks that the server speaks this runtime's protocol version (ListDevices)
and takes the device (OpenDevice, waiting while it is busy when asked to). `Lease.start_hold`
opens the HoldLease stream, read by a daemon thread: its end (the process died, or
`release`, the finalizer of a transport dropped without ``close()``) ends the lease at once.
The stream says that this client sends heartbeats, and a second daemon thread does: a
KeepAlive every `heartbeat_period` (TTL/3, 0.2 to 10 s apart). So the server keeps the lease
while the process answers, not merely while its connection stays open: a holder that is
stopped (SIGSTOP, a debugger) loses it once its TTL passes, a live one whose device idles
or waits long keeps it. `Lease.close` stops the heartbeats and gives the device back (the
server resets it for the next holder).
"""

from __future__ import annotations

import getpass
import os
import socket
import threading
import time
from pathlib import Path
from typing import Any

import grpc

from xrt.errors import ErrorCode, XrtError
from xrt.hw.wire import PROTOCOL_VERSION, pb
from xrt.transport import MemoryInfo, NpuInfo, RegisterBlock
from xrt.transport.grpc.calls import RPC_SLACK_S, DeviceClient
from xrt.transport.grpc.errors import rpc_error

__all__ = [
    "CLOSE_TIMEOUT_S",
    "Lease",
    "LeaseHold",
    "default_client",
    "device_info",
    "heartbeat_period",
    "release",
]

CLOSE_TIMEOUT_S = 30.0  # CloseDevice: a hung server must not hang close() for long
HEARTBEAT_S = (0.2, 10.0)  # KeepAlives of a held lease: at least, at most this far apart


def heartbeat_period(ttl_s: float) -> float:
    """Seconds between two KeepAlives of a lease granted for `ttl_s`: a third of it (two
    may be lost or late before the server gives up), within `HEARTBEAT_S`."""
    if not ttl_s > 0:
        raise ValueError(f"lease TTL must be positive: {ttl_s!r}")
    return min(max(ttl_s / 3, HEARTBEAT_S[0]), HEARTBEAT_S[1])


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def default_client() -> str:
    """Who is asking, as other clients see the lease holder: ``xrt:USER@HOST:PID``."""
    try:
        user = getpass.getuser()
    except Exception:
        user = "unknown"
    return f"xrt:{user}@{socket.gethostname()}:{os.getpid()}"


def device_info(info: pb.DeviceInfo, server_version: str = "") -> NpuInfo:
    """The `NpuInfo` of a device the server describes (`server_version`: the server's
    ``npu-emu`` version, from its device listing)."""
    return NpuInfo(
        name=info.name,
        target=info.target,
        register_blocks={
            b.name: RegisterBlock(b.name, b.base, b.size) for b in info.register_blocks
        },
        memories={m.name: MemoryInfo(m.name, m.base, m.size, m.host_visible) for m in info.regions},
        dma_bus_bytes=info.dma_bus_bytes or 16,
        clock_period_ps=info.clock_period_ps or None,
        hw_version=info.hw_version,
        emulator_version=f"npu-emu {server_version}" if server_version else "",
        warm_start=info.warm_start,
    )


class LeaseHold:
    """State shared with the HoldLease reader thread and the heartbeat thread (which must
    not keep the transport alive: they hold only this)."""

    def __init__(self) -> None:
        self.beats = 0
        self.ended = False  # the server closed the stream: the lease is over
        self.error: grpc.RpcError | None = None
        self.first = threading.Event()
        self.call: Any = None
        self.thread: threading.Thread | None = None
        self.stop = threading.Event()  # no more heartbeats (close, release)
        self.heartbeats = 0  # KeepAlives answered
        self.heartbeat_thread: threading.Thread | None = None
        # gRPC's channel poller runs the stream's done callback after the call's last event
        # (under the call's lock until then): `Lease.join` waits for it, as FarmClient does.
        self.poller: threading.Thread | None = None
        self.call_done = threading.Event()

    def on_done(self, _call: Any) -> None:
        """The stream's done callback (on gRPC's poller thread)."""
        self.poller = threading.current_thread()
        self.call_done.set()

    def pump(self) -> None:
        """Read the stream until it ends (the thread's body)."""
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

    def heartbeat(self, keep_alive: Any, request: Any, metadata: Any, period_s: float) -> None:
        """Call ``keep_alive(request)`` every `period_s` until `stop` or the lease has
        ended (the thread's body). A failed call (server busy, connection down) is tried
        again at the next beat: the TTL allows for two of them."""
        while not self.stop.wait(period_s):
            try:
                keep_alive(request, timeout=max(period_s, 1.0), metadata=metadata)
                self.heartbeats += 1
            except grpc.RpcError as exc:
                if exc.code() in (grpc.StatusCode.ABORTED, grpc.StatusCode.FAILED_PRECONDITION):
                    return  # the lease has ended (or never was): nothing left to keep
            except Exception:  # the channel is closed (release): the thread must end quietly
                return


def release(channel: grpc.Channel, hold: LeaseHold) -> None:
    """Finalizer of a transport dropped without close(): stop the heartbeats, end the
    stream (the server then ends the lease) and the channel."""
    try:
        hold.stop.set()
        if hold.call is not None:
            hold.call.cancel()
        channel.close()
    except Exception:
        pass


class Lease:
    """The lease of one device, taken and given back through `client`.

    Attributes:
        id: The lease id (empty until `open` succeeds).
        ttl_s: The time-to-live the server granted.
        hold: The HoldLease stream's state.
    """

    def __init__(self, client: DeviceClient) -> None:
        self._client = client
        self.id = ""
        self.server_version = ""  # the server's npu-emu version (its device listing)
        self.ttl_s = 0.0
        self.hold = LeaseHold()

    def open(
        self,
        address: str,
        device: str,
        *,
        local: bool,
        holder: str,
        ttl_s: float | None,
        connect_s: float,
        wait_s: float,
    ) -> pb.OpenDeviceResponse:
        """Check the server's protocol version, then take `device` (empty: the first free).

        Args:
            address: The server's ``HOST:PORT``, for messages.
            device: Device name; empty: the first free device.
            local: Offer this machine's identity for the local fast path.
            holder: Who is asking (`default_client`).
            ttl_s: Time-to-live asked for; None: the server's default.
            connect_s: How long to wait for the server to answer at all.
            wait_s: How long to wait while the device (or every device) is leased.

        Raises:
            XrtError: 11014 for another protocol version; the mapped status of a refused
                OpenDevice.
        """
        listing = self._client.unary(
            "ListDevices",
            pb.ListDevicesRequest(),
            f"listing the devices of {address}",
            timeout=connect_s,
        )
        if listing.protocol_version != PROTOCOL_VERSION:
            raise XrtError(
                ErrorCode.DEVICE_INTERNAL,
                f"server {address} (npu-emu {listing.server_version or '?'}) speaks "
                f"protocol version {listing.protocol_version}, this runtime "
                f"{PROTOCOL_VERSION}: upgrade the older side",
            )
        request = pb.OpenDeviceRequest(
            device=device,
            client=holder,
            protocol_version=PROTOCOL_VERSION,
            lease_ttl_ms=0 if ttl_s is None else max(1, round(ttl_s * 1000)),
        )
        if local:
            request.local_host.hostname = socket.gethostname()
            request.local_host.boot_id = _boot_id()
        what = f"opening device {device or '(first free)'} on {address}"
        resp = self._client.unary(
            "OpenDevice", request, what, timeout=connect_s + RPC_SLACK_S, wait_s=wait_s
        )
        self.id = resp.lease_id
        self.ttl_s = resp.lease_ttl_ms / 1000
        self.server_version = listing.server_version
        return resp

    def start_hold(self, device_name: str) -> None:
        """Open the HoldLease stream (saying that heartbeats follow), wait for its first
        beat, then start the heartbeats.

        Raises:
            XrtError: the mapped status when the server refuses the stream.
        """
        hold = self.hold
        stub, metadata = self._client.stub, self._client.metadata
        beats = self.ttl_s > 0  # (a server that names no TTL gets none: the stream holds)
        hold.call = stub.HoldLease(
            pb.HoldLeaseRequest(lease_id=self.id, heartbeats=beats), metadata=metadata
        )
        hold.call.add_done_callback(hold.on_done)
        hold.thread = threading.Thread(
            target=hold.pump, name=f"xrt-hold-{device_name}", daemon=True
        )
        hold.thread.start()
        hold.first.wait(RPC_SLACK_S)
        if hold.error is not None:
            raise rpc_error(hold.error, f"holding the lease of {device_name}")
        if not beats:
            return
        hold.heartbeat_thread = threading.Thread(
            target=hold.heartbeat,
            args=(
                stub.KeepAlive,
                pb.KeepAliveRequest(lease_id=self.id),
                metadata,
                heartbeat_period(self.ttl_s),
            ),
            name=f"xrt-heartbeat-{device_name}",
            daemon=True,
        )
        hold.heartbeat_thread.start()

    @property
    def alive(self) -> bool:
        """False once the HoldLease stream has ended (the lease is over)."""
        return self.hold.error is None and not self.hold.ended

    def close(self) -> None:
        """Stop the heartbeats and give the device back (CloseDevice). A lease or server
        already gone is no error."""
        self.hold.stop.set()
        try:
            if self.id:
                self._client.stub.CloseDevice(
                    pb.CloseDeviceRequest(lease_id=self.id),
                    timeout=CLOSE_TIMEOUT_S,
                    metadata=self._client.metadata,
                )
        except grpc.RpcError:
            pass  # the lease is gone already (or the server is): nothing left to release

    def join(self, timeout_s: float) -> None:
        """Wait for the HoldLease reader and heartbeat threads, and gRPC's poller of the
        stream, to be done with it (after `release`): a daemon thread killed at the
        process's exit while it holds the call's lock would hang the finalizer of the call
        (as `xrt.farm.FarmClient.close` explains)."""
        deadline = time.monotonic() + timeout_s
        for thread in (self.hold.thread, self.hold.heartbeat_thread):
            if thread is not None:
                thread.join(max(0.0, deadline - time.monotonic()))
        if self.hold.call is not None and self.hold.call_done.wait(
            max(0.0, deadline - time.monotonic())
        ):
            poller = self.hold.poller
            if poller is not None and poller is not threading.current_thread():
                poller.join(max(0.0, deadline - time.monotonic()))
