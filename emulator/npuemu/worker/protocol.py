"""Framing of the server <-> worker IPC: length-prefixed pickles over a Unix socket.

Both ends are this project's own processes on one machine, so pickle is safe here. A frame
is a 4-byte big-endian length followed by the pickled message (a dict). The worker side is
blocking (it runs inside the simulator and must freeze simulated time while it waits); the
server side is asyncio (`read_frame` / `write_frame` on stream objects).
"""

from __future__ import annotations

import asyncio
import pickle
import select
import socket
import struct
from typing import Any

__all__ = ["BlockingChannel", "ChannelClosedError", "frame", "read_frame", "write_frame"]

_HEADER = struct.Struct(">I")
MAX_FRAME = 64 << 20  # register batches and results only: never bulk data


class ChannelClosedError(EOFError):
    """The other end closed the channel (or died)."""


class BlockingChannel:
    """The worker's end: blocking send/recv, plus a non-blocking check for a request."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.sock.setblocking(True)

    def pending(self) -> bool:
        """True when a request (or EOF) is waiting to be read."""
        readable, _, _ = select.select([self.sock], [], [], 0)
        return bool(readable)

    def _recv_exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            part = self.sock.recv(n - len(buf))
            if not part:
                raise ChannelClosedError("server closed the channel")
            buf += part
        return bytes(buf)

    def recv(self) -> dict[str, Any]:
        (length,) = _HEADER.unpack(self._recv_exact(_HEADER.size))
        if length > MAX_FRAME:
            raise ValueError(f"frame of {length} bytes exceeds {MAX_FRAME}")
        return pickle.loads(self._recv_exact(length))

    def send(self, message: dict[str, Any]) -> None:
        self.sock.sendall(frame(message))


async def read_frame(reader: asyncio.StreamReader) -> dict[str, Any]:
    """Read one message; ChannelClosedError at EOF."""
    try:
        header = await reader.readexactly(_HEADER.size)
        (length,) = _HEADER.unpack(header)
        if length > MAX_FRAME:
            raise ValueError(f"frame of {length} bytes exceeds {MAX_FRAME}")
        return pickle.loads(await reader.readexactly(length))
    except asyncio.IncompleteReadError as exc:
        raise ChannelClosedError("worker closed the channel") from exc


def frame(message: dict[str, Any]) -> bytes:
    """One message as the bytes of a frame."""
    payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return _HEADER.pack(len(payload)) + payload


async def write_frame(writer: asyncio.StreamWriter, message: dict[str, Any]) -> None:
    writer.write(frame(message))
    await writer.drain()
