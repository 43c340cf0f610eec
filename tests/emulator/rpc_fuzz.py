"""A structure-aware fuzzer of every DeviceService RPC (shared by tests/emulator/test_fuzz.py
and bench/bench_hardening.py --fuzz).

Client A holds npu0 and is the fuzzer; client B holds npu1 with known registers and memory.
Most requests are well-formed protobuf with field values drawn from edge cases (register and
memory boundaries, misalignment, huge lengths, garbage and ended lease ids, empty and
oversized stream messages); some are raw bytes that are no message at all, sent to a random
method, and some are garbage on a plain TCP connection. Tallied: statuses, requests accepted
on A's valid lease, crashes (INTERNAL/UNKNOWN or the server gone), hangs (no answer within
the deadline), whether anything of B's device changed, and, when `run` is given a probe
interval, outages: times the fuzzed device could not be opened and read by a fresh client
within `PROBE_S` once A had closed its lease.
"""

from __future__ import annotations

import contextlib
import random
import socket
import threading
import time
from collections import Counter, deque
from dataclasses import dataclass, field

import grpc
from rpc_client import DMA_BASE, NPU_BASE, PLDDR_BASE, PROTOCOL, UDMA_BASE, Client

from xrt.hw.regs import NPU
from xrt.hw.wire import pb

SERVICE = pb.DESCRIPTOR.services_by_name["DeviceService"]

UDMA_SIZE = 64 << 20
CALL_DEADLINE_S = 30.0
PROBE_S = 30.0  # a free device must be opened and read within this
SLOW_S = 5.0  # a request slower than this is listed in the report
B_SCRATCH = 0x600DF00D
B_PATTERN = bytes(range(256)) * 16
SCRATCH = NPU_BASE + NPU.register("SCRATCH").offset


@dataclass
class FuzzReport:
    requests: int = 0
    accepted_valid_lease: int = 0
    crashes: list[str] = field(default_factory=list)
    hangs: list[str] = field(default_factory=list)
    statuses: Counter = field(default_factory=Counter)
    other_device_changed: bool = False
    probes: int = 0
    outages: list[str] = field(default_factory=list)
    slow: list[str] = field(default_factory=list)  # requests that took over SLOW_S


class RpcFuzzer:
    def __init__(self, a: Client, b: Client, seed: int, probe: Client | None = None) -> None:
        self.a, self.b, self.rng = a, b, random.Random(seed)
        self.probe_client = probe
        self.ended: list[str] = []
        self._keeper: _KeepAlive | None = None
        self._recent: deque[str] = deque(maxlen=12)  # the last requests, for a failure's story

    # ---------------------------------------------------------------- values
    def address(self) -> int:
        r = self.rng
        base = r.choice([NPU_BASE, DMA_BASE, UDMA_BASE, PLDDR_BASE, 0, UDMA_BASE + UDMA_SIZE])
        return max(
            0,
            min(
                (1 << 64) - 1,
                base + r.choice([0, 4, r.randrange(-64, 4096), r.randrange(1 << 20), -4]),
            ),
        )

    def length(self) -> int:
        return self.rng.choice([0, 1, 3, 4096, 65536, UDMA_SIZE, 1 << 62, (1 << 64) - 1])

    def lease(self) -> str:
        r = self.rng.random()
        if r < 0.7:
            return self.a.lease
        if r < 0.8 and self.ended:
            return self.rng.choice(self.ended)
        return self.rng.choice(["", "feedface", "x" * 300, "\x00\xff", self.a.lease[:-1]])

    def op(self) -> pb.RegisterOp:
        r, addr = self.rng, self.address()
        kind = r.choice(["read", "write", "masked_write", "poll", "empty"])
        value = r.getrandbits(32)
        if kind == "read":
            return pb.RegisterOp(read=pb.RegisterRead(address=addr))
        if kind == "write":
            return pb.RegisterOp(write=pb.RegisterWrite(address=addr, value=value))
        if kind == "masked_write":
            return pb.RegisterOp(
                masked_write=pb.RegisterMaskedWrite(address=addr, value=value, mask=value)
            )
        if kind == "poll":
            return pb.RegisterOp(
                poll=pb.RegisterPoll(
                    address=addr,
                    mask=r.getrandbits(32),
                    expected=r.getrandbits(32),
                    max_cycles=r.choice([1, 100, 5000, 1 << 41]),
                )
            )
        return pb.RegisterOp()

    # ---------------------------------------------------------------- requests
    def one(self) -> tuple[str, object]:
        """(method name, a callable making the call) for one random request."""
        r, s, lease = self.rng, self.a.stub, self.lease()
        t = CALL_DEADLINE_S
        method = r.choice(
            [
                "ListDevices",
                "GetCounters",
                "OpenDevice",
                "KeepAlive",
                "HoldLease",
                "CloseDevice",
                "ReadRegister",
                "WriteRegister",
                "RegisterBatch",
                "WriteMemory",
                "ReadMemory",
                "WaitInterrupt",
                "ResetDevice",
                "Raw",
                "TcpGarbage",
            ]
        )
        if method == "Raw":
            name = r.choice([m.name for m in SERVICE.methods])
            body = r.choice([b"\xff" * 8, b"\n\x05ab", r.randbytes(r.randrange(1, 64))])
            return method, lambda: self.raw(name, body)
        if method == "TcpGarbage":
            return method, lambda: self.tcp_garbage(r.randbytes(r.randrange(1, 200)))
        if method == "ListDevices":
            return method, lambda: s.ListDevices(pb.ListDevicesRequest(), timeout=t)
        if method == "GetCounters":
            dev = r.choice(["", "npu0", "npu1", "npu9", "x" * 200])
            return method, lambda: s.GetCounters(pb.GetCountersRequest(device=dev), timeout=t)
        if method == "OpenDevice":
            req = pb.OpenDeviceRequest(
                device=r.choice(["", "npu1", "npu7", "\x00" * 5]),
                client="fuzz" * r.randrange(1, 100),
                protocol_version=r.choice([PROTOCOL, 0, 2, 1 << 31]),
                lease_ttl_ms=r.choice([0, 1, 999, 1000, 3_600_001, (1 << 32) - 1]),
            )
            return method, lambda: s.OpenDevice(req, timeout=t)
        if method == "KeepAlive":
            return method, lambda: s.KeepAlive(pb.KeepAliveRequest(lease_id=lease), timeout=t)
        if method == "HoldLease":

            def hold():
                stream = s.HoldLease(pb.HoldLeaseRequest(lease_id=lease), timeout=t)
                msg = next(stream)
                stream.cancel()
                return msg

            return method, hold
        if method == "CloseDevice":
            return method, lambda: s.CloseDevice(pb.CloseDeviceRequest(lease_id=lease), timeout=t)
        if method == "ReadRegister":
            req = pb.ReadRegisterRequest(lease_id=lease, address=self.address())
            return method, lambda: s.ReadRegister(req, timeout=t)
        if method == "WriteRegister":
            req = pb.WriteRegisterRequest(
                lease_id=lease, address=self.address(), value=r.getrandbits(32)
            )
            return method, lambda: s.WriteRegister(req, timeout=t)
        if method == "RegisterBatch":
            ops = [self.op() for _ in range(r.choice([0, 1, 3, 17]))]
            req = pb.RegisterBatchRequest(lease_id=lease, ops=ops)
            return method, lambda: s.RegisterBatch(req, timeout=t)
        if method == "WriteMemory":
            msgs = [
                pb.WriteMemoryRequest(lease_id=lease, address=self.address(), length=self.length())
            ]
            for _ in range(r.choice([0, 1, 2])):
                msgs.append(pb.WriteMemoryRequest(data=r.randbytes(r.choice([0, 1, 100, 4096]))))
            if r.random() < 0.2:
                msgs = msgs[1:]  # no header
            return method, lambda: s.WriteMemory(iter(msgs), timeout=t)
        if method == "ReadMemory":
            req = pb.ReadMemoryRequest(
                lease_id=lease,
                address=self.address(),
                length=r.choice([0, 1, 4096, 65536, self.length()]),
                chunk_size=r.choice([0, 1, 4096, (1 << 20) + 1, (1 << 32) - 1]),
            )
            return method, lambda: sum(len(m.data) for m in s.ReadMemory(req, timeout=t))
        if method == "WaitInterrupt":
            req = pb.WaitInterruptRequest(
                lease_id=lease,
                timeout_ms=r.choice([0, 1, 50, 200, 600_001]),
                max_cycles=r.choice([0, 1, 1000, 100_000]),
            )
            if req.timeout_ms == 0 and req.max_cycles == 0:
                req.max_cycles = 1000
            return method, lambda: s.WaitInterrupt(req, timeout=t)
        req = pb.ResetDeviceRequest(lease_id=lease)
        return method, lambda: s.ResetDevice(req, timeout=t)

    def raw(self, name: str, body: bytes) -> object:
        """`body` as the request of method `name`, whatever it is."""
        method = SERVICE.methods_by_name[name]
        path = f"/{SERVICE.full_name}/{name}"
        ch, t = self.a.channel, CALL_DEADLINE_S
        if method.client_streaming:
            return ch.stream_unary(path)(iter([body]), timeout=t)
        if method.server_streaming:
            return list(ch.unary_stream(path)(body, timeout=t))
        return ch.unary_unary(path)(body, timeout=t)

    def tcp_garbage(self, body: bytes) -> None:
        host, port = self.a.address.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=5) as s:
            s.sendall(body)

    def run(self, count: int, probe_every: int = 0) -> FuzzReport:
        """`count` requests; with `probe_every`, a probe of npu0 after each that many."""
        rep = FuzzReport()
        with _KeepAlive(self.b) as self._keeper:
            for i in range(count):
                self._one_request(rep, i, probe_every)
            self._keep_bystander()
        return rep

    def _one_request(self, rep: FuzzReport, i: int, probe_every: int) -> None:
        """One fuzzed request (after a probe when one is due), tallied in `rep`."""
        if probe_every and i and i % probe_every == 0:
            self.probe(rep, i)
        self._keep_bystander()
        method, call = self.one()
        rep.requests += 1
        lease_before = self.a.lease
        t0 = time.monotonic()
        try:
            call()
            code = grpc.StatusCode.OK
        except grpc.RpcError as exc:
            code = exc.code()
        took = time.monotonic() - t0
        self._recent.append(f"#{i} {method} {code.name} {took:.2f} s")
        if took > SLOW_S:
            rep.slow.append(f"#{i} {method} {code.name} {took:.1f} s")
        rep.statuses[f"{method} {code.name}"] += 1
        if code in (grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN):
            rep.crashes.append(f"{method}: {code.name}")
        if code == grpc.StatusCode.DEADLINE_EXCEEDED:
            rep.hangs.append(method)
        valid = code == grpc.StatusCode.OK and self.a.lease == lease_before
        rep.accepted_valid_lease += valid and method not in ("ListDevices", "GetCounters")
        self._reopen_if_lost()

    def _keep_bystander(self) -> None:
        """Stops the run with the story so far if the bystander's lease has ended."""
        if self._keeper is not None and self._keeper.error:
            raise AssertionError(
                f"{self._keeper.error}; the last requests: {'; '.join(self._recent)}"
            )

    def _reopen_if_lost(self) -> None:
        """A fuzzed CloseDevice (or a TTL) may end A's lease: open npu0 again."""
        try:
            self.a.stub.KeepAlive(pb.KeepAliveRequest(lease_id=self.a.lease), timeout=30)
        except grpc.RpcError:
            self.ended.append(self.a.lease)
            self.a.lease = ""
            t0 = time.monotonic()
            for _ in range(600):  # the device may be resetting for a moment
                try:
                    self.a.open(device="npu0", client="fuzz-a")
                    self._recent.append(f"A reopened npu0 in {time.monotonic() - t0:.2f} s")
                    return
                except grpc.RpcError:
                    self._keep_bystander()
                    time.sleep(0.05)
            raise AssertionError("npu0 did not come back after its lease ended") from None

    def probe(self, rep: FuzzReport, index: int) -> None:
        """Close A's lease on npu0; a fresh client must open npu0 and read its ID within
        PROBE_S (waiting while it is resetting or held by a lease the fuzz left). Then A
        opens it again."""
        p = self.probe_client
        assert p is not None, "run(probe_every=...) needs a probe client"
        rep.probes += 1
        with contextlib.suppress(grpc.RpcError):
            self.a.stub.CloseDevice(pb.CloseDeviceRequest(lease_id=self.a.lease), timeout=30)
        self.ended.append(self.a.lease)
        self.a.lease = ""
        t0 = time.monotonic()
        why = ""
        while time.monotonic() - t0 < PROBE_S:
            try:
                p.open(device="npu0", client="probe")
                ok = p.read(NPU_BASE) == 0x4E50_5530
                p.close()
                if ok:
                    break
                why = "the ID register read wrong"
            except grpc.RpcError as exc:
                why = f"{exc.code().name}: {exc.details()[:160]}"
                p.lease = ""
            self._keep_bystander()
            time.sleep(0.1)
        else:
            rep.outages.append(f"after request {index}: {why}")
        self._recent.append(f"probe after #{index}: {time.monotonic() - t0:.2f} s")
        self._reopen_if_lost()

    def other_device_changed(self) -> bool:
        b = self.b
        return not (
            b.read(SCRATCH) == B_SCRATCH and b.read_mem(UDMA_BASE, len(B_PATTERN)) == B_PATTERN
        )


class _KeepAlive:
    """The bystander is another client: its keep-alives go from their own thread every few
    seconds whatever the fuzzer's requests take (a 64 MiB read in 4 KiB messages takes many
    seconds on a loaded machine, and the lease ends after 30 s without a keep-alive)."""

    EVERY_S = 3.0

    def __init__(self, client: Client) -> None:
        self.client = client
        self.error = ""
        self._last = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bystander-keepalive", daemon=True)

    def __enter__(self) -> _KeepAlive:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.EVERY_S):
            try:
                self.client.stub.KeepAlive(
                    pb.KeepAliveRequest(lease_id=self.client.lease), timeout=30
                )
            except grpc.RpcError as exc:
                self.error = (
                    f"the bystander's lease ended ({exc.code().name}: {exc.details()}), "
                    f"{time.monotonic() - self._last:.1f} s after its last keep-alive"
                )
                return
            self._last = time.monotonic()


def prepare_b(b: Client) -> None:
    b.open(device="npu1", client="bystander")
    b.write(SCRATCH, B_SCRATCH)
    b.write_mem(UDMA_BASE, B_PATTERN)
