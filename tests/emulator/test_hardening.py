"""Regression tests of the server's hardening (issue 8): no data crosses leases, no device is
lost, a cancelled call costs nothing, workers die with their server. Real `npu-emu serve`
processes, real workers, raw stubs; each test names the defect it guards against."""

from __future__ import annotations

import contextlib
import json
import mmap
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from rpc_client import (
    DMA_BASE,
    NPU_BASE,
    PLDDR_BASE,
    UDMA_BASE,
    Client,
    children_of,
    connect,
    dma_ops,
    rd,
    worker_pid,
    worker_starts_fail,
    wr,
)

from npuemu.process_guard import unprivileged_command
from npuemu.server.launch import ServerProcess
from npuemu.server.service import boot_id
from xrt.hw.regs import DMA, NPU
from xrt.hw.wire import pb
from xrt.transport.grpc.local_memory import receive_memory_file

pytestmark = pytest.mark.sim

SCRATCH = NPU_BASE + NPU.register("SCRATCH").offset
DMA_STATUS = DMA_BASE + DMA.register("STATUS").offset
SECRET = bytes(range(1, 256)) * 16  # no zero byte: any leak shows


def wait_until(cond, timeout_s: float = 60.0, what: str = "condition") -> None:
    end = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def rpc_code(call) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.RpcError) as info:
        call()
    return info.value.code(), info.value.details()


def state_of(c: Client, device: str) -> int:
    devices = c.stub.ListDevices(pb.ListDevicesRequest()).devices
    return next(d.state for d in devices if d.name == device)


def open_when_free(c: Client, device: str, timeout_s: float = 60.0) -> float:
    """Open `device` as soon as the server lets us; return the seconds it took."""
    t0 = time.monotonic()

    def opened() -> bool:
        try:
            c.open(device=device, client="next")
            return True
        except grpc.RpcError as exc:
            assert exc.code() in (
                grpc.StatusCode.FAILED_PRECONDITION,
                grpc.StatusCode.UNAVAILABLE,
            ), exc.details()
            return False

    wait_until(opened, timeout_s, f"{device} leasable again")
    return time.monotonic() - t0


def dma_and_wait(c: Client, src: int, dst: int, n: int) -> None:
    resp = c.batch(
        *dma_ops(src, dst, n),
        pb.RegisterOp(
            poll=pb.RegisterPoll(address=DMA_STATUS, mask=1, expected=0, max_cycles=10_000_000)
        ),
    )
    assert all(r.status == pb.REGISTER_STATUS_OK for r in resp.results)


def plddr_is_zero(c: Client, offset: int, n: int) -> bool:
    """DMA plddr[offset, offset+n) to the start of udma and read it back."""
    assert c.read_mem(UDMA_BASE, n) == bytes(n)  # udma must already be clear
    dma_and_wait(c, PLDDR_BASE + offset, UDMA_BASE, n)
    return c.read_mem(UDMA_BASE, n) == bytes(n)


@pytest.fixture(scope="module")
def server():
    with ServerProcess.start(devices=2, lease_ttl_s=5.0, watchdog_s=5.0) as srv:
        yield srv


@pytest.fixture
def clients(server):
    made: list[Client] = []

    def make() -> Client:
        c = connect(server)
        made.append(c)
        return c

    yield make
    for c in made:
        with contextlib.suppress(grpc.RpcError):
            c.close()
        c.channel.close()


# ---------------------------------------------------------------------------- data
def test_lease_ended_during_a_worker_restart_still_clears_memory(server, clients):
    """Defect: end() cleared only a LEASED device; one closed while RESTARTING went FREE
    with the previous holder's udma and plddr."""
    a, b = clients(), clients()
    a.open(device="npu0", client="a")
    a.write_mem(UDMA_BASE, SECRET)
    dma_and_wait(a, UDMA_BASE, PLDDR_BASE + 4096, len(SECRET))
    pid = worker_pid(server, "npu0")
    os.kill(pid, signal.SIGKILL)
    code, _ = rpc_code(lambda: a.read(SCRATCH))
    assert code == grpc.StatusCode.UNAVAILABLE
    a.close()  # while the worker restarts
    open_when_free(b, "npu0")
    assert b.read_mem(UDMA_BASE, len(SECRET)) == bytes(len(SECRET))
    assert plddr_is_zero(b, 4096, len(SECRET))


def test_memory_streams_die_with_their_lease(server, clients):
    """Defect: WriteMemory checked the lease on its first message only and ReadMemory once:
    a former holder's open streams wrote into and read from the next holder's memory."""
    a, b = clients(), clients()
    a.open(device="npu1", client="a")
    go = threading.Event()
    outcome: dict[str, object] = {}

    def slow_writer():
        yield pb.WriteMemoryRequest(lease_id=a.lease, address=UDMA_BASE, length=2 << 20)
        yield pb.WriteMemoryRequest(data=b"\xee" * (1 << 20))
        go.wait(30)
        yield pb.WriteMemoryRequest(data=b"\xee" * (1 << 20))

    def write() -> None:
        try:
            outcome["write"] = a.stub.WriteMemory(slow_writer())
        except grpc.RpcError as exc:
            outcome["write"] = exc.code()

    writer = threading.Thread(target=write)
    writer.start()
    reader = a.stub.ReadMemory(
        pb.ReadMemoryRequest(lease_id=a.lease, address=UDMA_BASE, length=4 << 20, chunk_size=4096)
    )
    first = next(reader)
    assert first.data == bytes(4096)
    a.close()
    b.open(device="npu1", client="b")
    b.write_mem(UDMA_BASE, SECRET * 256)  # 1 MiB of the new holder's data
    go.set()
    writer.join(30)
    assert outcome["write"] == grpc.StatusCode.ABORTED
    got = bytearray()
    with pytest.raises(grpc.RpcError) as info:
        for msg in reader:
            got += msg.data
    assert info.value.code() == grpc.StatusCode.ABORTED
    assert not any(got), "the old lease's read stream returned the new holder's bytes"
    assert b.read_mem(UDMA_BASE, len(SECRET) * 256) == SECRET * 256


KILLED_CLIENT = """
import sys, grpc
sys.path.insert(0, {tests!r})
from rpc_client import dma_ops, UDMA_BASE, PLDDR_BASE
from xrt.hw.wire import pb, pb_grpc as g
s = g.DeviceServiceStub(grpc.insecure_channel({address!r}))
r = s.OpenDevice(pb.OpenDeviceRequest(device="npu0", client="doomed", protocol_version=1))
hold = s.HoldLease(pb.HoldLeaseRequest(lease_id=r.lease_id))
next(hold)
n = {n}
data = bytes((i * 7 + 1) % 255 + 1 for i in range(65536)) * (n // 65536)
def gen():
    yield pb.WriteMemoryRequest(lease_id=r.lease_id, address=UDMA_BASE, length=n)
    for i in range(0, n, 1 << 20):
        yield pb.WriteMemoryRequest(data=data[i : i + (1 << 20)])
s.WriteMemory(gen())
s.RegisterBatch(pb.RegisterBatchRequest(lease_id=r.lease_id, ops=dma_ops(UDMA_BASE, PLDDR_BASE, n)))
print("started", flush=True)
sys.stdin.read()
"""


def test_client_killed_mid_dma_leaves_nothing_in_plddr(server, clients):
    """Defect: memory was zeroed before the engines stopped, so beats in flight landed after
    the zeroing: 1-2 pages of a killed client's data stayed in plddr (16 times in 20).
    Every trial checks ALL of the plddr region the transfer touched, and udma."""
    n = 4 << 20  # about 262,000 cycles: in flight when the client dies
    tests = os.path.dirname(__file__)
    script = KILLED_CLIENT.format(tests=tests, address=server.address, n=n)
    for trial in range(3):
        proc = subprocess.Popen(
            [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        try:
            assert proc.stdout.readline().strip() == "started", f"trial {trial}"
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            b = clients()
            open_when_free(b, "npu0")
            assert b.read_mem(UDMA_BASE, n) == bytes(n), f"trial {trial}: udma not clear"
            assert plddr_is_zero(b, 0, n), f"trial {trial}: plddr kept the killed client's data"
            b.close()
        finally:
            proc.kill()
            proc.wait()


def test_a_former_holders_fast_path_mapping_never_sees_the_next_holder(server, clients):
    """Defect: the local fast path kept its mapping after the lease ended; a former holder
    kept reading and writing the next holder's memory."""
    a, b = clients(), clients()
    host = pb.LocalHost(hostname=socket.gethostname(), boot_id=boot_id())
    resp = a.open(device="npu1", client="a", local_host=host)
    (mapping,) = [m for m in resp.local_mappings if m.region == "udma"]
    sock = Path(mapping.socket)
    assert sock.stat().st_mode & 0o077 == 0 and sock.parent.stat().st_mode & 0o077 == 0
    fd = receive_memory_file(mapping.socket, a.lease, mapping.size)
    with mmap.mmap(fd, mapping.size) as old_map:
        os.close(fd)
        a.write_mem(UDMA_BASE, b"mine")
        assert old_map[:4] == b"mine"  # the fast path works while the lease lives
        former_lease = a.lease
        a.close()
        with pytest.raises(ValueError, match="lease has ended"):
            receive_memory_file(mapping.socket, former_lease, mapping.size)
        b.open(device="npu1", client="b", local_host=host)
        b.write_mem(UDMA_BASE, SECRET)
        # The old mapping shows what its own holder wrote and nothing of the next holder.
        assert old_map[: len(SECRET)] == b"mine" + bytes(len(SECRET) - 4), "saw the new holder"
        old_map[: len(SECRET)] = b"\xee" * len(SECRET)  # and writing through it changes nothing
        assert b.read_mem(UDMA_BASE, len(SECRET)) == SECRET
        # The device itself (DMA) sees the new holder's file, not the old one.
        dma_and_wait(b, UDMA_BASE, PLDDR_BASE, len(SECRET))
        dma_and_wait(b, PLDDR_BASE, UDMA_BASE + 65536, len(SECRET))
        assert b.read_mem(UDMA_BASE + 65536, len(SECRET)) == SECRET
        # The new holder's own file is the device's memory.
        fd = receive_memory_file(mapping.socket, b.lease, mapping.size)
        with mmap.mmap(fd, mapping.size) as new_map:
            os.close(fd)
            assert new_map[: len(SECRET)] == SECRET


def probe_proc_without_privileges(pids: list[int]) -> dict[str, dict]:
    """What an unprivileged process of this user gets when it opens the /proc doors of
    `pids` (each descriptor, the memory): `proc_probe.py`'s answer."""
    out = subprocess.run(
        unprivileged_command(
            [sys.executable, str(Path(__file__).with_name("proc_probe.py")), *map(str, pids)]
        ),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return json.loads(out.stdout)


def test_a_same_user_process_without_the_lease_cannot_reach_the_memory():
    """Defect: a process of the same Unix user with no lease and no token could open the
    memory files (they had paths under /dev/shm). The server runs without privileges here,
    as a normal user's does (as root, privileges alone would keep the probe out)."""
    with ServerProcess.start(devices=1, unprivileged=True) as server:
        a = connect(server)
        try:
            _check_the_memory_is_out_of_reach(server, a)
        finally:
            with contextlib.suppress(grpc.RpcError):
                a.close()
            a.channel.close()


def _check_the_memory_is_out_of_reach(server: ServerProcess, a: Client) -> None:
    host = pb.LocalHost(hostname=socket.gethostname(), boot_id=boot_id())
    (mapping,) = a.open(device="npu0", client="a", local_host=host).local_mappings
    a.write_mem(UDMA_BASE, SECRET)
    # No memory file has a name: the server's folder holds its socket only.
    assert sorted(p.name for p in Path(mapping.socket).parent.iterdir()) == ["local.sock"]
    # Without the lease id the socket hands nothing out.
    for guess in ("", "0" * 24, a.lease[:-1] + ("0" if a.lease[-1] != "0" else "1")):
        with pytest.raises(ValueError, match="refused"):
            receive_memory_file(mapping.socket, guess, mapping.size)
    # The server and the worker are non-dumpable: an unprivileged process of their user
    # cannot open their descriptors or memory through /proc ...
    pids = [server.proc.pid, worker_pid(server, "npu0")]
    for pid, got in probe_proc_without_privileges(pids).items():
        assert len(got["fds"]) > 3, f"{pid}: its descriptors are not listed"
        assert set(got["fds"].values()) == {"PermissionError"}, f"{pid}: {got['fds']}"
        assert got["mem"] == "PermissionError", f"{pid}: {got}"
    # ... while the same probe opens those of an ordinary process of the same user.
    with subprocess.Popen(
        unprivileged_command(
            [sys.executable, "-c", "import sys; print('up', flush=True); sys.stdin.read()"]
        ),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as plain:
        # Probe the program, not its launcher (which still holds capabilities until exec).
        assert plain.stdout.readline() == "up\n"
        got = probe_proc_without_privileges([plain.pid])[str(plain.pid)]
        plain.stdin.close()
    assert got["mem"] == "opened" and "opened" in got["fds"].values(), got
    # The holder itself still gets its memory.
    fd = receive_memory_file(mapping.socket, a.lease, mapping.size)
    with mmap.mmap(fd, mapping.size) as m:
        os.close(fd)
        assert m[: len(SECRET)] == SECRET


# ---------------------------------------------------------------------------- devices
def test_close_cancelled_half_way_still_frees_the_device(server, clients):
    """Defect: a CloseDevice whose caller went away during the reset left the device
    RESETTING for ever (every later open: UNAVAILABLE)."""
    a, b = clients(), clients()
    a.open(device="npu1", client="a")
    a.write(SCRATCH, 0xABCD)
    waited: dict[str, object] = {}

    def long_wait() -> None:  # keeps the worker busy: the reset must stop it
        try:
            waited["r"] = a.wait(timeout_ms=20_000)
        except grpc.RpcError as exc:
            waited["r"] = exc.code()

    t = threading.Thread(target=long_wait)
    t.start()
    time.sleep(0.3)  # the wait reaches the worker (if not, it is refused: ABORTED all the same)
    try:  # the caller gives up after 2 s: the old code was still waiting behind the wait
        a.stub.CloseDevice(pb.CloseDeviceRequest(lease_id=a.lease), timeout=2.0)
    except grpc.RpcError as exc:
        assert exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED, exc.details()
    a.lease = ""
    open_when_free(b, "npu1", 30)
    assert b.read(SCRATCH) == 0
    t.join(30)
    assert waited["r"] == grpc.StatusCode.ABORTED, "the wait of the ended lease is stopped"


def test_a_cancelled_call_costs_neither_the_worker_nor_the_registers(server, clients):
    """Defect: the answer to a cancelled request stayed in the IPC socket, the next request
    read it, failed the id check and the worker was killed (registers, DMA lost)."""
    a = clients()
    a.open(device="npu0", client="a")
    a.write(SCRATCH, 0x5EED)
    pid = worker_pid(server, "npu0")
    restarts = a.stub.GetCounters(pb.GetCountersRequest(device="npu0")).worker_restarts
    endless_poll = pb.RegisterOp(
        poll=pb.RegisterPoll(address=SCRATCH, mask=1, expected=0, max_cycles=1 << 40)
    )
    for _ in range(3):
        try:  # the server clips the wait to the deadline: it may end just before it
            a.stub.WaitInterrupt(
                pb.WaitInterruptRequest(lease_id=a.lease, timeout_ms=20_000), timeout=0.2
            )
        except grpc.RpcError as exc:
            assert exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED, exc.details()
        assert a.read(SCRATCH) == 0x5EED
        code, _ = rpc_code(
            lambda: a.stub.RegisterBatch(
                pb.RegisterBatchRequest(lease_id=a.lease, ops=[endless_poll]), timeout=0.2
            )
        )
        assert code == grpc.StatusCode.DEADLINE_EXCEEDED
        assert a.read(SCRATCH) == 0x5EED
    assert worker_pid(server, "npu0") == pid
    after = a.stub.GetCounters(pb.GetCountersRequest(device="npu0")).worker_restarts
    assert after == restarts
    assert a.batch(rd(SCRATCH), wr(SCRATCH, 1)).results[0].value == 0x5EED


def test_workers_die_with_a_killed_server():
    """Defect: after the server was SIGKILLed, a busy worker ran on at 100% CPU until its
    request ended (minutes for a wait, days for a long poll)."""
    srv = ServerProcess.start(devices=2)
    workers: list[int] = []
    try:
        workers += children_of(srv.proc.pid, "npu_sim")
        assert len(workers) == 2
        c = connect(srv)
        c.open(device="npu0")
        c.batch(*dma_ops(PLDDR_BASE, PLDDR_BASE + (256 << 20), 256 << 20))  # long, busy
        polling = threading.Thread(
            target=lambda: rpc_code(
                lambda: c.batch(
                    pb.RegisterOp(
                        poll=pb.RegisterPoll(
                            address=SCRATCH, mask=1, expected=1, max_cycles=1 << 40
                        )
                    )
                )
            ),
            daemon=True,
        )
        polling.start()
        time.sleep(0.5)  # the poll is running in the worker
        srv.proc.send_signal(signal.SIGKILL)
        srv.proc.wait()

        def all_gone() -> bool:
            return not any(os.path.exists(f"/proc/{p}") and _alive(p) for p in workers)

        wait_until(all_gone, 30, "the workers of the killed server to exit")
        c.channel.close()
    finally:
        srv.stop()
        for p in workers:
            if _alive(p):
                os.kill(p, signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_restarts_keep_trying_and_report_a_persistent_failure():
    """Defect: a restart caught one exception type and gave up after 5 attempts, leaving the
    device RESTARTING for good with nothing said. Here the worker's working folder is made
    unusable (restarts fail), then restored: the failure shows in health and in the error,
    and the restart that finally works brings the device back."""
    srv = ServerProcess.start(devices=1)
    try:
        channel = grpc.insecure_channel(srv.address)
        health = health_pb2_grpc.HealthStub(channel)
        name = "npuemu.v1.DeviceService/npu0"

        def status() -> int:
            return health.Check(health_pb2.HealthCheckRequest(service=name)).status

        assert status() == health_pb2.HealthCheckResponse.SERVING
        c = connect(srv)
        with worker_starts_fail(srv, "npu0"):
            os.kill(worker_pid(srv, "npu0"), signal.SIGKILL)
            wait_until(lambda: status() == health_pb2.HealthCheckResponse.NOT_SERVING, 60, "fault")
            code, details = rpc_code(lambda: c.open(device="npu0"))
            assert code == grpc.StatusCode.UNAVAILABLE and "restart(s) failed" in details
        wait_until(lambda: status() == health_pb2.HealthCheckResponse.SERVING, 60, "recovery")
        open_when_free(c, "npu0")
        assert c.read(NPU_BASE) == 0x4E50_5530
        c.close()
        channel.close()
    finally:
        srv.stop()


def test_on_chip_memory_is_cleared_between_holders():
    """The ZG330's OCM is an SRAM inside the model (no file): it is wiped (a DMA of zeros)
    at every lease end, so nothing of one holder's on-chip data reaches the next."""
    with ServerProcess.start(target="zg330", devices=1) as srv:
        a, b = connect(srv), connect(srv)
        ocm = next(
            r
            for r in a.stub.ListDevices(pb.ListDevicesRequest()).devices[0].regions
            if r.name == "ocm"
        )
        a.open(device="npu0")
        a.write_mem(UDMA_BASE, SECRET)
        dma_and_wait(a, UDMA_BASE, ocm.base + ocm.size - len(SECRET), len(SECRET))
        dma_and_wait(a, UDMA_BASE, ocm.base, len(SECRET))
        a.close()
        open_when_free(b, "npu0")
        dma_and_wait(b, ocm.base, UDMA_BASE, ocm.size)
        assert b.read_mem(UDMA_BASE, ocm.size) == bytes(ocm.size)
        b.close()
        a.channel.close()
        b.channel.close()
