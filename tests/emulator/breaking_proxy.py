"""A TCP proxy in front of a gRPC server that breaks a connection on request.

`BreakingProxy` forwards bytes both ways. It reads the client's HTTP/2 frames (after the
24-byte connection preface, each frame is a 9-byte header: length, type, flags, stream id)
and decodes the HEADERS frames that open a request stream (HPACK, with the `hpack`
library) to learn each request's method. `break_next_request()` arms it: the next
request's HEADERS frame (of one method, if named) is not forwarded; instead both sockets
are reset, as when a network path fails under a call in flight. The server never sees
that request, which is what lets a test tell a retried call from one that was not.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading

import hpack

__all__ = ["BreakingProxy"]

_PREFACE = 24  # b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
_HEADERS = 0x1


class BreakingProxy:
    """Listen on 127.0.0.1 (a free port) and forward every connection to `upstream`."""

    def __init__(self, upstream: str) -> None:
        host, port = upstream.rsplit(":", 1)
        self._upstream = (host, int(port))
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self._listener.getsockname()[1]}"
        self._lock = threading.Lock()
        self._armed: str | None = None  # break the next request whose :path ends so
        self._sockets: set[socket.socket] = set()
        self.requests = 0  # request streams forwarded to the server
        self.breaks = 0  # connections broken on purpose
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def break_next_request(self, method: str = "") -> None:
        """Reset the connection that carries the next request (of `method`, e.g.
        ``"OpenDevice"``, if given), before the server sees it."""
        with self._lock:
            self._armed = f"/{method}" if method else ""

    def close(self) -> None:
        with self._lock:
            self._closed = True
            socks, self._sockets = list(self._sockets), set()
        self._listener.close()
        for s in socks:
            _reset(s)

    def __enter__(self) -> BreakingProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            try:
                server = socket.create_connection(self._upstream)
            except OSError:
                _reset(client)
                continue
            with self._lock:
                if self._closed:
                    _reset(client)
                    _reset(server)
                    return
                self._sockets |= {client, server}
            threading.Thread(target=self._up, args=(client, server), daemon=True).start()
            threading.Thread(target=self._down, args=(server, client), daemon=True).start()

    def _down(self, server: socket.socket, client: socket.socket) -> None:
        try:
            while data := server.recv(65536):
                client.sendall(data)
        except OSError:
            pass
        self._drop(server, client)

    def _up(self, client: socket.socket, server: socket.socket) -> None:
        buf, preface, headers = b"", _PREFACE, hpack.Decoder()
        try:
            while data := client.recv(65536):
                buf += data
                out = b""
                if preface:
                    take = min(preface, len(buf))
                    out, buf, preface = buf[:take], buf[take:], preface - take
                broken = False
                while not preface and len(buf) >= 9:
                    end = 9 + int.from_bytes(buf[:3], "big")
                    if len(buf) < end:
                        break  # the rest of this frame comes with the next recv
                    frame, buf = buf[:end], buf[end:]
                    path = _request_path(frame, headers)
                    if path is not None and self._count_request(path):
                        broken = True
                        break
                    out += frame
                if out:
                    server.sendall(out)
                if broken:
                    break
        except OSError:
            pass
        self._drop(client, server)

    def _count_request(self, path: str) -> bool:
        """Count a request; True when it is the one to break the connection on."""
        with self._lock:
            hit = self._armed is not None and path.endswith(self._armed)
            if hit:
                self._armed = None
                self.breaks += 1
            else:
                self.requests += 1
            return hit

    def _drop(self, *socks: socket.socket) -> None:
        with self._lock:
            self._sockets -= set(socks)
        for s in socks:
            _reset(s)


def _request_path(frame: bytes, headers: hpack.Decoder) -> str | None:
    """The ``:path`` of a HEADERS frame on a stream (the client sends one per call: gRPC
    clients send no trailers), else None. Every header block goes through the decoder:
    HPACK's table is per connection."""
    flags, (stream,) = frame[4], struct.unpack(">I", frame[5:9])
    if frame[3] != _HEADERS or not stream & 0x7FFF_FFFF:
        return None
    block = frame[9:]
    if flags & 0x08:  # PADDED: pad length first, padding at the end
        block = block[1 : len(block) - block[0]]
    if flags & 0x20:  # PRIORITY: stream dependency and weight
        block = block[5:]
    assert flags & 0x04, "a header block continued in CONTINUATION frames"
    return dict(headers.decode(block)).get(":path", "")


def _reset(sock: socket.socket) -> None:
    """Close with a TCP reset (no orderly shutdown): the peer sees the connection fail."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()
