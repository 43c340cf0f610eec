"""The server <-> worker framing (npuemu.worker.protocol) over a real Unix socket pair: the
worker's blocking end and the server's asyncio protocol agree on every split of the byte
stream, and a broken or closed channel is reported once, never silently dropped."""

from __future__ import annotations

import asyncio
import socket
import struct

import pytest

from npuemu.worker.protocol import BlockingChannel, ChannelClosedError, FrameProtocol, frame

MESSAGES = [
    {"id": 1, "op": "read_reg", "addr": 0x4000_0010},
    {
        "id": 2,
        "op": "batch",
        "ops": [("read", 0x4000_0000 + 4 * i, 0, 0, 0, 0) for i in range(4096)],
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
