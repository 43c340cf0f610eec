"""Framing of the server <-> worker IPC: length-prefixed msgpack maps over a Unix socket.

A frame is a 4-byte big-endian length followed by one message: a msgpack map with string
keys whose values are plain data (integers, floats, strings, bytes, booleans, None and
tuples of them). Decoding runs no code, whatever the bytes (pickle would run any code a
frame names: a process that got hold of the socket could have run code in the server), and
is bounded: a frame of at most `MAX_FRAME` bytes, strings, arrays and maps of bounded
length, bounded nesting (msgpack's own). A frame that breaks these rules closes the
channel. The worker side is blocking (it runs inside the simulator and must freeze
simulated time while it waits); the server side is an asyncio protocol (`FrameProtocol`):
frames are parsed in the event loop's reader callback and handed on at once, with no
reader task to wake per message.

What the frames carry is the device port's (`xrt.hw.port`): a request's map
(`encode_request`: ``id``, ``t`` its tag, its fields), a reply's (`encode_reply`), and,
from the worker, its hello (``{"ev": "ready", ...}``, `npuemu.worker.config.Hello`) and
the requests its taps saw (``{"ev": "served", ...}``, `npuemu.worker.port`).
"""

from __future__ import annotations

import asyncio
import select
import socket
import struct
from collections.abc import Callable
from typing import Any

import msgpack

__all__ = [
    "MAX_FRAME",
    "STATE_SLACK_BYTES",
    "BlockingChannel",
    "ChannelClosedError",
    "FrameError",
    "FrameProtocol",
    "decode",
    "frame",
]

_HEADER = struct.Struct(">I")
MAX_FRAME = 16 << 20  # register batches and results only: never bulk data
MAX_ITEMS = 1 << 16  # elements of one array or map (a batch holds at most 4096 ops)
MAX_TEXT = 1 << 16  # bytes of one string (error messages, file paths)
MAX_BIN = 1 << 18  # bytes of one binary field: a batch's records (4096 ops of 32 bytes)
_RECV_CHUNK = 1 << 16
STATE_SLACK_BYTES = 64 << 10
"""How much larger than the worker's own a model state to restore may be: its context
strings may differ in length (rtl/sim/npu_model_state.h bounds each to 4 KiB)."""


class FrameError(ValueError):
    """A frame that is not a well-formed message (too long, not a map of plain data)."""


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
            raise FrameError(f"frame of {length} bytes exceeds {MAX_FRAME}")
        end = _HEADER.size + length
        self._fill(end)
        message = decode(self._buf[_HEADER.size : end])
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
                    raise FrameError(f"frame of {length} bytes exceeds {MAX_FRAME}")
                if len(buf) < end:
                    return
                message = decode(buf[_HEADER.size : end])
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
    payload = msgpack.packb(message, use_bin_type=True)
    if len(payload) > MAX_FRAME:
        raise FrameError(f"message of {len(payload)} bytes exceeds {MAX_FRAME}")
    return _HEADER.pack(len(payload)) + payload


def decode(payload: bytes | bytearray | memoryview) -> dict[str, Any]:
    """The message in one frame's payload (arrays come back as tuples).

    Raises:
        FrameError: the payload is not one msgpack map with string keys within the bounds.
    """
    try:
        message = msgpack.unpackb(
            payload,
            use_list=False,
            raw=False,
            strict_map_key=True,
            max_str_len=MAX_TEXT,
            max_bin_len=MAX_BIN,
            max_array_len=MAX_ITEMS,
            max_map_len=MAX_ITEMS,
            max_ext_len=0,
        )
    except Exception as exc:  # msgpack raises several types: one for the caller
        raise FrameError(f"undecodable frame: {type(exc).__name__}: {exc}") from None
    if not isinstance(message, dict):
        raise FrameError(f"a frame must hold a map, not {type(message).__name__}")
    return message
