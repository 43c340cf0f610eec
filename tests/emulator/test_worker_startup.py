"""A simulation worker gives nothing to another process of the same user, from its first
instruction on, and a descriptor of its memory taken once never sees a later lease.

Real unprivileged `npu-emu serve` processes, a real attacker process of the same user
(`startup_attacker.py`) looting the workers while they start."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import grpc
import pytest
from rpc_client import PLDDR_BASE, UDMA_BASE, Client, connect, worker_pid
from test_hardening import dma_and_wait, wait_until

from npuemu.process_guard import unprivileged_command
from npuemu.server.launch import ServerProcess
from xrt.hw.targets import target

pytestmark = pytest.mark.sim

SECRET = bytes(range(1, 256)) * 16


def openable(c: Client, device: str) -> bool:
    try:
        c.open(device=device, client="probe")
    except grpc.RpcError as exc:
        assert exc.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.FAILED_PRECONDITION)
        return False
    c.close()
    return True


def secret(entry: dict) -> bool:
    """A descriptor worth stealing: a socket (the IPC channel) or a memory file."""
    t = entry["target"]
    return t.startswith(("socket:", "/dev/shm", "memfd:")) or "(deleted)" in t


def test_a_starting_worker_gives_nothing_to_a_same_user_process():
    """Defect: a starting worker was dumpable for about 1.7 s (until cocotb ran the worker
    loop): a process of the same user with no lease opened the udma and plddr files it
    inherited through /proc/PID/fd and took its IPC socket with pidfd_getfd, on which one
    pickled frame ran code in the server. Now the simulator's main makes it non-dumpable
    first and the server hands it the descriptors only once it proved its pid."""
    with ServerProcess.start(devices=1, unprivileged=True) as server:
        c = connect(server)
        attacker = subprocess.Popen(
            unprivileged_command(
                [sys.executable, str(Path(__file__).with_name("startup_attacker.py")),
                 str(server.proc.pid)]
            ),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        try:
            assert attacker.stdout.readline() == "ready\n"
            for restart in range(3):  # three starts under attack
                old = worker_pid(server, "npu0")
                os.kill(old, signal.SIGKILL)
                wait_until(lambda old=old: worker_pid(server, "npu0") != old, what="a restart")
                wait_until(lambda: openable(c, "npu0"), what=f"npu0 usable after restart {restart}")
            attacker.stdin.close()
            report = json.loads(attacker.stdout.read())
        finally:
            with contextlib.suppress(ProcessLookupError):
                attacker.kill()
            attacker.wait(30)
            c.channel.close()
    assert report["looks"] > 0
    stolen = [e for e in report["got"] if secret(e)]
    assert not stolen, f"a same-user process without a lease took: {stolen[:5]}"
    # The refused hand-out connections were logged (when the attacker found the socket).
    assert "refused a hand-out connection" in server.log or not any(
        e["how"] == "handout" for e in report["got"]
    )


def test_a_plddr_descriptor_never_sees_a_later_lease():
    """Defect: plddr was one file for the worker's whole life, only zeroed between leases:
    a descriptor of it taken once (through the start-up window) read every later holder's
    data. Now every lease end puts new files behind every memory. (The test takes the
    descriptor with its privileges, which no same-user process has.)"""
    with ServerProcess.start(devices=1) as server:
        a, b = connect(server), connect(server)
        try:
            size = target("buyi").memory("plddr").size
            a.open(device="npu0", client="a")
            fd_dir = Path(f"/proc/{worker_pid(server, 'npu0')}/fd")
            plddr = None
            for link in fd_dir.iterdir():
                with contextlib.suppress(OSError):
                    fd = os.open(link, os.O_RDONLY)
                    if os.fstat(fd).st_size == size and "(deleted)" in os.readlink(link):
                        plddr = fd
                        break
                    os.close(fd)
            assert plddr is not None, "no plddr file in the worker"
            a.write_mem(UDMA_BASE, b"mine")
            dma_and_wait(a, UDMA_BASE, PLDDR_BASE, 4)
            assert os.pread(plddr, 4, 0) == b"mine"  # the descriptor is plddr
            a.close()
            wait_until(lambda: openable(b, "npu0"), what="npu0 free again")
            b.open(device="npu0", client="b")
            b.write_mem(UDMA_BASE, SECRET)
            dma_and_wait(b, UDMA_BASE, PLDDR_BASE, len(SECRET))
            assert os.pread(plddr, len(SECRET), 0) != SECRET[: len(SECRET)], "saw the next lease"
            assert os.pread(plddr, 4, 0) == b"mine"
            os.close(plddr)
            b.close()
        finally:
            a.channel.close()
            b.channel.close()
