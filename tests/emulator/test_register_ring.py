"""The register ring, with a real server and its simulator processes: the same results as
the server's path, revoked at the lease end, nothing without the lease, and no request,
however malformed, that crashes the simulator or reaches past its own lease."""

from __future__ import annotations

import mmap
import os
import random
import re
import signal
import struct
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "rtl"))

from test_regbus import Pool, directed_batches, random_batch

from npuemu.server.launch import ServerProcess
from xrt import Device
from xrt.errors import ErrorCode, XrtError
from xrt.hw.port import RegBatch
from xrt.hw.regops import RegMaskedWrite, RegRead
from xrt.hw.ring import HEADER, OPS_OFFSET, REQUEST_OFFSET, RING_BYTES
from xrt.hw.targets import target
from xrt.hw.wire import RegisterStatus, pb
from xrt.transport.grpc.local_memory import handout
from xrt.transport.grpc.register_ring import RegisterRing, RingError, RingRevokedError

pytestmark = pytest.mark.sim

MAGIC_VALUE = 0x4E50_5530
SCRATCH = target("buyi").npu_base + 0x40
MAGIC = target("buyi").npu_base


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    with ServerProcess.start(target="buyi", devices=1) as srv:
        yield srv


def _socket_of(dev: Device) -> str:
    note = dev.transport.ring_note  # type: ignore[attr-defined]
    match = re.search(r"from (\S+local\.sock)", note)
    assert match, note
    return match.group(1)


def _grpc_batch(dev: Device, rows: list) -> list[tuple[int, int]]:
    """`rows` through the server (RegisterBatch), bypassing the ring."""
    t = dev.transport
    request = pb.RegisterBatchRequest(lease_id=t.lease_id)  # type: ignore[attr-defined]
    for kind, addr, value, mask, expected, max_cycles in rows:
        op = request.ops.add()
        if kind == 0:
            op.read.address = addr
        elif kind == 1:
            op.write.address, op.write.value = addr, value
        elif kind == 2:
            op.masked_write.address, op.masked_write.value, op.masked_write.mask = addr, value, mask
        else:
            op.poll.address, op.poll.mask, op.poll.expected = addr, mask, expected
            op.poll.max_cycles = max_cycles
    resp = t.call("RegisterBatch", request, "batch", timeout=60)  # type: ignore[attr-defined]
    return [(r.status, r.value) for r in resp.results]


def test_random_batches_give_the_same_results_through_the_ring_and_the_server(
    server: ServerProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each batch from reset, through the ring and through RegisterBatch: the same statuses
    and values op by op, and the same register state after. (The RTL register bus master
    both use is compared with cocotbext-axi in tests/rtl/test_regbus.py.)"""
    monkeypatch.setenv("NPU_TARGET", "buyi")
    pool = Pool()
    seed = int(os.environ.get("NPU_TEST_SEED", random.randrange(1 << 30)))
    print(f"NPU_TEST_SEED={seed}")
    rng = random.Random(seed)
    state = [(0, a, 0, 0xFFFF_FFFF, 0, 0) for a in pool.state]
    with Device.open(server.url) as dev:
        ring = dev.transport.ring  # type: ignore[attr-defined]
        assert ring is not None, dev.transport.ring_note  # type: ignore[attr-defined]
        batches = directed_batches(pool) + [
            random_batch(rng, pool, rng.choice([1, 5, 20, 60])) for _ in range(20)
        ]
        refused = 0
        for case, rows in enumerate(batches):
            dev.transport.reset()  # type: ignore[attr-defined]
            try:
                by_ring: object = ring.batch(RegBatch.of_rows(rows), 60).pairs()
            except RingError as exc:
                by_ring = "refused"  # an address outside the register blocks
                assert "not an aligned register" in str(exc), exc
            ring_state = ring.batch(RegBatch.of_rows(state), 60).pairs()
            dev.transport.reset()  # type: ignore[attr-defined]
            try:
                by_server: object = _grpc_batch(dev, rows)
            except XrtError as exc:
                by_server = "refused"
                assert exc.code == ErrorCode.OUT_OF_RANGE, exc
                refused += 1
            server_state = _grpc_batch(dev, state)
            assert by_ring == by_server, f"case {case}: {rows}"
            assert ring_state == server_state, f"case {case}: register state differs"
        assert 0 < refused < len(batches)


def test_the_servers_ring_and_the_workers_loop_give_the_same_results(
    server: ServerProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A holder through gRPC (no ring of its own): its reads, writes and poll-free batches
    go to the simulator through the server's ring, its polls through the worker's Python
    loop. A server that sends everything through the worker (--no-server-ring) gives
    the same statuses, values and register state, batch by batch."""
    monkeypatch.setenv("NPU_TARGET", "buyi")
    pool = Pool()
    seed = int(os.environ.get("NPU_TEST_SEED", random.randrange(1 << 30)))
    print(f"NPU_TEST_SEED={seed}")
    rng = random.Random(seed)
    batches = (
        [[]]
        + directed_batches(pool)
        + [random_batch(rng, pool, rng.choice([1, 5, 20, 60])) for _ in range(20)]
    )
    state = [(0, a, 0, 0xFFFF_FFFF, 0, 0) for a in pool.state]
    with ServerProcess.start(devices=1, extra_args=("--no-server-ring",)) as plain:
        answers = []
        for srv in (server, plain):
            with Device.open(f"{srv.url}?ring=0") as dev:
                assert dev.transport.ring is None  # type: ignore[attr-defined]
                got = []
                for rows in batches:
                    dev.transport.reset()  # type: ignore[attr-defined]
                    try:
                        result: object = _grpc_batch(dev, rows)
                    except XrtError as exc:
                        result = exc.code
                    got.append((result, _grpc_batch(dev, state)))
                    got.append((dev.read_reg(SCRATCH), dev.write_reg(SCRATCH, len(got))))
                answers.append(got)
        assert "no register ring for the server" not in server.log
    assert answers[0] == answers[1]


def test_single_accesses_polls_and_waits_use_the_ring(server: ServerProcess) -> None:
    with Device.open(server.url) as dev:
        assert dev.transport.ring is not None  # type: ignore[attr-defined]
        before = dev.transport.counters().requests  # type: ignore[attr-defined]
        dev.write_reg(SCRATCH, 0xCAFE_F00D)
        assert dev.read_reg(SCRATCH) == 0xCAFE_F00D
        npu = dev.get_reg_region("npu")
        npu.execute([RegMaskedWrite(SCRATCH, 0x1234, 0xFFFF)])
        assert npu.execute([RegRead(SCRATCH)]) == [0xCAFE_1234]
        c0 = dev.cycles
        assert dev.wait_irq(timeout_s=10, max_cycles=500) is False  # nothing raises it
        assert dev.cycles >= c0 + 500
        with pytest.raises(XrtError) as e:
            dev.read_reg(target("buyi").npu_base + 0xFFC)  # no register there
        assert e.value.code == ErrorCode.DEVICE_INTERNAL and "SLVERR" in e.value.message
        after = dev.transport.counters().requests  # type: ignore[attr-defined]
        assert after == before  # nothing went through the server


def test_the_ring_is_revoked_at_the_lease_end_and_the_next_holder_gets_another(
    server: ServerProcess,
) -> None:
    """A former holder that kept its ring (descriptors, mapping) learns at once that it is
    revoked, and nothing it writes there reaches the next holder's device."""
    with Device.open(server.url) as first:
        sock, lease = _socket_of(first), first.transport.lease_id  # type: ignore[attr-defined]
        kept = RegisterRing.receive(sock, lease)  # the same ring, held by "another" client
        for _ in range(20):
            assert kept.batch(RegBatch.read(MAGIC), 30).pairs() == [
                (RegisterStatus.OK, MAGIC_VALUE)
            ]
        first_gen = HEADER.format.unpack_from(kept._map, 0)[4]
    with pytest.raises(RingRevokedError):
        kept.batch(RegBatch.write(SCRATCH, 0x5EC2E7), 30)
    with Device.open(server.url) as second:
        second_ring = second.transport.ring  # type: ignore[attr-defined]
        assert second_ring is not None
        assert HEADER.format.unpack_from(second_ring._map, 0)[4] != first_gen
        # A new ring counts its requests from 1 again: each one is served (the 20th too).
        for _ in range(30):
            assert second_ring.batch(RegBatch.read(MAGIC), 30).pairs()[0][1] == MAGIC_VALUE
        # The old ring, written and kicked by hand: nobody serves it any more.
        raw = kept._map
        raw[OPS_OFFSET : OPS_OFFSET + 32] = struct.pack("<6IQ", 1, SCRATCH, 0xBAD, 0, 0, 0, 0)
        struct.pack_into("<IIQQQ", raw, REQUEST_OFFSET, 1, 1, 0, 0, 0)
        kept._core._req_seq.value += 1
        os.eventfd_write(kept._kick, 1)
        assert second.read_reg(SCRATCH) == 0  # reset value: the old ring wrote nothing
    kept.close()


def test_no_ring_without_the_lease(server: ServerProcess) -> None:
    with Device.open(server.url) as dev:
        sock, lease = _socket_of(dev), dev.transport.lease_id  # type: ignore[attr-defined]
        for guess in ("", "0" * 24, lease[:-1] + ("0" if lease[-1] != "0" else "1")):
            with pytest.raises(ValueError, match="refused"):
                RegisterRing.receive(sock, guess)
    with pytest.raises(ValueError, match="refused"):
        RegisterRing.receive(sock, lease)  # the lease has ended


def test_a_worker_restart_drops_the_ring_and_the_lease_goes_on(server: ServerProcess) -> None:
    with Device.open(server.url) as dev:
        assert dev.transport.ring is not None  # type: ignore[attr-defined]
        pid = int(re.findall(r"worker npu0 ready \(pid (\d+)\)", server.log)[-1])
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 120
        while True:  # the ring is revoked: the read goes to the server, which retries
            try:
                value = dev.read_reg(SCRATCH)
                break
            except XrtError:
                assert time.monotonic() < deadline, "the device never came back"
                time.sleep(0.2)
        assert value == 0
        assert dev.transport.ring is None  # type: ignore[attr-defined]
        assert "dropped" in dev.transport.ring_note  # type: ignore[attr-defined]


def test_garbage_in_the_ring_never_crashes_the_simulator(server: ServerProcess) -> None:
    """A holder writes random bytes into its ring's request and operations (and its
    header's sequence numbers), kicks, and waits: every request is answered (refused or
    run within its own device), the simulator's process stays the same, and the device
    then serves well-formed requests through the ring and the server alike."""
    rng = random.Random(7)
    log_start = len(server.log)  # an earlier test restarts the worker on purpose
    with Device.open(server.url) as dev:
        pid = re.findall(r"worker npu0 ready \(pid (\d+)\)", server.log)[-1]
        ring = dev.transport.ring  # type: ignore[attr-defined]
        raw = ring._map
        refused = ran = 0
        for i in range(300):
            kind = rng.choice([0, 1, 2, 3, 0xFFFF_FFFF, rng.getrandbits(32)])
            n_ops = rng.choice([0, 1, 5, 4096, 4097, 0xFFFF_FFFF, rng.getrandbits(32)])
            max_cycles = rng.choice([0, 1, 1 << 40, (1 << 40) + 1, rng.getrandbits(64)])
            wall_ms = rng.choice([0, 1, 50, 600_001, rng.getrandbits(64)])  # waits stay short
            struct.pack_into("<IIQQQ", raw, REQUEST_OFFSET, kind, n_ops, max_cycles, wall_ms, 0)
            ops = bytearray(rng.getrandbits(8) for _ in range(32 * 8))
            for j in range(8):  # mostly real kinds and registers, short polls: some batches run
                if rng.random() < 0.8:
                    struct.pack_into("<I", ops, 32 * j, rng.choice([0, 1, 2, 3]))
                    struct.pack_into(
                        "<I", ops, 32 * j + 4, rng.choice([SCRATCH, MAGIC, 0x80000040])
                    )
                    struct.pack_into("<Q", ops, 32 * j + 24, rng.choice([1, 5, 1 << 41]))
            raw[OPS_OFFSET : OPS_OFFSET + len(ops)] = ops
            try:
                seq = ring._core._next()  # the request written by hand, numbered and kicked
                ring._exchange(seq, 30, 0)
                ring._core._response()  # raises the simulator's refusal
                ran += 1
            except RingError as exc:
                assert "refused the request" in str(exc) and "BAD_REQUEST" in str(exc), exc
                refused += 1
            if i % 50 == 0:  # sequence numbers the client jumps around
                ring._core._req_seq.value = rng.getrandbits(63)
                ring._core._resp_seq.value = ring._core._req_seq.value
        assert refused and ran, (refused, ran)
        assert dev.read_reg(MAGIC) == 0x4E50_5530
        dev.transport.drop_ring("the test goes through the server")  # type: ignore[attr-defined]
        assert dev.read_reg(MAGIC) == 0x4E50_5530
    assert re.findall(r"worker npu0 ready \(pid (\d+)\)", server.log)[-1] == pid
    assert "restarted" not in server.log[log_start:]


def test_the_ring_file_cannot_be_resized_under_the_simulator(server: ServerProcess) -> None:
    """The ring is a sealed memfd: its holder cannot shrink it (which would make the
    simulator's next access fault)."""
    with Device.open(server.url) as dev:
        request = f"{dev.transport.lease_id} ring"  # type: ignore[attr-defined]
        _, (mem, kick, done) = handout(_socket_of(dev), request, 3)
        try:
            with pytest.raises(PermissionError):
                os.ftruncate(mem, 0)
            with pytest.raises(PermissionError):
                os.ftruncate(mem, RING_BYTES * 2)
            mm = mmap.mmap(mem, RING_BYTES)
            mm.close()
        finally:
            for fd in (mem, kick, done):
                os.close(fd)
        assert dev.read_reg(MAGIC) == 0x4E50_5530
