"""Framing of the server <-> worker IPC: length-prefixed pickles over a Unix socket.

Both ends are this project's own processes on one machine, so pickle is safe here. A frame
is a 4-byte big-endian length followed by the pickled message (a dict). The worker side is
blocking (it runs inside the simulator and must freeze simulated time while it waits); the
server side is an asyncio protocol (`FrameProtocol`): frames are parsed in the event loop's
reader callback and handed on at once, with no reader task to wake per message.
"""

from __future__ import annotations

import asyncio
import pickle
import select
import socket
import struct
from collections.abc import Callable
from typing import Any

__all__ = ["BlockingChannel", "ChannelClosedError", "FrameProtocol", "frame"]

_HEADER = struct.Struct(">I")
MAX_FRAME = 64 << 20  # register batches and results only: never bulk data
_RECV_CHUNK = 1 << 16


class ChannelClosedError(EOFError):
    """The other end closed the channel (or died)."""


class BlockingChannel:
    """The worker's end: blocking send/recv, plus a non-blocking check for a request.

    `recv` reads what the socket holds in one call (a whole small frame, usually) and
    keeps any rest for the next message: one system call per request, not two.
    """

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.sock.setblocking(True)
        self._buf = bytearray()
        self._poll = select.poll()
        self._poll.register(sock, select.POLLIN)

    def pending(self) -> bool:
        """True when a request (or EOF) is waiting to be read."""
        return bool(self._buf) or bool(self._poll.poll(0))

    def _fill(self, n: int) -> None:
        while len(self._buf) < n:
            part = self.sock.recv(max(_RECV_CHUNK, n - len(self._buf)))
            if not part:
                raise ChannelClosedError("server closed the channel")
            self._buf += part

    def recv(self) -> dict[str, Any]:
        self._fill(_HEADER.size)
        (length,) = _HEADER.unpack_from(self._buf)
        if length > MAX_FRAME:
            raise ValueError(f"frame of {length} bytes exceeds {MAX_FRAME}")
        end = _HEADER.size + length
        self._fill(end)
        message = pickle.loads(self._buf[_HEADER.size : end])
        del self._buf[:end]
        return message

    def send(self, message: dict[str, Any]) -> None:
        self.sock.sendall(frame(message))


class FrameProtocol(asyncio.Protocol):
    """The server's end: calls `on_frame` with each message as it arrives, and `on_lost`
    once when the channel closes (EOF, an error, or a frame that cannot be read)."""

    def __init__(
        self,
        on_frame: Callable[[dict[str, Any]], None],
        on_lost: Callable[[Exception | None], None],
    ) -> None:
        self._on_frame = on_frame
        self._on_lost = on_lost
        self._buf = bytearray()
        self._transport: asyncio.BaseTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport

    def data_received(self, data: bytes) -> None:
        buf = self._buf
        buf += data
        while len(buf) >= _HEADER.size:
            (length,) = _HEADER.unpack_from(buf)
            end = _HEADER.size + length
            try:
                if length > MAX_FRAME:
                    raise ValueError(f"frame of {length} bytes exceeds {MAX_FRAME}")
                if len(buf) < end:
                    return
                message = pickle.loads(buf[_HEADER.size : end])
            except Exception as exc:  # a broken channel: nothing after it can be trusted
                buf.clear()
                self._on_lost(exc)
                if self._transport is not None:
                    self._transport.close()
                return
            del buf[:end]
            self._on_frame(message)

    def eof_received(self) -> bool:
        return False  # close the transport: connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self._on_lost(exc)


def frame(message: dict[str, Any]) -> bytes:
    """One message as the bytes of a frame."""
    payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return _HEADER.pack(len(payload)) + payload
