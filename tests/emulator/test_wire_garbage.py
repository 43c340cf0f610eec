"""Requests that are not what they claim: bytes that are not the method's message get
INVALID_ARGUMENT on every method (not INTERNAL, which reads like a server fault), and a
lease whose OpenDevice answer never reached anyone does not keep its device for the TTL it
asked for. Real server, raw gRPC calls."""

from __future__ import annotations

import time

import grpc
import pytest
from rpc_client import PROTOCOL, connect
from test_hardening import open_when_free

from npuemu.server.launch import ServerProcess
from npuemu.server.leases import UNCLAIMED_TTL_S
from xrt.hw.wire import pb

pytestmark = pytest.mark.sim

SERVICE = pb.DESCRIPTOR.services_by_name["DeviceService"]
GARBAGE = (b"\xff" * 8, b"\n\x05ab", b"garbage!")


@pytest.fixture(scope="module")
def server():
    with ServerProcess.start(devices=2) as srv:
        yield srv


def raw_call(channel: grpc.Channel, method, body: bytes) -> grpc.StatusCode:
    path = f"/{SERVICE.full_name}/{method.name}"
    try:
        if method.client_streaming:
            channel.stream_unary(path)(iter([body]), timeout=30)
        elif method.server_streaming:
            for _ in channel.unary_stream(path)(body, timeout=30):
                pass
        else:
            channel.unary_unary(path)(body, timeout=30)
    except grpc.RpcError as exc:
        assert (
            "is not a npuemu.v1." in exc.details() or exc.code() != grpc.StatusCode.INVALID_ARGUMENT
        )
        return exc.code()
    return grpc.StatusCode.OK


def test_undecodable_requests_get_invalid_argument(server):
    """Defect: raw bytes that are not a method's message were answered INTERNAL or UNKNOWN
    (gRPC's "Exception deserializing request"): 996 times in a fuzz run."""
    c = connect(server)
    try:
        for method in SERVICE.methods:
            for body in GARBAGE:
                code = raw_call(c.channel, method, body)
                assert code == grpc.StatusCode.INVALID_ARGUMENT, (method.name, body, code)
        assert len(c.stub.ListDevices(pb.ListDevicesRequest()).devices) == 2  # still serving
    finally:
        c.channel.close()
    assert "Traceback" not in server.log


def test_a_lease_nobody_used_does_not_keep_the_device_for_its_ttl(server):
    """Defect suspected in a fuzz run's outage: an OpenDevice granted a lease of up to an
    hour whose answer never reached the client (a deadline) kept the device for that hour:
    nobody knew the lease id to close it. A lease never used (no HoldLease, KeepAlive or
    call with its id) now ends after UNCLAIMED_TTL_S; a used one keeps its TTL."""
    a, b = connect(server), connect(server)
    try:
        lost = a.stub.OpenDevice(
            pb.OpenDeviceRequest(
                device="npu0", client="lost", protocol_version=PROTOCOL, lease_ttl_ms=3_600_000
            )
        )
        assert lost.lease_ttl_ms == 3_600_000
        used = a.stub.OpenDevice(
            pb.OpenDeviceRequest(
                device="npu1", client="used", protocol_version=PROTOCOL, lease_ttl_ms=3_600_000
            )
        )
        a.stub.KeepAlive(pb.KeepAliveRequest(lease_id=used.lease_id))
        t0 = time.monotonic()
        open_when_free(b, "npu0", timeout_s=UNCLAIMED_TTL_S + 60)
        assert time.monotonic() - t0 >= UNCLAIMED_TTL_S - 1
        assert "never used in the" in server.log
        b.close()
        # The used one is still held (the same wait as the unused one got, and more).
        a.stub.KeepAlive(pb.KeepAliveRequest(lease_id=used.lease_id))
        a.stub.CloseDevice(pb.CloseDeviceRequest(lease_id=used.lease_id))
    finally:
        a.channel.close()
        b.channel.close()
