"""One channel's calls to the device service: the token, the retry loop, the deadlines.

`DeviceClient` is what the rest of the transport calls through. `DeviceClient.unary` makes
one unary call, retries a refusal the server marks as safe to retry (the policy is in
`xrt.transport.grpc.retry`) and turns any failure into an `XrtError`
(`xrt.transport.grpc.errors`); `read_memory` and `write_memory` stream host-visible memory
in 1 MiB messages. Every deadline is longer than the server's own watchdog, so the server
answers first.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator
from typing import Any, cast

import grpc

from xrt.errors import ErrorCode, XrtError
from xrt.hw.wire import MAX_CHUNK, CheckpointScope, pb, pb_grpc
from xrt.transport.grpc.channel import open_channel
from xrt.transport.grpc.errors import rpc_error
from xrt.transport.grpc.retry import (
    DEFAULT_RETRY_S,
    REASON_BUSY,
    REASON_RESETTING,
    REASON_RESTARTING,
    REASON_STARTING,
    START_WAIT_S,
    retry_hint,
)

__all__ = ["RPC_SLACK_S", "STREAM_MIN_BYTES_PER_S", "DeviceClient", "stream_timeout"]

RPC_SLACK_S = 120.0  # added to every deadline: longer than the server's own watchdog
STREAM_MIN_BYTES_PER_S = 8 << 20  # deadline of memory streams: this slow is broken


CHECKPOINT_TIMEOUT_S = 600.0  # a checkpoint moves up to ~600 MiB and waits for idle engines


def stream_timeout(nbytes: int) -> float:
    """Deadline of a memory stream of `nbytes` bytes."""
    return RPC_SLACK_S + nbytes / STREAM_MIN_BYTES_PER_S


def _trailers(exc: grpc.RpcError) -> tuple[tuple[str, str], ...]:
    fn = getattr(exc, "trailing_metadata", None)
    try:
        return tuple(fn() or ()) if callable(fn) else ()
    except Exception:  # a failure without a call behind it has none
        return ()


class DeviceClient:
    """A ``DeviceService`` stub on its own channel, with the caller's token on every call.

    Args:
        address: ``HOST:PORT`` of the server.
        tls: Channel credentials (``grpcs://``); None: plain.
        token: Bearer token (default: ``$NPU_EMU_TOKEN``, if set).
        retry_s: How long a call that meets a restart of the device's simulation worker is
            retried (`retry_s` may be changed at any time).

    Attributes:
        channel: The channel (closed by the transport's finalizer, `lease.release`).
        stub: The generated stub; calls on it bypass the retries and the error mapping.
        cycles: Simulated cycles the last unary response reported (None before any).
    """

    def __init__(
        self,
        address: str,
        *,
        tls: grpc.ChannelCredentials | None = None,
        token: str | None = None,
        retry_s: float = DEFAULT_RETRY_S,
    ) -> None:
        self.address = address
        if token is None:
            token = os.environ.get("NPU_EMU_TOKEN") or None
        self.metadata: tuple[tuple[str, str], ...] = (
            (("authorization", f"Bearer {token}"),) if token else ()
        )
        self.retry_s = retry_s
        self.cycles: int | None = None
        self.channel = open_channel(address, tls)
        self.stub = pb_grpc.DeviceServiceStub(self.channel)

    def unary(
        self, method: str, request: Any, what: str, *, timeout: float, wait_s: float = 0.0
    ) -> Any:
        """One unary call of `method`; failures become XrtError (`xrt.transport.grpc.errors`).

        A refusal the server marks as safe to retry (trailing metadata, see
        `xrt.transport.grpc.retry`) is retried: a worker restart or a device being reset
        for up to `retry_s`, a leased device (OpenDevice) for up to `wait_s`. Anything
        else (among it the call during which a worker died: its effect is unknown) fails
        at once; transport failures of idempotent methods are gRPC's own retries.

        Args:
            method: The RPC's name (``"ReadRegister"``).
            request: Its request message.
            what: The operation, for error messages.
            timeout: The call's deadline in seconds.
            wait_s: How long a busy device is waited for.
        """
        start = time.monotonic()
        attempts = 0
        said = False
        while True:
            attempts += 1
            try:
                resp = getattr(self.stub, method)(request, timeout=timeout, metadata=self.metadata)
                break
            except grpc.RpcError as exc:
                reason, after_s = retry_hint(_trailers(exc))
                spent = time.monotonic() - start
                if reason in (REASON_RESTARTING, REASON_RESETTING):
                    budget = max(self.retry_s, wait_s)
                elif reason == REASON_BUSY:
                    budget = wait_s
                elif reason == REASON_STARTING:
                    budget = max(START_WAIT_S, wait_s)
                    if not said:  # one line, so a user sees why nothing happens yet
                        said = True
                        _say(f"xrt: {self.address}: {exc.details()}: waiting up to {budget:.0f} s")
                else:
                    raise rpc_error(exc, what) from None
                if spent + after_s > budget:
                    gave_up = f"{what} (gave up after {attempts} attempt(s) in {spent:.1f} s"
                    gave_up += f" of a {budget:.0f} s retry budget)"
                    raise rpc_error(exc, gave_up) from None
                time.sleep(max(after_s, 0.05))
        cycles = getattr(resp, "cycles", None)
        if cycles:
            self.cycles = int(cycles)
        return resp

    def read_memory(self, lease_id: str, addr: int, nbytes: int, what: str) -> bytearray:
        """Read `nbytes` at `addr` (one ReadMemory stream).

        Raises:
            XrtError: the call's mapped status; 11014 when the server sent another length.
        """
        out = bytearray(nbytes)
        pos = 0
        request = pb.ReadMemoryRequest(lease_id=lease_id, address=addr, length=nbytes)
        try:
            for msg in self.stub.ReadMemory(
                request, timeout=stream_timeout(nbytes), metadata=self.metadata
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

    def write_memory(self, lease_id: str, addr: int, data: memoryview, what: str) -> None:
        """Write `data` at `addr` (one WriteMemory stream of `MAX_CHUNK` messages).

        Raises:
            XrtError: the call's mapped status; 11014 when the server wrote another length.
        """
        n = len(data)

        def messages() -> Iterator[pb.WriteMemoryRequest]:
            yield pb.WriteMemoryRequest(
                lease_id=lease_id, address=addr, length=n, data=data[:MAX_CHUNK].tobytes()
            )
            for off in range(MAX_CHUNK, n, MAX_CHUNK):
                yield pb.WriteMemoryRequest(data=data[off : off + MAX_CHUNK].tobytes())

        try:
            resp = self.stub.WriteMemory(
                messages(), timeout=stream_timeout(n), metadata=self.metadata
            )
        except grpc.RpcError as exc:
            raise rpc_error(exc, what) from None
        if resp.bytes_written != n:
            raise XrtError(
                ErrorCode.DEVICE_INTERNAL, f"{what}: the server wrote {resp.bytes_written} B"
            )

    def save_checkpoint(self, lease_id: str, wait_cycles: int, what: str) -> tuple[bytes, int]:
        """The device's checkpoint file (one SaveCheckpoint stream) and the cycle it was
        taken at.

        Raises:
            XrtError: the call's mapped status (an engine runs: 11012); 11014 when the
                stream's length is not the one announced.
        """
        request = pb.SaveCheckpointRequest(lease_id=lease_id, wait_cycles=wait_cycles)
        parts: list[bytes] = []
        total = cycle = received = 0
        try:
            stream = self.stub.SaveCheckpoint(
                request, timeout=CHECKPOINT_TIMEOUT_S, metadata=self.metadata
            )
            for i, msg in enumerate(stream):
                if i == 0:
                    total, cycle = msg.total_bytes, msg.cycles
                parts.append(msg.data)
                received += len(msg.data)
        except grpc.RpcError as exc:
            raise rpc_error(exc, what) from None
        if received != total:
            raise XrtError(
                ErrorCode.DEVICE_INTERNAL, f"{what}: {received} B of the {total} B announced"
            )
        return b"".join(parts), cycle

    def restore_checkpoint(
        self, lease_id: str, data: bytes, what: str, scope: CheckpointScope
    ) -> tuple[int, int]:
        """Send a checkpoint file (one RestoreCheckpoint stream) to restore in `scope`; the
        cycle the device was restored at and the cycle the checkpoint was taken at."""
        view = memoryview(data)
        n = len(view)

        def messages() -> Iterator[pb.RestoreCheckpointRequest]:
            yield pb.RestoreCheckpointRequest(
                lease_id=lease_id,
                total_bytes=n,
                data=view[:MAX_CHUNK].tobytes(),
                scope=cast(pb.CheckpointScope, int(scope)),
            )
            for off in range(MAX_CHUNK, n, MAX_CHUNK):
                yield pb.RestoreCheckpointRequest(data=view[off : off + MAX_CHUNK].tobytes())

        try:
            resp = self.stub.RestoreCheckpoint(
                messages(), timeout=CHECKPOINT_TIMEOUT_S, metadata=self.metadata
            )
        except grpc.RpcError as exc:
            raise rpc_error(exc, what) from None
        return int(resp.cycles), int(resp.saved_cycle)


def _say(line: str) -> None:
    with contextlib.suppress(OSError, ValueError, AttributeError):  # no or a closed stderr
        print(line, file=sys.stderr, flush=True)
