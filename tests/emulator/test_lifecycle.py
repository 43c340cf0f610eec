"""Server life cycle: token authentication, and a clean shutdown on SIGTERM that finishes
or cleanly fails calls in flight and leaves no process or shared-memory file behind."""

from __future__ import annotations

import os
import re
import signal
import threading
import time
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from rpc_client import NPU_BASE, connect

from npuemu.server.launch import ServerProcess
from xrt._proto.npuemu.v1 import device_pb2 as pb

pytestmark = pytest.mark.sim


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return (
        Path(f"/proc/{pid}").exists()
        and "Z" not in Path(f"/proc/{pid}/stat").read_text().split()[2]
    )


def test_token_is_required_when_set():
    with ServerProcess.start(token="s3cret") as srv:
        for token, ok in ((None, False), ("wrong", False), ("s3cret", True)):
            c = connect(srv, token)
            if ok:
                assert c.stub.ListDevices(pb.ListDevicesRequest(), metadata=c.metadata).devices
                c.open()
                assert c.read(NPU_BASE) == 0x4E50_5530
                c.close()
            else:
                calls = (
                    lambda c=c: c.stub.ListDevices(pb.ListDevicesRequest(), metadata=c.metadata),
                    lambda c=c: c.open(),
                    lambda c=c: list(
                        c.stub.ReadMemory(pb.ReadMemoryRequest(), metadata=c.metadata)
                    ),
                )
                for call in calls:
                    with pytest.raises(grpc.RpcError) as info:
                        call()
                    assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
                    assert "token" in info.value.details()
            c.channel.close()
        # Health stays open for load balancers.
        channel = grpc.insecure_channel(srv.address)
        status = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest()).status
        assert status == health_pb2.HealthCheckResponse.SERVING
        channel.close()


def test_sigterm_shuts_down_cleanly():
    srv = ServerProcess.start(devices=2)
    try:
        server_pid = srv.proc.pid
        folders = list(Path("/dev/shm").glob(f"npu-emu-{server_pid}-*"))
        assert len(folders) == 1 and len(list(folders[0].glob("*.bin"))) == 4
        workers = [int(p) for p in re.findall(r"ready \(pid (\d+)\)", srv.log)]
        assert len(workers) == 2 and all(alive(p) for p in workers)

        c = connect(srv)
        c.open()
        outcome: dict[str, object] = {}

        def in_flight() -> None:
            try:
                outcome["resp"] = c.wait(timeout_ms=2000).outcome
            except grpc.RpcError as exc:
                outcome["resp"] = exc.code()

        t = threading.Thread(target=in_flight)
        t.start()
        time.sleep(0.3)
        t0 = time.monotonic()
        srv.proc.send_signal(signal.SIGTERM)
        assert srv.proc.wait(30) == 0
        assert time.monotonic() - t0 < 20
        t.join(10)
        assert not t.is_alive()
        assert outcome["resp"] in (
            pb.WAIT_OUTCOME_DEADLINE,
            grpc.StatusCode.UNAVAILABLE,
            grpc.StatusCode.CANCELLED,
        )
        assert not folders[0].exists(), "shared-memory files must be removed"
        time.sleep(0.5)
        assert not any(alive(p) for p in workers), "workers must be stopped"
        assert "stopped" in srv.log
    finally:
        srv.stop()
