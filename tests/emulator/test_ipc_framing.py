"""The server <-> worker framing (npuemu.worker.protocol) over a real Unix socket pair: the
worker's blocking end and the server's asyncio protocol agree on every split of the byte
stream, a broken or closed channel is reported once, never silently dropped, and a frame
that is not plain data (a pickle that would run code, a string past the bounds) runs
nothing and closes the channel."""

from __future__ import annotations

import asyncio
import pickle
import socket
import struct
from pathlib import Path

import msgpack
import pytest

from npuemu.worker.protocol import (
    MAX_TEXT,
    BlockingChannel,
    ChannelClosedError,
    FrameError,
    FrameProtocol,
    frame,
)

MESSAGES = [
    {"id": 1, "op": "read_reg", "addr": 0x4000_0010},
    {
        "id": 2,
        "op": "batch",
        "ops": tuple(("read", 0x4000_0000 + 4 * i, 0, 0, 0, 0) for i in range(4096)),
    },
    {"id": 3, "op": "cancel"},
]


class Collector:
    def __init__(self) -> None:
        self.frames: list[dict] = []
        self.lost: list[Exception | None] = []

    def protocol(self) -> FrameProtocol:
        return FrameProtocol(self.frames.append, self.lost.append)


@pytest.mark.parametrize("chunk", [1, 3, 4, 5, 4096, 1 << 20])
def test_protocol_reassembles_frames_from_any_split(chunk: int) -> None:
    c = Collector()
    p = c.protocol()
    data = b"".join(frame(m) for m in MESSAGES)
    for i in range(0, len(data), chunk):
        p.data_received(data[i : i + chunk])
    assert c.frames == MESSAGES
    assert c.lost == []


def test_protocol_reports_an_oversized_frame_and_closes() -> None:
    c = Collector()
    p = c.protocol()

    class Transport:
        closed = False

        def close(self) -> None:
            self.closed = True

    t = Transport()
    p.connection_made(t)  # type: ignore[arg-type]
    p.data_received(struct.pack(">I", (64 << 20) + 1) + b"x")
    assert c.frames == [] and len(c.lost) == 1 and "exceeds" in str(c.lost[0])
    assert t.closed


def test_both_ends_over_a_socket_pair() -> None:
    """Requests from the server's protocol reach the blocking end whole, answers come back
    in order, and the worker's EOF reaches the protocol as a lost connection."""

    async def main() -> tuple[list[dict], list[Exception | None], list[dict]]:
        server_sock, worker_sock = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        chan = BlockingChannel(worker_sock)
        c = Collector()
        loop = asyncio.get_running_loop()
        transport, _ = await loop.create_unix_connection(c.protocol, sock=server_sock)
        for m in MESSAGES:
            transport.write(frame(m))
        got: list[dict] = []

        def worker() -> None:  # the worker's loop, blocking, in a thread here
            for _ in MESSAGES:
                req = chan.recv()
                got.append(req)
                chan.send({"id": req["id"], "ok": True})
            assert not chan.pending()
            worker_sock.close()

        await asyncio.wait_for(asyncio.to_thread(worker), 30)
        for _ in range(3000):  # the answers and the EOF arrive through the loop
            if c.lost:
                break
            await asyncio.sleep(0.01)
        transport.close()
        return got, c.lost, c.frames

    got, lost, answers = asyncio.run(main())
    assert got == MESSAGES
    assert answers == [{"id": m["id"], "ok": True} for m in MESSAGES]
    assert lost == [None]


def test_blocking_end_sees_a_closed_channel() -> None:
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    chan = BlockingChannel(b)
    a.sendall(frame({"id": 7})[:3])  # half a header, then the server is gone
    a.close()
    assert chan.pending()
    with pytest.raises(ChannelClosedError):
        chan.recv()


class _Touch:
    """Unpickling this creates a file: what a pickled frame could make the server do."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self):
        return (Path.touch, (self.path,))


def _raw(payload: bytes) -> bytes:
    return struct.pack(">I", len(payload)) + payload


def test_a_frame_that_is_not_plain_data_runs_nothing(tmp_path: Path) -> None:
    """Defect: frames were pickles, so whoever could write to the channel (a process that
    took the worker's socket while the worker was starting) ran code in the server."""
    marker = tmp_path / "ran"
    hostile = [
        pickle.dumps({"id": 1, "ok": True, "x": _Touch(marker)}),
        msgpack.packb([1, 2, 3]),  # not a map
        msgpack.packb({1: "x"}),  # not string keys
        msgpack.packb({"error": "x" * (MAX_TEXT + 1)}),  # a string past the bound
    ]
    for payload in hostile:
        c = Collector()
        c.protocol().data_received(_raw(payload))
        assert c.frames == [] and len(c.lost) == 1, payload[:20]
        assert isinstance(c.lost[0], FrameError)
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        with a, b:
            a.sendall(_raw(payload))
            with pytest.raises(FrameError):
                BlockingChannel(b).recv()
    assert not marker.exists(), "decoding a frame ran code"
