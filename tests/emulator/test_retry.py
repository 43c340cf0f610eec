"""What a client retries when it meets a worker restart, and what it never retries.

The server marks a refusal that changed nothing (the device's worker is restarting) in
trailing metadata; the runtime retries such calls within a bounded budget and fails with a
clear message once it is spent. The call during which a worker died or hung is not marked
(its effect is unknown) and is never retried, not even by gRPC's own retry policy.
Real `npu-emu serve`, real workers, the runtime's gRPC transport (xrt.transport.grpc.retry).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time

import grpc
import pytest
from breaking_proxy import BreakingProxy
from grpc_health.v1 import health_pb2, health_pb2_grpc
from rpc_client import NPU_BASE, worker_pid, worker_starts_fail

from npuemu.server.launch import ServerProcess
from xrt.errors import XrtError
from xrt.hw.wire import pb, pb_grpc
from xrt.transport.grpc import GrpcTransport
from xrt.transport.grpc.retry import REASON_RESTARTING, RETRY_REASON_KEY

pytestmark = pytest.mark.sim

ID = 0x4E50_5530  # the ID register at NPU_BASE


def wait_for(cond, what: str, timeout_s: float = 120.0) -> None:
    end = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < end, f"timed out waiting for {what}"
        time.sleep(0.05)


@pytest.fixture(scope="module")
def server():
    with ServerProcess.start(devices=1, watchdog_s=3.0) as srv:
        yield srv


def test_the_call_a_worker_hangs_in_is_not_retried(server):
    """A read (an idempotent method, in the channel's gRPC retry policy) during which the
    worker stops answering fails once with the watchdog's message: the server's
    "do not retry" keeps gRPC from repeating it, and it carries no retry mark."""
    t = GrpcTransport(server.address, device="npu0", local=False, retry_s=120.0)
    try:
        regs = t.reg_region("npu")
        assert regs.read(NPU_BASE) == ID
        before = t.counters().requests
        pid = worker_pid(server, "npu0")
        os.kill(pid, signal.SIGSTOP)  # hung: the watchdog (3 s) kills and restarts it
        try:
            with pytest.raises(XrtError) as info:
                regs.read(NPU_BASE)
        finally:
            with contextlib.suppress(ProcessLookupError):  # killed by the watchdog by now
                os.kill(pid, signal.SIGCONT)
        assert "did not answer" in str(info.value) and "gave up" not in str(info.value)
        assert t.counters().requests == before + 1, "the failed read was sent again"
        assert regs.read(NPU_BASE) == ID  # retried through the restart, then served
        assert worker_pid(server, "npu0") != pid
    finally:
        t.close()


def test_a_call_during_a_worker_restart_succeeds_after_it_or_fails_within_its_budget(server):
    """The worker's working folder is made unusable, so its restarts fail and the device
    stays RESTARTING: a call with a 2 s budget fails with the restart's failure and the
    budget in its message; the server marks the refusal as safe to retry; a call with a
    long budget made meanwhile succeeds once the folder is back and the restart works."""
    t = GrpcTransport(server.address, device="npu0", local=False, retry_s=2.0)
    channel = grpc.insecure_channel(server.address)
    try:
        regs = t.reg_region("npu")
        assert regs.read(NPU_BASE) == ID
        health = health_pb2_grpc.HealthStub(channel)
        name = "npuemu.v1.DeviceService/npu0"

        def faulty() -> bool:
            status = health.Check(health_pb2.HealthCheckRequest(service=name)).status
            return status == health_pb2.HealthCheckResponse.NOT_SERVING

        with worker_starts_fail(server, "npu0") as restore:
            os.kill(worker_pid(server, "npu0"), signal.SIGKILL)
            wait_for(faulty, "the failed restart to show in health")
            with pytest.raises(XrtError) as info:
                regs.read(NPU_BASE)
            message = str(info.value)
            assert "restart(s) failed" in message and "of a 2 s retry budget" in message, message
            # The mark the runtime keys on, and gRPC's own "do not retry".
            stub = pb_grpc.DeviceServiceStub(channel)
            with pytest.raises(grpc.RpcError) as raw:
                stub.ReadRegister(pb.ReadRegisterRequest(lease_id=t.lease_id, address=NPU_BASE))
            trailers = dict(raw.value.trailing_metadata())
            assert raw.value.code() == grpc.StatusCode.UNAVAILABLE
            assert trailers[RETRY_REASON_KEY] == REASON_RESTARTING
            assert trailers["grpc-retry-pushback-ms"] == "-1"

            t.retry_s = 300.0
            got: dict[str, object] = {}

            def read() -> None:
                try:
                    got["value"] = regs.read(NPU_BASE)
                except XrtError as exc:
                    got["error"] = exc

            reader = threading.Thread(target=read)
            reader.start()
            restore()
            reader.join(300)
            assert got == {"value": ID}
    finally:
        t.close()
        channel.close()


def test_a_broken_connection_repeats_idempotent_calls_only(server):
    """The network path fails under a call (a proxy resets the connection that carries the
    request, before the server sees it). gRPC's retry policy in the runtime's channel
    repeats an idempotent call (GetCounters) on a new connection; an OpenDevice, whose
    effect the client cannot know, fails at once and is not repeated (had it been, it
    would have reached the server and leased the device)."""
    channel = grpc.insecure_channel(server.address)  # straight to the server
    stub = pb_grpc.DeviceServiceStub(channel)

    def device_state(name: str) -> int:
        devices = stub.ListDevices(pb.ListDevicesRequest()).devices
        return next(d.state for d in devices if d.name == name)

    with contextlib.closing(channel), BreakingProxy(server.address) as proxy:
        t = GrpcTransport(proxy.address, device="npu0", local=False)
        try:
            before = t.counters().requests
            proxy.break_next_request("GetCounters")
            assert t.counters().requests >= before  # answered on a new connection
            assert proxy.breaks == 1
        finally:
            t.close()  # (the reset also cut the lease's HoldLease stream: it ended then)

        wait_for(lambda: device_state("npu0") == pb.DEVICE_STATE_FREE, "npu0 free again")
        proxy.break_next_request("OpenDevice")
        with pytest.raises(XrtError) as info:
            GrpcTransport(proxy.address, device="npu0", local=False)
        assert proxy.breaks == 2 and "UNAVAILABLE" in str(info.value), str(info.value)
        assert device_state("npu0") == pb.DEVICE_STATE_FREE  # the open never reached it
