"""A lease lasts as long as its holder answers (issue 38, findings 4 and 5).

Real `npu-emu serve` processes and real client processes, killed (SIGKILL) or stopped
(SIGSTOP, as a debugger stops them) at chosen moments:

- a holder killed while the simulator serves it a long request through the register ring
  (a wait for the interrupt, a poll): the lease end's revocation stops that request, so
  the next holder gets the device as after any other kill, without the worker being
  killed by the watchdog (before: 33-41 s, the watchdog's 30 s on RING_DETACH, then a
  restart);
- a runtime holder that stops answering loses its lease once its TTL passes (its
  heartbeats stop), while a live one keeps it through an idle period and a long wait;
- a raw gRPC holder (no heartbeats, the HoldLease stream only) that is stopped loses its
  connection to the server's keepalive pings, and so its lease.

Each test prints its measured figures (pytest -s shows them).
"""

from __future__ import annotations

import os
import re
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator

import grpc
import pytest
from rpc_client import NPU_BASE

from npuemu.server.launch import ServerProcess
from npuemu.server.limits import keepalive_options
from xrt import Device
from xrt.hw.wire import pb, pb_grpc
from xrt.transport.grpc.lease import heartbeat_period

MAGIC_VALUE = 0x4E50_5530


@pytest.fixture(scope="module")
def server30() -> Iterator[ServerProcess]:
    """One device, the default lease TTL (30 s) and watchdog (30 s): the ring's detach
    waits up to 30 s for a worker that does not answer, and the keepalive pings (every
    15 s) are far slower than a 2 s lease's heartbeats."""
    with ServerProcess.start(devices=1) as srv:
        yield srv


def _start(script: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", script, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def _line(proc: subprocess.Popen[str], timeout_s: float = 120.0) -> str:
    """The next line `proc` prints, waiting at most `timeout_s`."""
    assert proc.stdout is not None
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        if not sel.select(timeout_s):
            raise AssertionError(f"the client printed nothing in {timeout_s} s")
    line = proc.stdout.readline()
    assert line, f"the client exited (status {proc.wait()})"
    return line.strip()


def _finish(proc: subprocess.Popen[str]) -> None:
    """Whatever a test left it in: running again, then gone."""
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGCONT)
        proc.kill()
    proc.wait(30)


def _holders(address: str) -> Callable[[], dict[str, str]]:
    channel = grpc.insecure_channel(address)
    stub = pb_grpc.DeviceServiceStub(channel)

    def holders() -> dict[str, str]:
        devices = stub.ListDevices(pb.ListDevicesRequest(), timeout=30).devices
        return {d.name: d.holder for d in devices}

    return holders


def _wait_until(cond: Callable[[], bool], timeout_s: float, what: str) -> float:
    """Wait for `cond` (looking every 20 ms) at most `timeout_s`; the seconds it took."""
    t0 = time.monotonic()
    while not cond():
        if time.monotonic() - t0 > timeout_s:
            raise AssertionError(f"{what}: not within {timeout_s} s")
        time.sleep(0.02)
    return time.monotonic() - t0


def _holds_for(holders: Callable[[], dict[str, str]], device: str, holder: str, s: float) -> None:
    """`holder` keeps `device` for `s` seconds (looked at every 50 ms)."""
    end = time.monotonic() + s
    while time.monotonic() < end:
        assert holders()[device] == holder, f"{holder} lost {device}"
        time.sleep(0.05)


# ------------------------------------------------------------------ finding 4

RING_HOLDER = r"""
import sys, threading
import xrt

dev = xrt.Device.open(sys.argv[1])
assert dev.transport.ring is not None, dev.transport.ring_note
npu = dev.get_reg_region("npu")
if sys.argv[2] == "wait":  # the interrupt never rises: the simulator runs the clock
    work = lambda: dev.wait_irq(300.0)
else:  # MAGIC never reads 0: the poll runs for up to 3e9 cycles
    work = lambda: npu.poll(int(sys.argv[3]), 0xFFFFFFFF, 0, timeout_s=3000.0)
thread = threading.Thread(target=work, daemon=True)
thread.start()
thread.join(0.5)  # still running then: the request is with the simulator
print("in flight" if thread.is_alive() else "ended early", flush=True)
thread.join()
"""


@pytest.mark.sim
@pytest.mark.parametrize("request_kind", ["wait", "poll"])
def test_a_holder_killed_mid_ring_request_hands_the_device_on_at_once(
    server30: ServerProcess, request_kind: str
) -> None:
    """Before: the lease end's RING_DETACH queued behind the simulator's wait (the C++
    main loop looked at nothing else until it ended), the watchdog killed the worker after
    30 s, and the next holder got the device 33-41 s after the kill. Now the revocation
    stops the request in the simulator: no worker restart, the device at once."""
    with Device.open(server30.url) as probe:
        restarts = probe.transport.counters().worker_restarts  # type: ignore[attr-defined]
    holder = _start(RING_HOLDER, server30.url, request_kind, str(NPU_BASE))
    try:
        assert _line(holder) == "in flight"
        log_before = len(server30.log)
        t_kill = time.monotonic()
        holder.kill()
        holder.wait(30)
        with Device.open(server30.url + "?wait=120") as nxt:
            granted_s = time.monotonic() - t_kill
            t = nxt.transport
            print(f"\n{request_kind}: SIGKILL -> next holder granted in {granted_s:.2f} s")
            assert t.counters().worker_restarts == restarts  # type: ignore[attr-defined]
            assert t.ring is not None  # type: ignore[attr-defined]
            assert nxt.wait_irq(0.01) is False  # its own ring serves it, at once
            assert nxt.get_reg_region("npu").regs.MAGIC.read() == MAGIC_VALUE
    finally:
        _finish(holder)
    log = server30.log[log_before:]
    assert "did not answer ring_detach" not in log
    ended = re.search(r"released npu0 \(client disconnected\)", log)
    opened = re.search(r"opened npu0", log)
    assert ended and opened and ended.start() < opened.start(), log
    # Far inside the watchdog's 30 s that the detach waited for before.
    assert granted_s < 15.0, f"the next holder waited {granted_s:.1f} s"


# ------------------------------------------------------------------ finding 5

HEARTBEAT_HOLDER = r"""
import sys
import xrt
from xrt.errors import XrtError

dev = xrt.Device.open(sys.argv[1] + "?ttl=2")
print("opened", flush=True)
for line in sys.stdin:
    cmd, *arg = line.split()
    try:
        if cmd == "wait":  # the device in a long wait: simulated time runs, the wire is quiet
            print("waited", dev.wait_irq(float(arg[0])), flush=True)
        elif cmd == "read":
            print("read", hex(dev.get_reg_region("npu").regs.MAGIC.read()), flush=True)
    except XrtError as exc:
        print("error", int(exc.code), str(exc).replace("\n", " "), flush=True)
"""


@pytest.mark.sim
def test_a_stopped_holder_loses_its_lease_after_its_ttl_and_a_live_one_keeps_it(
    server30: ServerProcess,
) -> None:
    """Before: a SIGSTOPped holder kept its lease for ever (its HoldLease stream stayed
    open, and an open stream exempted the lease from its TTL). Now the runtime's
    heartbeats (KeepAlive every TTL/3) are what keep it: a live holder keeps the device
    through 3 TTLs of idleness and of a wait; a stopped one loses it once the TTL passes
    (the server's keepalive pings, every 15 s here, come far later)."""
    holders = _holders(server30.address)
    proc = _start(HEARTBEAT_HOLDER, server30.url)
    try:
        assert _line(proc) == "opened"
        holder = holders()["npu0"]
        assert holder
        _holds_for(holders, "npu0", holder, 6.0)  # idle: no call at all
        assert proc.stdin is not None
        proc.stdin.write("wait 6\n")
        proc.stdin.flush()
        _holds_for(holders, "npu0", holder, 5.0)  # in a wait through the ring
        assert _line(proc) == "waited False"
        log_before = len(server30.log)
        os.kill(proc.pid, signal.SIGSTOP)
        lost_s = _wait_until(lambda: holders()["npu0"] != holder, 20.0, "stopped holder")
        print(f"\nSIGSTOP -> lease lost in {lost_s:.2f} s (lease TTL 2 s)")
        assert "released npu0 (no heartbeat for 2 s)" in server30.log[log_before:]
        os.kill(proc.pid, signal.SIGCONT)
        proc.stdin.write("read\n")
        proc.stdin.flush()
        answer = _line(proc)
        assert answer.startswith("error 11012") and "no heartbeat for 2 s" in answer, answer
        proc.stdin.close()
        assert proc.wait(30) == 0
    finally:
        _finish(proc)
    with Device.open(server30.url + "?wait=30") as nxt:
        assert nxt.get_reg_region("npu").regs.MAGIC.read() == MAGIC_VALUE


RAW_HOLDER = r"""
import sys, threading
import grpc
from xrt.hw.wire import PROTOCOL_VERSION, pb, pb_grpc

stub = pb_grpc.DeviceServiceStub(grpc.insecure_channel(sys.argv[1]))
lease = stub.OpenDevice(
    pb.OpenDeviceRequest(device="npu1", client="raw", protocol_version=PROTOCOL_VERSION)
).lease_id
hold = stub.HoldLease(pb.HoldLeaseRequest(lease_id=lease))  # no heartbeats: an older client
next(hold)
def pump():
    try:
        for _ in hold:
            pass
        print("stream ended", flush=True)
    except grpc.RpcError as exc:
        print("stream failed", exc.code().name, flush=True)
threading.Thread(target=pump, daemon=True).start()
print("holding", flush=True)
sys.stdin.readline()
"""


@pytest.mark.sim
def test_a_stopped_holder_without_heartbeats_loses_its_connection_and_lease(
    server: ServerProcess,
) -> None:
    """A client that sends no heartbeats (an older runtime, raw gRPC) keeps its lease
    with its HoldLease stream, as before; stopped, it no longer answers the server's
    keepalive pings (every 1 s, 2 s to answer, at `--lease-ttl 2`), so the server closes
    its connection and the stream's end ends the lease. Before: kept for ever."""
    holders = _holders(server.address)
    proc = _start(RAW_HOLDER, server.address)
    try:
        assert _line(proc) == "holding"
        assert holders()["npu1"].startswith("raw@")
        _holds_for(holders, "npu1", holders()["npu1"], 6.0)  # alive: 3 TTLs, no call
        log_before = len(server.log)
        os.kill(proc.pid, signal.SIGSTOP)
        lost_s = _wait_until(lambda: not holders()["npu1"], 30.0, "stopped raw holder")
        print(f"\nSIGSTOP (no heartbeats) -> lease lost in {lost_s:.2f} s (keepalive 1 s + 2 s)")
        assert "released npu1 (client disconnected)" in server.log[log_before:]
        os.kill(proc.pid, signal.SIGCONT)
        assert _line(proc).startswith("stream failed UNAVAILABLE")
    finally:
        _finish(proc)


# ------------------------------------------------------------------ the numbers


def test_heartbeat_and_keepalive_timings_follow_the_ttl() -> None:
    assert heartbeat_period(2.0) == pytest.approx(2 / 3)
    assert heartbeat_period(0.3) == 0.2  # at least 0.2 s apart
    assert heartbeat_period(3600.0) == 10.0  # at most 10 s apart
    assert dict(keepalive_options(2.0))["grpc.keepalive_time_ms"] == 1000
    assert dict(keepalive_options(2.0))["grpc.keepalive_timeout_ms"] == 2000
    default = dict(keepalive_options(30.0))
    assert default["grpc.keepalive_time_ms"] == default["grpc.keepalive_timeout_ms"] == 15_000
    assert dict(keepalive_options(3600.0))["grpc.keepalive_time_ms"] == 60_000
    for bad in (0.0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="lease TTL must be positive"):
            heartbeat_period(bad)
        with pytest.raises(ValueError, match="lease TTL must be positive"):
            keepalive_options(bad)
