"""Observers of held devices (`npu-emu serve --admin-token-file`, the Observe* calls,
`npu-emu regs|waves --observe`): an operator reads the registers of a device a driver
holds and records a waveform window of what the holder does, without its lease.

Real processes: servers started as subprocesses, the device CLI as a subprocess, holders
as in-test clients (raw stubs, where the lease id matters, and the runtime). Every wait is
on a condition (a log line, a process exit, a state), bounded; nothing asserts on wall time.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import grpc
import numpy as np
import pytest
from rpc_client import NPU_BASE, Client, connect, rd, wr

from npuemu.server.launch import ServerProcess
from xrt import Device
from xrt.errors import XrtError
from xrt.hw.port import (
    Quit,
    RegBatch,
    Remap,
    Reset,
    WaitIrq,
    WavesForget,
    WavesStatus,
    read_only_refusal,
)
from xrt.hw.regops import MASK32, RegKind
from xrt.hw.regs import DMA, NPU, read_side_effects
from xrt.hw.targets import CLOCK_PERIOD_PS
from xrt.hw.wire import ADMIN_KEY, DeviceState, RegisterStatus, pb

TOKEN = "cl1ent-t0ken-for-observer-tests"
ADMIN = "adm1n-t0ken-for-observer-tests"
SCRATCH = NPU_BASE + NPU.offset("SCRATCH")
MAGIC = NPU_BASE + NPU.offset("MAGIC")
CYCLES_LO = NPU_BASE + NPU.offset("CYCLES_LO")
WAIT_S = 120.0  # upper bound of every wait on a condition (a loaded machine is slow)


def admin_file(folder: Path) -> Path:
    path = folder / "admin-token"
    path.write_text(ADMIN + "\n")
    path.chmod(0o600)
    return path


def cli(
    srv: ServerProcess, *args: str, admin: str | None = ADMIN, token: str | None = TOKEN
) -> subprocess.CompletedProcess[str]:
    """`python -m npuemu ARGS --server ...` with the credentials given (and no others)."""
    env = {k: v for k, v in os.environ.items() if k not in ("NPU_EMU_TOKEN", "NPU_EMU_ADMIN_TOKEN")}
    if admin is not None:
        env["NPU_EMU_ADMIN_TOKEN"] = admin
    if token is not None:
        env["NPU_EMU_TOKEN"] = token
    return subprocess.run(
        [sys.executable, "-m", "npuemu", *args, "--server", srv.address],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=False,
    )


def metadata(*, token: str | None = TOKEN, admin: str | None = ADMIN) -> tuple:
    md: tuple = ()
    if token is not None:
        md += (("authorization", f"Bearer {token}"),)
    if admin is not None:
        md += ((ADMIN_KEY, admin),)
    return md


def wait_for_log(srv: ServerProcess, pattern: str, alive: subprocess.Popen | None = None) -> None:
    """Until the server's log matches `pattern` (bounded; `alive` must not exit first)."""
    end = time.monotonic() + WAIT_S
    while not re.search(pattern, srv.log):
        assert time.monotonic() < end, f"no {pattern!r} in the server log:\n{srv.log[-3000:]}"
        if alive is not None and alive.poll() is not None:
            out, err = alive.communicate()
            raise AssertionError(f"the process ended first ({alive.returncode}): {out}{err}")
        time.sleep(0.05)  # polling a log file for a condition, not timing anything


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> ServerProcess:
    """Two devices; a client token AND an admin token (an observer needs both)."""
    folder = tmp_path_factory.mktemp("observer")
    with ServerProcess.start(
        devices=2, token=TOKEN, extra_args=("--admin-token-file", str(admin_file(folder)))
    ) as srv:
        yield srv


@pytest.fixture
def holder(server: ServerProcess) -> Client:
    """A driver holding npu0 with a raw client (its lease id in view), long TTL."""
    h = connect(server, TOKEN)
    h.open("npu0", client="holder", lease_ttl_ms=600_000)
    yield h
    h.close()
    h.channel.close()


def counters(c: Client, device: str) -> pb.GetCountersResponse:
    return c.stub.GetCounters(pb.GetCountersRequest(device=device), metadata=c.metadata)


# ------------------------------------------------------------------ without a simulator
def test_registers_with_read_side_effects_come_from_the_rdl():
    effects = read_side_effects(NPU_BASE, 0x8000_0000)
    swacc = {
        (b.name, r.name)
        for b in (NPU, DMA)
        for r in b
        if any(f.swacc or f.onread for f in r.fields)
    }
    assert swacc, "the RDL has counters whose LO read latches HI (swacc)"
    assert len(effects) == len(swacc)
    assert "latches npu.CYCLES_HI" in effects[CYCLES_LO]
    assert "latches dma.BUSY_CYCLES_HI" in effects[0x8000_0000 + DMA.offset("BUSY_CYCLES_LO")]
    assert SCRATCH not in effects and CYCLES_LO + 4 not in effects  # HI halves only look


def test_the_worker_gate_lets_only_reads_through():
    effects = read_side_effects(NPU_BASE, 0x8000_0000)
    read = (RegKind.READ, SCRATCH, 0, MASK32, 0, 0)
    assert read_only_refusal(RegBatch.of_rows([read]), effects) == ""
    assert read_only_refusal(RegBatch.read(MAGIC), effects) == ""
    assert read_only_refusal(WavesStatus(), effects) == ""
    for kind in (RegKind.WRITE, RegKind.MASKED_WRITE, RegKind.POLL):
        req = RegBatch.of_rows([read, (kind, SCRATCH, 1, MASK32, 0, 10)])
        assert f"op 1 is a {kind.name.lower()}" in read_only_refusal(req, effects)
    for other in (RegBatch.write(SCRATCH, 1), Reset(), WaitIrq(10, 1.0), Remap((1, 2)),
                  WavesForget(), Quit()):  # fmt: skip
        why = read_only_refusal(other, effects)
        assert why == "op 0 is a write, not a read" or "not a read-only request" in why, why
    assert "latches" in read_only_refusal(RegBatch.read(CYCLES_LO), effects)


def test_the_admin_token_comes_from_a_file_and_is_not_the_client_token(tmp_path, monkeypatch):
    from npuemu.server.security import SecurityError, security_options

    monkeypatch.delenv("NPU_EMU_ADMIN_TOKEN_FILE", raising=False)
    monkeypatch.delenv("NPU_EMU_TOKEN", raising=False)
    path = admin_file(tmp_path)
    assert security_options(host="127.0.0.1").admin_token is None  # observing is off
    got = security_options(host="127.0.0.1", token=TOKEN, admin_token_file=path)
    assert (got.token, got.admin_token, got.warnings) == (TOKEN, ADMIN, ())
    monkeypatch.setenv("NPU_EMU_ADMIN_TOKEN_FILE", str(path))
    assert security_options(host="127.0.0.1").admin_token == ADMIN
    with pytest.raises(SecurityError, match="is the client token"):
        security_options(host="127.0.0.1", token=ADMIN)
    monkeypatch.delenv("NPU_EMU_ADMIN_TOKEN_FILE")
    empty = tmp_path / "empty"
    empty.write_text("\n")
    with pytest.raises(SecurityError, match=r"admin token file .* is empty"):
        security_options(host="127.0.0.1", admin_token_file=empty)
    with pytest.raises(SecurityError, match="cannot read admin token file"):
        security_options(host="127.0.0.1", admin_token_file=tmp_path / "missing")
    path.chmod(0o644)
    (warning,) = security_options(host="127.0.0.1", admin_token_file=path).warnings
    assert "readable by other users" in warning and "chmod 600" in warning
    # The command line refuses the same (exit status 2), before building anything.
    r = subprocess.run(
        [sys.executable, "-m", "npuemu", "serve", "--port", "0", "--admin-token-file", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "NPU_EMU_TOKEN": ADMIN},
        check=False,
    )
    assert r.returncode == 2 and "is the client token" in r.stderr, r.stderr


@pytest.mark.sim
def test_without_an_admin_token_nobody_observes(tmp_path):
    with ServerProcess.start(devices=1) as srv:
        h = connect(srv)
        try:
            h.open("npu0", client="holder")
            req = pb.ObserveReadRegisterRequest(device="npu0", address=MAGIC, client="t")
            for md in ((), metadata(token=None)):
                with pytest.raises(grpc.RpcError) as info:
                    h.stub.ObserveReadRegister(req, metadata=md)
                assert info.value.code() == grpc.StatusCode.PERMISSION_DENIED
                assert "observing is off" in info.value.details()
                assert "--admin-token-file" in info.value.details()
        finally:
            h.close()
            h.channel.close()
    assert "observers" not in srv.log.split("serving", 1)[1].splitlines()[0]


# ------------------------------------------------------------------ the worker's own gate
@pytest.mark.sim
def test_the_worker_refuses_anything_but_reads_on_the_read_only_path(tmp_path):
    """The server checks first; the worker is the gate should it not: a read-only request
    that writes, or reads a latching register, is answered not-ok without running. And an
    observer's request under way is not the holder's use of its lease."""
    from npuemu.server.devices import SimDevice
    from npuemu.server.leases import Lease
    from npuemu.server.shm import new_server_dir
    from npuemu.server.worker_process import WorkerError
    from npuemu.sim.build import build_npu_sim
    from xrt.hw.targets import target

    async def run() -> None:
        folder = new_server_dir()
        d = SimDevice("npu0", target("buyi"), build_npu_sim("buyi"), folder, log_dir=tmp_path)
        try:
            await d.start()
            w = d.worker
            await w.call(RegBatch.write(SCRATCH, 0x600D), 30)
            before = (await w.call(RegBatch.read(SCRATCH), 30, read_only=True)).cycles
            refused = [
                RegBatch.write(SCRATCH, 0xBAD),
                RegBatch.of_rows([(RegKind.WRITE, SCRATCH, 0xBAD, MASK32, 0, 0)]),
                RegBatch.of_rows([(RegKind.POLL, SCRATCH, 0, 1, 1, 100_000)]),
                RegBatch.read(CYCLES_LO),
                Reset(),
            ]
            for req in refused:
                with pytest.raises(WorkerError, match="refused on the read-only path"):
                    await w.call(req, 30, read_only=True)
            after = await w.call(RegBatch.read(SCRATCH), 30, read_only=True)
            assert after.body.pairs() == [(RegisterStatus.OK, 0x600D)]
            # Nothing ran: the only cycles spent since are this last read's own.
            again = await w.call(RegBatch.read(SCRATCH), 30, read_only=True)
            assert after.cycles - before == again.cycles - after.cycles

            # While an observer's request runs the holder's lease is not in use (the lease
            # expiry looks at `in_call`); while the holder's runs, it is. Both go over the
            # pipe (an observer's always; a holder's poll too), so both are seen under way.
            reads = RegBatch.of_rows([(RegKind.READ, SCRATCH, 0, MASK32, 0, 0)] * 4096)
            poll = RegBatch.of_rows([(RegKind.POLL, SCRATCH, 0, 1, 0, 200_000)])
            lease = Lease("npu0", "holder", 30.0)
            d.lease, d.state = lease, DeviceState.LEASED
            for name, call in (
                ("observer", lambda: d.observe(reads, lease)),
                ("holder", lambda: d.call(poll, lease)),
            ):
                task = asyncio.ensure_future(call())
                while not w.busy:
                    await asyncio.sleep(0)
                assert d.in_call == (name == "holder"), name
                assert len((await task).body) == (4096 if name == "observer" else 1)
                assert not d.in_call
            assert d.counters.observer_requests == 1
        finally:
            await d.stop()
            shutil.rmtree(folder, ignore_errors=True)

    asyncio.run(run())


# ------------------------------------------------------------------ registers
@pytest.mark.sim
def test_an_observer_reads_what_the_holder_wrote_and_the_holder_goes_on(server, holder):
    lease_id = holder.lease
    holder.write(SCRATCH, 0x5CA1AB1E)

    out = cli(server, "regs", "read", "npu0", "npu.SCRATCH", "--observe")
    assert out.returncode == 0, out.stderr
    assert "npu.SCRATCH @ 0x40000040 = 0x5ca1ab1e" in out.stdout
    assert "held by holder@" in out.stderr and "no lease taken" in out.stderr

    out = cli(server, "regs", "read", "npu0", "npu.SCRATCH.VALUE", "--observe")
    assert out.returncode == 0 and "= 0x5ca1ab1e" in out.stdout, out.stderr

    out = cli(server, "regs", "dump", "npu0", "--observe")
    assert out.returncode == 0, out.stderr
    assert re.search(r"npu\.SCRATCH\s+0x5ca1ab1e", out.stdout)
    assert re.search(r"npu\.MAGIC\s+0x4e505530", out.stdout)
    assert re.search(r"dma\.MAGIC\s+0x444d4130", out.stdout)
    assert "npu.CYCLES_LO        (not read: reading it latches npu.CYCLES_HI" in out.stdout
    assert len(out.stdout.splitlines()) == len(NPU) + len(DMA)

    # A register whose read is an act is refused before anything is sent.
    out = cli(server, "regs", "read", "npu0", "npu.CYCLES_LO", "--observe")
    assert out.returncode == 2 and "latches npu.CYCLES_HI" in out.stderr

    # Without --observe nothing changed: the device is leased (11012, exit status 1).
    out = cli(server, "regs", "read", "npu0", "npu.SCRATCH")
    assert out.returncode == 1 and "11012" in out.stderr and "leased by holder@" in out.stderr

    # The holder's lease is the same one, alive, and its requests work as before.
    assert holder.lease == lease_id
    ttl = holder.stub.KeepAlive(pb.KeepAliveRequest(lease_id=lease_id), metadata=holder.metadata)
    assert ttl.lease_ttl_ms == 600_000
    assert holder.read(SCRATCH) == 0x5CA1AB1E
    holder.write(SCRATCH, 0x0B5E55ED)
    assert holder.read(SCRATCH) == 0x0B5E55ED
    listing = holder.stub.ListDevices(pb.ListDevicesRequest(), metadata=holder.metadata)
    assert listing.devices[0].holder.startswith("holder@")
    c = counters(holder, "npu0")
    assert c.observer_requests >= 3  # read, field read, dump (one batch)

    # Every access is in the server's log: who, which device and holder, what.
    log = server.log
    accesses = re.findall(
        r"INFO npuemu\.server: observer (\S+) on npu0 \(held by holder@\S+\): (.*)", log
    )
    whats = [what for _, what in accesses]
    assert whats.count("read npu.SCRATCH (0x40000040)") == 2, accesses
    assert any(re.fullmatch(r"read npu\.MAGIC, .*\(\d+ in all\)", w) for w in whats), accesses
    assert all(re.match(r"xrt:\S+@ipv4:127\.0\.0\.1:\d+$", who) for who, _ in accesses)
    assert "observers with the admin token" in log
    assert ADMIN not in log and TOKEN not in log
    pid = server.proc.pid
    assert ADMIN.encode() not in Path(f"/proc/{pid}/cmdline").read_bytes()


@pytest.mark.sim
def test_refused_observers_change_nothing(server, holder):
    holder.write(SCRATCH, 0x1111)
    before = counters(holder, "npu0")
    stub = holder.stub
    read = pb.ObserveReadRegisterRequest(device="npu0", address=SCRATCH, client="t")

    def refused(md, request=read, method="ObserveReadRegister") -> grpc.RpcError:
        with pytest.raises(grpc.RpcError) as info:
            getattr(stub, method)(request, metadata=md)
        return info.value

    # No credential at all: the token interceptor refuses first.
    assert refused(()).code() == grpc.StatusCode.UNAUTHENTICATED
    # The client token alone never grants observing.
    e = refused(metadata(admin=None))
    assert e.code() == grpc.StatusCode.PERMISSION_DENIED
    assert "operator's credential" in e.details() and ADMIN_KEY in e.details()
    e = refused(metadata(admin="not-the-admin-token"))
    assert e.code() == grpc.StatusCode.UNAUTHENTICATED and "wrong admin token" in e.details()
    e = refused(metadata(admin=TOKEN))  # the client token where the admin one goes
    assert e.code() == grpc.StatusCode.UNAUTHENTICATED
    # The admin token does not stand in for the client token: both are needed here.
    e = refused(metadata(token=None))
    assert e.code() == grpc.StatusCode.UNAUTHENTICATED and "authorization" in e.details()

    # Reads only, checked whole before anything runs.
    for op in (
        wr(SCRATCH, 0xDEAD),
        pb.RegisterOp(masked_write=pb.RegisterMaskedWrite(address=SCRATCH, value=1, mask=1)),
        pb.RegisterOp(poll=pb.RegisterPoll(address=SCRATCH, mask=1, expected=0, max_cycles=10)),
    ):
        batch = pb.ObserveRegisterBatchRequest(device="npu0", ops=[rd(MAGIC), op], client="t")
        e = refused(metadata(), batch, "ObserveRegisterBatch")
        assert e.code() == grpc.StatusCode.PERMISSION_DENIED
        assert re.search(
            r"op 1 is a (write|masked write|poll): an observer only reads", e.details()
        )
    latch = pb.ObserveReadRegisterRequest(device="npu0", address=CYCLES_LO, client="t")
    e = refused(metadata(), latch)
    assert e.code() == grpc.StatusCode.PERMISSION_DENIED and "latches npu.CYCLES_HI" in e.details()
    # No --waves on this server: the error a holder gets too.
    start = pb.ObserveStartWavesRequest(device="npu0", cycles=100, client="t")
    e = refused(metadata(), start, "ObserveStartWaves")
    assert e.code() == grpc.StatusCode.FAILED_PRECONDITION and "--waves DIR" in e.details()
    # A free device is not observed (it is opened as usual).
    free = pb.ObserveReadRegisterRequest(device="npu1", address=SCRATCH, client="t")
    e = refused(metadata(), free)
    assert e.code() == grpc.StatusCode.FAILED_PRECONDITION and "held by nobody" in e.details()

    # The device CLI says the same, with exit status 1.
    for admin, text in ((None, ADMIN_KEY), ("wrong", "wrong admin token")):
        out = cli(server, "regs", "read", "npu0", "npu.SCRATCH", "--observe", admin=admin)
        assert out.returncode == 1 and text in out.stderr, out.stderr
        assert "NPU_EMU_ADMIN_TOKEN" in out.stderr

    # Nothing reached the device: no simulated time, no request, no observer request.
    after = counters(holder, "npu0")
    assert (after.cycles, after.requests, after.observer_requests) == (
        before.cycles,
        before.requests,
        before.observer_requests,
    )
    assert holder.read(SCRATCH) == 0x1111
    assert re.search(
        r"ObserveRegisterBatch from \S+: PERMISSION_DENIED op 1 is a write", server.log
    )


@pytest.mark.sim
def test_an_observer_keeps_no_lease_alive(server):
    """A holder that stops calling loses its lease after its TTL however busily it is
    observed: an observer's requests are not the holder's use. (End to end; the lease
    expiry samples `in_call` twice a second, so the deterministic check of that rule is
    in `test_the_worker_refuses_anything_but_reads_on_the_read_only_path`.)"""
    h = connect(server, TOKEN)
    try:
        h.open("npu1", client="forgetful", lease_ttl_ms=1000)
        h.read(MAGIC)  # the lease is claimed; from here on the holder is silent
        # Big batches: the worker is busy with the observer most of the time.
        read = pb.ObserveRegisterBatchRequest(device="npu1", ops=[rd(MAGIC)] * 2048, client="b")
        end = time.monotonic() + WAIT_S
        reads = 0
        while True:
            try:
                h.stub.ObserveRegisterBatch(read, metadata=metadata())
                reads += 1
            except grpc.RpcError as exc:
                if exc.code() == grpc.StatusCode.ABORTED:  # it ended while this one queued
                    continue
                assert exc.code() == grpc.StatusCode.FAILED_PRECONDITION, exc.details()
                assert "held by nobody" in exc.details()
                break
            assert time.monotonic() < end, f"the lease outlived {reads} observer batches"
        assert re.search(r"forgetful@\S+ released npu1 \(no keep-alive for 1 s\)", server.log)
        with pytest.raises(grpc.RpcError) as info:
            h.read(MAGIC)
        assert info.value.code() == grpc.StatusCode.ABORTED
    finally:
        h.lease = ""
        h.channel.close()


# ------------------------------------------------------------------ waveform windows
@pytest.fixture(scope="module")
def waves_server(tmp_path_factory) -> tuple[ServerProcess, Path]:
    pytest.importorskip("pywellen")
    folder = tmp_path_factory.mktemp("observer-waves")
    args = ("--waves", str(folder / "waves"), "--admin-token-file", str(admin_file(folder)))
    with ServerProcess.start(devices=1, extra_args=args) as srv:
        yield srv, (folder / "waves").resolve()


@pytest.mark.sim
def test_observer_window_calls_run_no_simulated_time(waves_server):
    srv, _ = waves_server
    h = connect(srv)
    obs = h.stub
    md = metadata(token=None)

    def status(wait_ms: int = 0) -> pb.ObserveWavesStatusResponse:
        return obs.ObserveWavesStatus(
            pb.ObserveWavesStatusRequest(device="npu0", client="t", wait_ms=wait_ms), metadata=md
        )

    def start(cycles: int = 0) -> pb.ObserveStartWavesResponse:
        req = pb.ObserveStartWavesRequest(device="npu0", cycles=cycles, client="t")
        return obs.ObserveStartWaves(req, metadata=md)

    def stop() -> pb.ObserveStopWavesResponse:
        return obs.ObserveStopWaves(
            pb.ObserveStopWavesRequest(device="npu0", client="t"), metadata=md
        )

    try:
        h.open("npu0", client="idle-holder")
        now = h.stub.ReadRegister(pb.ReadRegisterRequest(lease_id=h.lease, address=MAGIC)).cycles
        # An idle held device: opening, looking at and closing a window move no time.
        assert start(5000).cycles == now
        s = status(wait_ms=300)  # waits (wall time) for an end that cannot come
        assert s.state == pb.OBSERVER_WINDOW_STATE_RECORDING and s.cycles == now
        assert s.holder.startswith("idle-holder@")
        with pytest.raises(grpc.RpcError) as info:  # one observer window at a time
            start()
        assert "already open" in info.value.details()
        done = stop()
        assert done.cycles == now and done.state == pb.OBSERVER_WINDOW_STATE_STOPPED
        assert done.file.first_cycle == done.file.last_cycle == now
        now2 = h.stub.ReadRegister(pb.ReadRegisterRequest(lease_id=h.lease, address=MAGIC)).cycles
        assert now2 > now  # the holder's read ran the clock; the window calls did not

        # The holder goes first: its StartWaves cuts the observer's window, not refused.
        assert start().cycles == now2
        h.stub.StartWaves(pb.StartWavesRequest(lease_id=h.lease))
        assert status().state == pb.OBSERVER_WINDOW_STATE_CUT_BY_HOLDER
        with pytest.raises(grpc.RpcError) as info:  # and the holder's window is its own
            start()
        assert "the holder of npu0 is recording" in info.value.details()
        cut = stop()
        assert cut.state == pb.OBSERVER_WINDOW_STATE_CUT_BY_HOLDER
        mine = h.stub.StopWaves(pb.StopWavesRequest(lease_id=h.lease)).file
        assert Path(mine.path).name == f"npu0-c{now2}-c{now2}.fst" and Path(mine.path).is_file()
        assert Path(cut.file.path).name == f"npu0-observer-c{now2}-c{now2}.fst"
        assert Path(cut.file.path).is_file()

        # A lease end closes the observer's window before the device is cleared.
        start()
        h.close()
        assert status().state == pb.OBSERVER_WINDOW_STATE_CUT_BY_LEASE_END
        ended = stop()
        assert ended.state == pb.OBSERVER_WINDOW_STATE_CUT_BY_LEASE_END
        assert Path(ended.file.path).is_file()
        # The next holder sees none of it.
        h.open("npu0", client="next")
        with pytest.raises(grpc.RpcError) as info:
            h.stub.StopWaves(pb.StopWavesRequest(lease_id=h.lease))
        assert "no waveform window" in info.value.details()
    finally:
        h.close()
        h.channel.close()


@pytest.mark.sim
def test_an_observer_window_of_an_idle_holder_ends_at_its_deadline(waves_server):
    """The device's time moves only while its holder works: a window of an idle holder's
    device ends at `--timeout` (wall time) with no cycle in it, and says so."""
    srv, _ = waves_server
    h = connect(srv)
    try:
        h.open("npu0", client="idle")
        out = cli(srv, "waves", "npu0", "--observe", "--cycles", "1000000", "--timeout", "0.5")
        assert out.returncode == 0, out.stderr
        m = re.search(r"npu0-observer-c(\d+)-c(\d+)\.fst", out.stdout)
        assert m and m.group(1) == m.group(2), out.stdout
        assert "held by idle@" in out.stdout
        assert "the 0.5 s deadline passed after 0 of 1000000 cycles" in out.stdout
        # Free devices are not observed: the CLI says so (exit status 1).
        h.close()
        out = cli(srv, "regs", "read", "npu0", "npu.MAGIC", "--observe")
        assert out.returncode == 1 and "held by nobody" in out.stderr, out.stderr
    finally:
        h.close()
        h.channel.close()


@pytest.mark.sim
def test_an_observer_records_the_holders_dma_transfers(waves_server):
    import pywellen

    srv, folder = waves_server
    cycles = 20_000
    with Device.open(f"{srv.url}/npu0?client=dma-holder") as dev:
        env = {**os.environ, "NPU_EMU_ADMIN_TOKEN": ADMIN}
        env.pop("NPU_EMU_TOKEN", None)
        proc = subprocess.Popen(
            [sys.executable, "-m", "npuemu", "waves", "npu0", "--observe", "--cycles",
             str(cycles), "--timeout", "600", "--server", srv.address],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        )  # fmt: skip
        try:
            wait_for_log(
                srv,
                rf"on npu0 \(held by dma-holder@\S+\): start a waveform window \({cycles} cycles\)",
                proc,
            )
            data = np.arange(4096, dtype=np.uint32)
            chunk = dev.default_mem_region().malloc(data.nbytes)  # plddr: moved by the DMA
            transfers = 0
            while proc.poll() is None:  # the holder works until the window is full
                chunk.write(data)
                back = np.zeros_like(data)
                chunk.read(back)
                assert np.array_equal(back, data)
                transfers += 1
                assert transfers < 2000, "the window never filled"
            out, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        assert proc.returncode == 0, err
        # The holder's own windows are untouched by the observer's.
        with pytest.raises(XrtError, match="no waveform window"):
            dev.transport.stop_waves()
    print(out)
    m = re.search(r"(\S+/npu0-observer-c(\d+)-c(\d+)\.fst) \(cycles (\d+)\.\.(\d+), (\d+) B", out)
    assert m, out
    path, first, last = Path(m.group(1)), int(m.group(2)), int(m.group(3))
    assert path.parent == folder and path.is_file()
    assert last - first == cycles
    assert "held by dma-holder@" in out and f"through all {cycles} cycles" in out
    signals = {v.full_name: v for v in pywellen.Waveform(str(path)).all_vars()}
    clk = list(signals["npu_sim.clk_o"].signal)
    assert clk[0][0] // CLOCK_PERIOD_PS == first and clk[-1][0] // CLOCK_PERIOD_PS == last
    busy = [v for _, v in signals["npu_sim.busy_o"].signal]
    assert 1 in busy, "the window holds the holder's DMA transfers"
    assert re.search(
        r"observer \S+ on npu0 \(held by dma-holder@\S+\): stop its waveform window", srv.log
    )
