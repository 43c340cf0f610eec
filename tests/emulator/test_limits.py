"""What one client can make the server hold is bounded (`npuemu.server.limits`): memory
streams per lease and staged bytes, connections on the gRPC port and on ``local.sock``. A
flood of either leaves the devices working: lease ends still clear them, no worker is lost,
and the local fast path serves holders again once the flood is gone. Real servers, real
sockets."""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import threading
from collections.abc import Iterator

import grpc
import pytest
from rpc_client import UDMA_BASE, Client, connect
from test_hardening import wait_until

from npuemu.server.launch import ServerProcess
from npuemu.server.limits import MAX_STREAMS_PER_LEASE
from npuemu.server.service import boot_id
from xrt.hw.wire import pb
from xrt.transport.grpc.local_memory import receive_memory_file

pytestmark = pytest.mark.sim

MIB = 1 << 20


def held_stream(c: Client, offset: int, nbytes: int, release: threading.Event) -> Iterator:
    """A WriteMemory stream that sends all its bytes, then waits for `release` to end."""
    yield pb.WriteMemoryRequest(
        lease_id=c.lease, address=UDMA_BASE + offset, length=nbytes, data=bytes(MIB)
    )
    for _ in range(1, nbytes // MIB):
        yield pb.WriteMemoryRequest(data=bytes(MIB))
    release.wait(120)


def test_memory_streams_are_bounded_per_lease_and_in_all():
    """Defect: each WriteMemory stream held its whole payload (up to 64 MiB) in the server
    and nothing bounded how many: 16 concurrent streams of one lease took 1.5 GiB. Now a
    lease has at most MAX_STREAMS_PER_LEASE open, and all streams stage at most 256 MiB;
    past either bound a stream is refused RESOURCE_EXHAUSTED before it is received."""
    with ServerProcess.start(devices=2) as srv:
        a, b = connect(srv), connect(srv)
        release = threading.Event()
        try:
            # Nothing here keeps the leases alive between calls (no HoldLease, no
            # KeepAlive): a TTL far past the test's deadlines, so load cannot end them.
            a.open(device="npu0", client="a", lease_ttl_ms=3_600_000)
            b.open(device="npu1", client="b", lease_ttl_ms=3_600_000)
            calls = [
                a.stub.WriteMemory.future(held_stream(a, 0, 16 * MIB, release))
                for _ in range(MAX_STREAMS_PER_LEASE + 2)
            ]
            # Generous deadlines: they bound a hang, not the speed (a full-suite run at load 4 with
            # model builds beside it once took over 60 s here).
            refused = [calls[-1].exception(300), calls[-2].exception(300)]
            for exc in refused:
                assert exc.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, exc
                assert "WriteMemory streams open" in exc.details()
            assert not any(c.done() for c in calls[:MAX_STREAMS_PER_LEASE])
            # The other lease's streams count against the server's staging bytes (256 MiB):
            # a's hold 64 MiB, three of b's 64 MiB make 256, the fourth is refused.
            big = [
                b.stub.WriteMemory.future(held_stream(b, 0, 64 * MIB, release)) for _ in range(4)
            ]
            exc = big[3].exception(300)
            assert exc.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, exc
            assert "staging bytes" in exc.details()
            release.set()
            for call in calls[:MAX_STREAMS_PER_LEASE] + big[:3]:
                assert call.result(300).bytes_written > 0
            # Everything was given back: a new stream is admitted and writes.
            a.write_mem(UDMA_BASE, b"after the flood")
            assert a.read_mem(UDMA_BASE, 15) == b"after the flood"
        finally:
            release.set()
            for c in (a, b):
                with contextlib.suppress(grpc.RpcError):
                    c.close()
                c.channel.close()


def flood(address: str | None, family: int, count: int) -> list[socket.socket]:
    """`count` idle connections (nothing sent) to `address` (host:port or a path)."""
    socks = []
    for _ in range(count):
        s = socket.socket(family, socket.SOCK_STREAM)
        s.settimeout(5)
        try:
            if family == socket.AF_UNIX:
                s.connect(address)
            else:
                host, port = address.rsplit(":", 1)
                s.connect((host, int(port)))
        except OSError:
            s.close()
            continue
        socks.append(s)
    return socks


def test_a_connection_flood_leaves_the_devices_working():
    """Defect: about 1,000 idle connections to the gRPC port (before any token check) or to
    local.sock (same user), under a 1,024-descriptor limit, made the lease-end clearing fail
    (no descriptor for the new memory files: the worker was killed), and local.sock's accept
    loop died of the error for good (clients quietly fell back to streaming). Now the
    connections are bounded to what the limit leaves, local.sock serves a bounded number at
    a time and its loop outlives errors. The server runs here under a 256-descriptor limit
    and meets 400 idle connections on each door."""
    command = ("prlimit", "--nofile=256:256", sys.executable, "-m", "npuemu.cli")
    with ServerProcess.start(devices=1, command=command) as srv:
        assert "client connections" in srv.log
        c = connect(srv)
        host = pb.LocalHost(hostname=socket.gethostname(), boot_id=boot_id())
        (mapping,) = c.open(device="npu0", client="a", local_host=host).local_mappings
        c.close()
        socks: list[socket.socket] = []
        try:
            socks += flood(srv.address, socket.AF_INET, 400)
            socks += flood(mapping.socket, socket.AF_UNIX, 400)
            for round_ in range(3):  # lease ends make new memory files: descriptors
                c.open(device="npu0", client="a")
                c.write_mem(UDMA_BASE, bytes([round_ + 1]) * 4096)
                assert c.read_mem(UDMA_BASE, 4096) == bytes([round_ + 1]) * 4096
                c.close()
            counters = c.stub.GetCounters(pb.GetCountersRequest(device="npu0"))
            assert counters.worker_restarts == 0, srv.log[-3000:]
        finally:
            for s in socks:
                s.close()
        # The flood is gone: the fast path hands out the memory file again.
        c.open(device="npu0", client="a", local_host=host)

        def handed_out() -> bool:
            try:
                fd = receive_memory_file(mapping.socket, c.lease, mapping.size)
            except (ValueError, OSError):
                return False
            os.close(fd)
            return True

        wait_until(handed_out, 60, "local.sock to hand out the memory file again")
        c.close()
        c.channel.close()
