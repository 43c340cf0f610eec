"""The device server over its wire contract: a real `npu-emu serve` on a loopback port,
real simulation workers, raw generated stubs.

Covers device listing, health and reflection, register access and batches, host-visible
memory streams, interrupts, leases (exclusive, close, TTL, HoldLease, a client killed),
lease end clearing the device, malformed requests (each with its status, the server keeps
serving), a worker killed or hung (UNAVAILABLE, restart, usable again), and time: an idle
device costs no CPU, a running engine keeps going between requests.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from rpc_client import (
    DMA_BASE,
    NPU_BASE,
    PLDDR_BASE,
    PROTOCOL,
    UDMA_BASE,
    children_of,
    connect,
    dma_ops,
    rd,
    worker_pid,
    wr,
)

from xrt.hw.regs import DMA, NPU
from xrt.hw.wire import MIN_CHUNK, pb

pytestmark = pytest.mark.sim

SCRATCH = NPU_BASE + NPU.register("SCRATCH").offset
DMA_STATUS = DMA_BASE + DMA.register("STATUS").offset


def code_of(call) -> grpc.StatusCode:
    with pytest.raises(grpc.RpcError) as info:
        call()
    return info.value.code(), info.value.details()


def wait_until(cond, timeout_s: float = 60.0, what: str = "condition") -> None:
    end = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# ---------------------------------------------------------------------------- discovery
def test_list_devices_describes_the_target(server, client):
    resp = client.stub.ListDevices(pb.ListDevicesRequest())
    assert resp.protocol_version == PROTOCOL
    assert [d.name for d in resp.devices] == ["npu0", "npu1"]
    d = resp.devices[0]
    assert d.target == "buyi" and d.target_id == 1 and d.dma_bus_bytes == 16
    blocks = {b.name: b.base for b in d.register_blocks}
    assert blocks == {"npu": NPU_BASE, "dma": DMA_BASE, "fault": 0xC000_0000}
    regions = {r.name: r for r in d.regions}
    assert regions["udma"].host_visible and not regions["plddr"].host_visible
    assert regions["plddr"].base == PLDDR_BASE and regions["udma"].size == 64 << 20


def test_health_and_reflection(server):
    channel = grpc.insecure_channel(server.address)
    health = health_pb2_grpc.HealthStub(channel)
    for service in ("", "npuemu.v1.DeviceService"):
        status = health.Check(health_pb2.HealthCheckRequest(service=service)).status
        assert status == health_pb2.HealthCheckResponse.SERVING
    refl = reflection_pb2_grpc.ServerReflectionStub(channel)
    reply = next(
        refl.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")]))
    )
    names = {s.name for s in reply.list_services_response.service}
    assert "npuemu.v1.DeviceService" in names
    channel.close()


# ---------------------------------------------------------------------------- registers
def test_register_round_trip_and_cycles(client):
    client.open()
    magic = client.stub.ReadRegister(
        pb.ReadRegisterRequest(lease_id=client.lease, address=NPU_BASE)
    )
    assert magic.value == 0x4E50_5530 and magic.cycles > 0
    client.write(SCRATCH, 0xDEAD_BEEF)
    assert client.read(SCRATCH) == 0xDEAD_BEEF


def test_bus_errors_are_the_devices_answer(client):
    """A read-only register refuses a write, an unmapped offset a read: SLVERR, reported in
    the response; the call and the device carry on."""
    client.open()
    w = client.stub.WriteRegister(
        pb.WriteRegisterRequest(lease_id=client.lease, address=NPU_BASE, value=1)
    )
    assert w.status == pb.REGISTER_STATUS_SLVERR
    r = client.stub.ReadRegister(
        pb.ReadRegisterRequest(lease_id=client.lease, address=NPU_BASE + 0xFFC)
    )
    assert r.status == pb.REGISTER_STATUS_SLVERR
    r = client.stub.ReadRegister(pb.ReadRegisterRequest(lease_id=client.lease, address=NPU_BASE))
    assert r.status == pb.REGISTER_STATUS_OK and r.value == 0x4E50_5530


def test_batch_runs_in_order_and_stops_at_the_first_failure(client):
    client.open()
    resp = client.batch(
        wr(SCRATCH, 0x1111_0000),
        pb.RegisterOp(masked_write=pb.RegisterMaskedWrite(address=SCRATCH, value=0x22, mask=0xFF)),
        rd(SCRATCH),
        pb.RegisterOp(
            poll=pb.RegisterPoll(address=SCRATCH, mask=0xFF, expected=0x22, max_cycles=100)
        ),
        pb.RegisterOp(
            poll=pb.RegisterPoll(address=SCRATCH, mask=0xFF, expected=0x33, max_cycles=200)
        ),
        wr(SCRATCH, 0),  # never runs: the poll before it fails
    )
    statuses = [r.status for r in resp.results]
    assert statuses == [pb.REGISTER_STATUS_OK] * 4 + [pb.REGISTER_STATUS_POLL_TIMEOUT]
    assert [r.value for r in resp.results[1:4]] == [0x1111_0022] * 3
    assert client.read(SCRATCH) == 0x1111_0022
    resp = client.batch(rd(NPU_BASE + 0xFFC))
    assert [r.status for r in resp.results] == [pb.REGISTER_STATUS_SLVERR]


def test_dma_through_the_server_with_poll_in_the_batch(client):
    """Start a DMA and poll STATUS.BUSY == 0 in one round trip; the data arrives."""
    client.open()
    data = random.Random(1).randbytes(300_001)
    client.write_mem(UDMA_BASE + 5, data)
    resp = client.batch(
        *dma_ops(UDMA_BASE + 5, PLDDR_BASE + 3, len(data)),
        pb.RegisterOp(
            poll=pb.RegisterPoll(address=DMA_STATUS, mask=1, expected=0, max_cycles=1_000_000)
        ),
    )
    assert all(r.status == pb.REGISTER_STATUS_OK for r in resp.results)
    assert (resp.results[-1].value >> 8) & 0xF == 0  # ERR_CODE
    client.batch(*dma_ops(PLDDR_BASE + 3, UDMA_BASE + (8 << 20), len(data)))
    w = client.wait(timeout_ms=10_000)
    assert w.outcome == pb.WAIT_OUTCOME_INTERRUPT and w.cycles > 0
    assert client.read_mem(UDMA_BASE + (8 << 20), len(data)) == data


def test_interrupt_wait_ends_at_its_limits(client):
    client.open()
    w = client.wait(timeout_ms=10_000, max_cycles=5000)
    assert w.outcome == pb.WAIT_OUTCOME_CYCLE_LIMIT and w.waited_cycles >= 5000
    w = client.wait(timeout_ms=300)
    assert w.outcome == pb.WAIT_OUTCOME_DEADLINE
    client.write(NPU_BASE + NPU.register("INT_ENABLE").offset, 1)
    client.write(NPU_BASE + NPU.register("CTRL").offset, 1)  # software interrupt
    assert client.wait(timeout_ms=1000).outcome == pb.WAIT_OUTCOME_INTERRUPT


def test_memory_streams_any_length_and_alignment(client):
    client.open()
    rng = random.Random(7)
    for length, off, chunk in ((1, 0, 0), (17, 3, 0), (3 << 20 | 5, 1001, 0), (70_000, 9, 4096)):
        data = rng.randbytes(length)
        assert client.write_mem(UDMA_BASE + off, data, chunk=(1 << 20)).bytes_written == length
        assert client.read_mem(UDMA_BASE + off, length, chunk=chunk) == data


def test_a_tiny_chunk_size_counts_as_the_minimum(client):
    """1-byte messages would make a 64 MiB read cost the server minutes (a fuzz run stalled
    28 s on one such read); below MIN_CHUNK the server sends MIN_CHUNK-byte messages."""
    client.open()
    data = random.Random(3).randbytes(3 * MIN_CHUNK + 5)
    client.write_mem(UDMA_BASE, data)
    stream = client.stub.ReadMemory(
        pb.ReadMemoryRequest(
            lease_id=client.lease, address=UDMA_BASE, length=len(data), chunk_size=1
        )
    )
    sizes = [len(m.data) for m in stream]
    assert sizes == [MIN_CHUNK, MIN_CHUNK, MIN_CHUNK, 5]


def test_engine_keeps_running_between_requests(client):
    """A DMA started by one call finishes without further calls: time advances while an
    engine is busy."""
    client.open()
    client.batch(*dma_ops(UDMA_BASE, PLDDR_BASE, 4 << 20))  # about 262,000 cycles
    wait_until(lambda: client.read(DMA_STATUS) & 0b11 == 0b10, 30, "DMA done")


def test_idle_device_costs_no_cpu(server, client):
    client.open()
    client.read(SCRATCH)
    pid = worker_pid(server, client.device)
    before = cpu_seconds(pid)
    time.sleep(1.5)
    assert cpu_seconds(pid) - before < 0.1, "an idle worker should sleep"


def test_counters_count_what_was_served(client):
    client.open()
    before = client.stub.GetCounters(pb.GetCountersRequest(device=client.device))
    client.read(SCRATCH)
    client.write_mem(UDMA_BASE, b"x" * 1000)
    client.read_mem(UDMA_BASE, 500)
    after = client.stub.GetCounters(pb.GetCountersRequest(device=client.device))
    assert after.register_ops - before.register_ops == 1
    assert after.memory_bytes_written - before.memory_bytes_written == 1000
    assert after.memory_bytes_read - before.memory_bytes_read == 500
    assert after.requests - before.requests == 3 and after.cycles >= before.cycles


# ---------------------------------------------------------------------------- leases
def test_one_holder_at_a_time_and_release_clears_the_device(server, client):
    client.open(device="npu0", client="alice")
    client.write(SCRATCH, 0x5A5A)
    client.write_mem(UDMA_BASE + 64, b"secret")
    other = connect(server)
    code, details = code_of(lambda: other.open(device="npu0", client="bob"))
    assert code == grpc.StatusCode.FAILED_PRECONDITION and "alice" in details
    other.open(client="bob")  # the first free device
    assert other.device == "npu1"
    third = connect(server)
    code, details = code_of(lambda: third.open(client="carol"))
    assert code == grpc.StatusCode.FAILED_PRECONDITION and "alice" in details and "bob" in details
    old = client.lease
    client.close()
    code, details = code_of(
        lambda: client.stub.ReadRegister(pb.ReadRegisterRequest(lease_id=old, address=SCRATCH))
    )
    assert code == grpc.StatusCode.ABORTED and "closed" in details
    wait_until(
        lambda: (
            third.stub.ListDevices(pb.ListDevicesRequest()).devices[0].state == pb.DEVICE_STATE_FREE
        ),
        what="npu0 free again",
    )
    third.open(device="npu0", client="carol")
    assert third.read(SCRATCH) == 0, "registers are reset between holders"
    assert third.read_mem(UDMA_BASE + 64, 6) == bytes(6), "memory is cleared between holders"
    other.close()
    third.close()


def test_lease_expires_without_keepalive_and_hold_keeps_it(server, client):
    client.open(device="npu0")
    lease = client.lease
    time.sleep(3.0)  # the TTL is 2 s
    code, details = code_of(lambda: client.read(SCRATCH))
    assert code == grpc.StatusCode.ABORTED and "keep-alive" in details
    client.lease = ""
    client.open(device="npu0")
    stream = client.stub.HoldLease(pb.HoldLeaseRequest(lease_id=client.lease))
    beats = []

    def read_beats() -> None:
        try:
            for b in stream:
                beats.append(b.beat)
        except grpc.RpcError as exc:
            assert exc.code() == grpc.StatusCode.CANCELLED

    reader = threading.Thread(target=read_beats, daemon=True)
    reader.start()
    time.sleep(4.5)  # well past the TTL: the open stream keeps the lease
    assert client.read(SCRATCH) == 0
    assert beats and beats[0] == 0
    stream.cancel()  # the client "goes away": the lease ends at once
    wait_until(
        lambda: code_of(lambda: client.read(SCRATCH))[0] == grpc.StatusCode.ABORTED,
        10,
        "lease ended by disconnect",
    )
    client.lease = ""
    assert lease != client.lease


def test_killed_client_loses_its_lease(server):
    """A client process holding a lease (HoldLease) is SIGKILLed: the device frees up."""
    code = f"""
import grpc, sys, time
from xrt.hw.wire import pb, pb_grpc as g
s = g.DeviceServiceStub(grpc.insecure_channel("{server.address}"))
r = s.OpenDevice(pb.OpenDeviceRequest(device="npu1", client="doomed", protocol_version=1))
stream = s.HoldLease(pb.HoldLeaseRequest(lease_id=r.lease_id))
next(stream)
print("held", flush=True)
time.sleep(600)
"""
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "held"
        other = connect(server)
        code_, details = code_of(lambda: other.open(device="npu1", client="next"))
        assert code_ == grpc.StatusCode.FAILED_PRECONDITION and "doomed" in details
        proc.send_signal(signal.SIGKILL)
        proc.wait()

        def admitted() -> bool:
            try:
                other.open(device="npu1", client="next")
                return True
            except grpc.RpcError:
                return False

        wait_until(admitted, 20, "npu1 after its holder was killed")
        other.close()
    finally:
        proc.kill()
        proc.wait()


# ---------------------------------------------------------------------------- bad input
BAD_CALLS = {
    "misaligned register": (grpc.StatusCode.INVALID_ARGUMENT, lambda c: c.read(NPU_BASE + 2)),
    "register outside the blocks": (grpc.StatusCode.OUT_OF_RANGE, lambda c: c.read(0x1234_0000)),
    "memory outside udma": (grpc.StatusCode.OUT_OF_RANGE, lambda c: c.read_mem(PLDDR_BASE, 16)),
    "memory past the end of udma": (
        grpc.StatusCode.OUT_OF_RANGE,
        lambda c: c.read_mem(UDMA_BASE + (64 << 20) - 8, 16),
    ),
    "huge length": (grpc.StatusCode.OUT_OF_RANGE, lambda c: c.read_mem(UDMA_BASE, 1 << 62)),
    "chunk too large": (
        grpc.StatusCode.INVALID_ARGUMENT,
        lambda c: c.read_mem(UDMA_BASE, 16, chunk=(1 << 20) + 1),
    ),
    "message too large": (
        grpc.StatusCode.INVALID_ARGUMENT,
        lambda c: c.write_mem(UDMA_BASE, bytes(2 << 20), chunk=2 << 20),
    ),
    "stream longer than declared": (
        grpc.StatusCode.INVALID_ARGUMENT,
        lambda c: c.write_mem(UDMA_BASE, bytes(100), length=50),
    ),
    "stream longer than declared, in parts": (
        grpc.StatusCode.INVALID_ARGUMENT,
        lambda c: c.write_mem(UDMA_BASE, bytes(100), length=50, chunk=40),
    ),
    "stream shorter than declared": (
        grpc.StatusCode.INVALID_ARGUMENT,
        lambda c: c.write_mem(UDMA_BASE, bytes(10), length=50),
    ),
    "wait too long": (grpc.StatusCode.INVALID_ARGUMENT, lambda c: c.wait(timeout_ms=10**9)),
    "batch too large": (grpc.StatusCode.INVALID_ARGUMENT, lambda c: c.batch(*[rd(SCRATCH)] * 4097)),
    "empty batch op": (grpc.StatusCode.INVALID_ARGUMENT, lambda c: c.batch(pb.RegisterOp())),
    # The wire's register values are uint64 (the manual's uint64_t); the registers are not.
    "register value past 32 bits": (
        grpc.StatusCode.INVALID_ARGUMENT,
        lambda c: c.write(SCRATCH, 0x1_0000_0000),
    ),
    "batch value past 32 bits": (
        grpc.StatusCode.INVALID_ARGUMENT,
        lambda c: c.batch(wr(SCRATCH, 5), wr(SCRATCH, 0x1_0000_00C0)),
    ),
    "masked write mask past 32 bits": (
        grpc.StatusCode.INVALID_ARGUMENT,
        lambda c: c.batch(
            pb.RegisterOp(
                masked_write=pb.RegisterMaskedWrite(address=SCRATCH, value=1, mask=1 << 40)
            )
        ),
    ),
    "poll expected value past 32 bits": (
        grpc.StatusCode.INVALID_ARGUMENT,
        lambda c: c.batch(
            pb.RegisterOp(poll=pb.RegisterPoll(address=SCRATCH, mask=1 << 33, expected=1 << 33))
        ),
    ),
    "no lease": (
        grpc.StatusCode.FAILED_PRECONDITION,
        lambda c: c.stub.ReadRegister(pb.ReadRegisterRequest(address=SCRATCH)),
    ),
    "unknown lease": (
        grpc.StatusCode.FAILED_PRECONDITION,
        lambda c: c.stub.ReadRegister(pb.ReadRegisterRequest(lease_id="feedface", address=SCRATCH)),
    ),
    "unknown device": (
        grpc.StatusCode.NOT_FOUND,
        lambda c: c.stub.OpenDevice(pb.OpenDeviceRequest(device="npu9", protocol_version=PROTOCOL)),
    ),
    "protocol mismatch": (
        grpc.StatusCode.FAILED_PRECONDITION,
        lambda c: c.stub.OpenDevice(pb.OpenDeviceRequest(protocol_version=99)),
    ),
    "bad lease ttl": (
        grpc.StatusCode.INVALID_ARGUMENT,
        lambda c: c.stub.OpenDevice(
            pb.OpenDeviceRequest(protocol_version=PROTOCOL, lease_ttl_ms=5)
        ),
    ),
}


@pytest.mark.parametrize("name", list(BAD_CALLS))
def test_malformed_requests_get_their_status_and_change_nothing(name, client):
    client.open(device="npu0")
    client.write(SCRATCH, 0xC0FFEE)
    client.write_mem(UDMA_BASE, b"\xab" * 64)
    want, call = BAD_CALLS[name]
    code, details = code_of(lambda: call(client))
    assert code == want, f"{name}: {code} {details}"
    assert details, f"{name}: the status needs a message"
    assert client.read(SCRATCH) == 0xC0FFEE
    assert client.read_mem(UDMA_BASE, 64) == b"\xab" * 64, "a refused request wrote memory"
    assert len(client.stub.ListDevices(pb.ListDevicesRequest()).devices) == 2


def test_a_bad_batch_op_runs_nothing(client):
    client.open(device="npu0")
    client.write(SCRATCH, 1)
    code, details = code_of(lambda: client.batch(wr(SCRATCH, 2), wr(NPU_BASE + 3, 0)))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "op 1" in details
    assert client.read(SCRATCH) == 1


# ---------------------------------------------------------------------------- crashes
def test_worker_killed_mid_transfer_fails_fast_and_recovers(server, client):
    client.open(device="npu0")
    # plddr -> plddr, 256 MiB: about 16 million cycles, far longer than this test waits.
    client.batch(*dma_ops(PLDDR_BASE, PLDDR_BASE + (256 << 20), 256 << 20))
    pid = worker_pid(server, "npu0")
    result: dict[str, object] = {}

    def waiter() -> None:
        t0 = time.monotonic()
        try:
            client.wait(timeout_ms=60_000)
            result["outcome"] = "returned"
        except grpc.RpcError as exc:
            result["outcome"] = (exc.code(), exc.details())
        result["seconds"] = time.monotonic() - t0

    t = threading.Thread(target=waiter)
    t.start()
    time.sleep(0.5)
    os.kill(pid, signal.SIGKILL)
    t.join(30)
    assert not t.is_alive(), "the wait must not hang when the worker dies"
    code, details = result["outcome"]
    assert code == grpc.StatusCode.UNAVAILABLE and "died" in details
    assert result["seconds"] < 20

    def usable() -> bool:
        try:
            client.stub.ResetDevice(pb.ResetDeviceRequest(lease_id=client.lease))
            return True
        except grpc.RpcError as exc:
            assert exc.code() == grpc.StatusCode.UNAVAILABLE, exc.details()
            return False

    wait_until(usable, 60, "the restarted worker")
    assert worker_pid(server, "npu0") != pid
    assert client.read(NPU_BASE) == 0x4E50_5530
    counters = client.stub.GetCounters(pb.GetCountersRequest(device="npu0"))
    assert counters.worker_restarts >= 1


def test_hung_worker_is_detected_by_the_watchdog(server, client):
    client.open(device="npu1")
    pid = worker_pid(server, "npu1")
    os.kill(pid, signal.SIGSTOP)  # a wedged simulator: alive, silent
    try:
        t0 = time.monotonic()
        code, details = code_of(lambda: client.read(SCRATCH))
        assert code == grpc.StatusCode.UNAVAILABLE and "did not answer" in details
        assert time.monotonic() - t0 < 20  # the watchdog is 3 s here
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)

    def usable() -> bool:  # each try is a call on the lease: it keeps the lease alive
        try:
            return client.read(NPU_BASE) == 0x4E50_5530
        except grpc.RpcError as exc:
            assert exc.code() == grpc.StatusCode.UNAVAILABLE, exc.details()
            return False

    wait_until(usable, 60, "npu1 usable again, on the same lease")
    assert worker_pid(server, "npu1") != pid


def test_lease_outlives_a_worker_restart_longer_than_its_ttl(server, client):
    """The TTL does not run while the server restarts the holder's worker: a holder that
    waits quietly for the restart (no call, no keep-alive) keeps its lease. The new worker
    is held stopped for twice the TTL so the restart outlasts it every time."""
    client.open(device="npu1", lease_ttl_ms=1000)
    client.write(SCRATCH, 0x1234)
    pid = worker_pid(server, "npu1")
    others = set(children_of(server.proc.pid)) - {pid}
    os.kill(pid, signal.SIGKILL)
    code, _ = code_of(lambda: client.read(SCRATCH))
    assert code == grpc.StatusCode.UNAVAILABLE
    new: list[int] = []
    wait_until(  # (the simulator itself: the server may fork other short-lived children)
        lambda: bool(
            new.extend(set(children_of(server.proc.pid, "npu_sim")) - others - {pid}) or new
        ),
        60,
        "the new worker process",
    )
    os.kill(new[0], signal.SIGSTOP)
    try:
        time.sleep(2.0)  # twice the TTL with no call from the holder
    finally:
        os.kill(new[0], signal.SIGCONT)
    wait_until(lambda: worker_pid(server, "npu1") == new[0], 60, "the new worker ready")
    assert client.read(SCRATCH) == 0, "the new worker starts from reset"
    client.stub.KeepAlive(pb.KeepAliveRequest(lease_id=client.lease))
