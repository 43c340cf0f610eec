"""`GrpcTransport`: a leased device on an ``npu-emu serve`` server, tying the package's
parts together.

It opens a channel (`xrt.transport.grpc.channel`), takes and holds the device's lease
(`xrt.transport.grpc.lease`), maps host-visible memory when client and server share a
machine (`xrt.transport.grpc.local_memory`) and makes the regions
(`xrt.transport.grpc.regions`). Every call goes through one `DeviceClient`
(`xrt.transport.grpc.calls`: retries, error mapping, deadlines). The interrupt, reset,
counters and waveform windows are calls of the transport itself.
"""

from __future__ import annotations

import math
import os
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from xrt._checks import as_seconds
from xrt.device import DeviceURL
from xrt.errors import ErrorCode, XrtError
from xrt.hw.debug import DebugOp, DebugReply, DebugRequest
from xrt.hw.regmap import RegisterBlockInfo
from xrt.hw.ring import MAX_CYCLES
from xrt.hw.ring_core import RingError, RingRevokedError
from xrt.hw.wire import MAX_WAIT_MS, CheckpointScope, WaitOutcome, pb
from xrt.transport import NpuTransport
from xrt.transport.grpc.calls import RPC_SLACK_S, DeviceClient
from xrt.transport.grpc.channel import parse_url
from xrt.transport.grpc.debug import debug_rpc
from xrt.transport.grpc.device_log import LogLineCallback, follow_device_log
from xrt.transport.grpc.lease import Lease, default_client, device_info, release
from xrt.transport.grpc.local_memory import MappedMemory, map_memory_file
from xrt.transport.grpc.regions import GrpcMemRegion, GrpcRegRegion
from xrt.transport.grpc.register_ring import RegisterRing
from xrt.transport.grpc.retry import DEFAULT_RETRY_S

__all__ = ["GrpcTransport", "WaveFile"]


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
        ring: On the local fast path, take the lease's register ring too: register accesses
            and interrupt waits go straight to the device's simulator
            (`xrt.transport.grpc.register_ring`).
        client: Who is asking, shown to others as the lease holder.
        lease_ttl_s: Lease time-to-live asked for (None: the server's default): how long
            this process may stop answering (stopped, paused in a debugger) before the
            server ends the lease. Heartbeats (KeepAlive every TTL/3) keep it meanwhile
            (`xrt.transport.grpc.lease`).
        connect_timeout_s: How long to wait for the server to answer at all.
        tls: Channel credentials (`tls_credentials`): ``grpcs://``; None: plain.
        wait_s: How long to wait for the device (or a free one) when it is leased.
        retry_s: How long a call that meets a restart of the device's simulation worker is
            retried (the server marks such refusals; see `xrt.transport.grpc.retry`).

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
        ring: bool = True,
        client: str | None = None,
        lease_ttl_s: float | None = None,
        connect_timeout_s: float = 10.0,
        tls: grpc.ChannelCredentials | None = None,
        wait_s: float = 0.0,
        retry_s: float = DEFAULT_RETRY_S,
    ) -> None:
        super().__init__()
        self.address = address
        self._wait_s = wait_s
        self._local: MappedMemory | None = None
        self.ring: RegisterRing | None = None
        self.local_socket = ""  # the server's hand-out socket, when it is on this machine
        self.local_note = "not asked for (local=0)" if not local else ""
        self.ring_note = "not asked for (local=0 or ring=0)" if not (local and ring) else ""
        self._client = DeviceClient(address, tls=tls, token=token, retry_s=retry_s)
        # The raw stub, for measurements without the runtime's layers (bench/).
        self._stub = self._client.stub
        self._lease = Lease(self._client)
        self._finalizer = weakref.finalize(self, release, self._client.channel, self._lease.hold)
        try:
            self._open(
                device, local, ring, client or default_client(), lease_ttl_s, connect_timeout_s
            )
        except BaseException:
            self._closed = True
            self._close()  # gives back a lease already taken
            raise

    # -- opening ---------------------------------------------------------------------------

    @classmethod
    def from_url(cls, url: DeviceURL | str) -> GrpcTransport:
        """Open the device a ``grpc://`` URL names (see `xrt.transport.grpc`).

        Raises:
            XrtError: 11003 without a host or port, 11010 for bad parameter values.
        """
        u = parse_url(url)
        return cls(
            u.address,
            device=u.device,
            token=u.token,
            local=u.local,
            ring=u.ring,
            client=u.client,
            lease_ttl_s=u.lease_ttl_s,
            tls=u.tls,
            wait_s=u.wait_s,
            retry_s=u.retry_s,
        )

    def _open(
        self,
        device: str,
        local: bool,
        ring: bool,
        client: str,
        ttl_s: float | None,
        connect_s: float,
    ) -> None:
        resp = self._lease.open(
            self.address,
            device,
            local=local,
            holder=client,
            ttl_s=ttl_s,
            connect_s=connect_s,
            wait_s=self._wait_s,
        )
        self.info = device_info(resp.info, self._lease.server_version)
        self.lease_ttl_s = self._lease.ttl_s
        self._lease.start_hold(self.info.name)
        if local:
            self._local, self.local_note = map_memory_file(
                resp.local_mappings,
                self.info.memory("udma"),
                self._lease.id,
                self.read_memory,
                self.write_memory,
            )
            if ring:
                self._take_ring(resp.local_mappings)

    def _take_ring(self, mappings: Any) -> None:
        """The lease's register ring, when the server is on this machine and serves one."""
        sock = next((m.socket for m in mappings if m.region == "udma"), "")
        self.local_socket = sock
        if not sock:
            self.ring_note = "the server did not offer the local path (another machine)"
            return
        try:
            self.ring = RegisterRing.receive(sock, self._lease.id)
        except (OSError, ValueError, RingError) as exc:
            self.ring_note = f"no register ring from {sock}: {exc}"
            return
        self.ring_note = f"register ring from {sock}"

    def drop_ring(self, why: str) -> None:
        """Stop using the register ring (the regions fall back to the server's calls)."""
        ring, self.ring = self.ring, None
        if ring is not None:
            ring.close()
            self.ring_note = f"dropped: {why}"

    # -- what it is ------------------------------------------------------------------------

    @property
    def lease_id(self) -> str:
        """The lease this transport holds."""
        return self._lease.id

    @property
    def local_fast_path(self) -> bool:
        """True when host-visible memory is mapped directly (see `local_note` otherwise)."""
        return self._local is not None

    @property
    def cycles(self) -> int | None:
        return self._client.cycles

    def note_cycles(self, cycles: int) -> None:
        """The device's cycle count a response that did not come through the server
        reported (the register ring's)."""
        self._client.cycles = cycles

    @property
    def retry_s(self) -> float:
        """How long a call that meets a worker restart is retried (may be changed at any
        time)."""
        return self._client.retry_s

    @retry_s.setter
    def retry_s(self, seconds: float) -> None:
        self._client.retry_s = seconds

    @property
    def lease_alive(self) -> bool:
        """False once the HoldLease stream has ended (the lease is over) or the transport
        is closed."""
        return self._lease.alive and not self._closed

    def __repr__(self) -> str:
        name = getattr(getattr(self, "info", None), "name", "?")
        state = " closed" if self._closed else ""
        return f"<GrpcTransport {self.address}/{name}{state}>"

    # -- calls: what the regions use (`xrt.transport.grpc.regions.RegionCalls`) ------------

    def call(self, method: str, request: Any, what: str, *, timeout: float) -> Any:
        """One unary call of the device service, retried while the server says it is safe
        to (`DeviceClient.unary`).

        Args:
            method: The RPC's name (``"ReadRegister"``).
            request: Its request message (`xrt.hw.wire.pb`).
            what: The operation, for error messages.
            timeout: The call's deadline in seconds.

        Raises:
            XrtError: 11012 when the transport is closed; the call's mapped status.
        """
        self._check_open()
        return self._client.unary(method, request, what, timeout=timeout)

    def read_memory(self, addr: int, nbytes: int) -> bytearray:
        """Read `nbytes` of host-visible memory at `addr` through the server (a stream).

        Raises:
            XrtError: 11012 when the transport is closed; the call's mapped status.
        """
        self._check_open()
        what = f"read of {nbytes} B at {addr:#x} on {self.info.name}"
        return self._client.read_memory(self._lease.id, addr, nbytes, what)

    def write_memory(self, addr: int, data: memoryview) -> None:
        """Write `data` to host-visible memory at `addr` through the server (a stream).

        Raises:
            XrtError: 11012 when the transport is closed; the call's mapped status.
        """
        self._check_open()
        what = f"write of {len(data)} B at {addr:#x} on {self.info.name}"
        self._client.write_memory(self._lease.id, addr, data, what)

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
        if self._local is not None and name == "udma":
            view = self._local.view[b - mem.base : b - mem.base + n]
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
        ring = self.ring
        if ring is not None:
            try:
                waited = ring.wait_irq(cycles_left or MAX_CYCLES, max(t, 0.001))
            except RingRevokedError as exc:
                self.drop_ring(str(exc))  # the server's call below says what happened
            except RingError as exc:
                raise XrtError(
                    ErrorCode.DEVICE_INTERNAL, f"wait for the interrupt of {self.info.name}: {exc}"
                ) from None
            else:
                self.note_cycles(ring.cycles)
                return waited.interrupted
        deadline = time.monotonic() + t
        while True:
            remaining = deadline - time.monotonic()
            ms = min(MAX_WAIT_MS, max(1, math.ceil(remaining * 1000)))
            resp = self._client.unary(
                "WaitInterrupt",
                pb.WaitInterruptRequest(
                    lease_id=self._lease.id, timeout_ms=ms, max_cycles=cycles_left or 0
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
        self._client.unary(
            "ResetDevice",
            pb.ResetDeviceRequest(lease_id=self._lease.id),
            f"reset of {self.info.name}",
            timeout=RPC_SLACK_S,
        )

    def counters(self) -> pb.GetCountersResponse:
        """The server's counters of this device (cycles, requests, bytes; needs no lease)."""
        return self._client.unary(
            "GetCounters",
            pb.GetCountersRequest(device=self.info.name),
            f"counters of {self.info.name}",
            timeout=RPC_SLACK_S,
        )

    # -- checkpoints ---------------------------------------------------------------------

    def checkpoint(self, path: str | os.PathLike[str], wait_cycles: int = 0) -> int:
        """Save the device's whole state into the file `path` (on this machine): every
        register, the engines and their buffers, the OCM, every byte of memory. Taken with
        the engines idle: waits up to `wait_cycles` simulated cycles for them, else refuses.

        Returns:
            The cycle the state was saved at.

        Raises:
            XrtError: 11012 when an engine runs (or the model cannot save its state).
        """
        self._check_open()
        data, cycle = self._client.save_checkpoint(
            self._lease.id, wait_cycles, f"checkpoint of {self.info.name}"
        )
        # The holder's data: readable by its owner only (0600), written next to `path` and
        # renamed over it, so a reader never sees half a file; no symlink is followed.
        tmp = Path(f"{os.fspath(path)}.partial")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), 0o600)  # a .partial left by an earlier try kept its mode
            f.write(data)
        tmp.replace(path)
        return cycle

    def restore(self, path: str | os.PathLike[str], portable: bool = False) -> int:
        """Put the state saved in the checkpoint file `path` into the device: the whole
        state, or only its memories and configuration registers when `portable`. The
        server checks the whole file first (checksum, sizes, target, hardware version, model
        build, and for a whole restore that it sealed the file itself): a refused file
        changes nothing.

        Returns:
            The cycle the checkpoint was taken at.

        Raises:
            XrtError: 11011 when the file is refused (the reason in the message); 11012
                when an engine runs.
        """
        self._check_open()
        data = Path(path).read_bytes()
        scope = CheckpointScope.PORTABLE if portable else CheckpointScope.WHOLE
        _, saved = self._client.restore_checkpoint(
            self._lease.id, data, f"restore of {os.fspath(path)} into {self.info.name}", scope
        )
        return saved

    # -- waveforms (a server started with --waves) -----------------------------------------

    def follow_log(self, callback: LogLineCallback) -> Callable[[], None]:
        """Stream the server's log lines about this device to ``callback(level, device,
        message)`` until the lease ends; returns the function that stops it."""
        return follow_device_log(self._client, self._lease.id, self.info.name, callback)

    def start_waves(self, cycles: int = 0, signals: str = "") -> int:
        """Open a waveform window on the device: every signal into an FST file on the
        server's machine, for `cycles` simulated cycles (0: until `stop_waves`); with
        `signals` (comma-separated hierarchical names such as ``npu_sim.u_npu.u_dma``),
        only the signals under those scopes.

        Returns:
            The device's cycle count when the window opened.

        Raises:
            XrtError: 11012 when the server has no --waves or a window is already open.
        """
        self._check_open()
        resp = self._client.unary(
            "StartWaves",
            pb.StartWavesRequest(lease_id=self._lease.id, cycles=cycles, signals=signals),
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
        resp = self._client.unary(
            "StopWaves",
            pb.StopWavesRequest(lease_id=self._lease.id),
            f"stopping the waveform window of {self.info.name}",
            timeout=RPC_SLACK_S,
        )
        f = resp.file
        return WaveFile(f.path, f.first_cycle, f.last_cycle, f.size_bytes)

    # -- the debugger ------------------------------------------------------------------------

    def debug(self, request: DebugRequest) -> DebugReply:
        self._check_open()
        return debug_rpc(
            self._client, self._lease.id, request, f"debugger {request.op} on {self.info.name}"
        )

    def wait_debug_stop(self, after: int, timeout_s: float) -> bool:
        self._check_open()
        deadline = time.monotonic() + timeout_s
        while True:  # the server waits MAX_STOP_WAIT_S at most per call
            left = deadline - time.monotonic()
            reply = debug_rpc(
                self._client, self._lease.id, DebugRequest(DebugOp.STATE.value),
                f"waiting for {self.info.name} to stop", wait_stop_s=max(left, 0.0),
                after_stops=after,
            )  # fmt: skip
            if reply.stops > after:
                return True
            if left <= 0:
                return False

    # -- closing ---------------------------------------------------------------------------

    def _close(self) -> None:
        """End the lease (CloseDevice; the server resets the device for the next holder),
        then the HoldLease stream and the channel. A server already gone is no error."""
        try:
            self._lease.close()
        finally:
            self._finalizer()
            self._lease.join(5.0)
            local, self._local = self._local, None
            if local is not None:
                local.close()
            self.drop_ring("closed")
