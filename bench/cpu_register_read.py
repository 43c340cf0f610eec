"""CPU time per register read in each process (client, server, worker) beside a bare gRPC
unary echo's (client, echo server), for servers started differently, interleaved.

    .venv/bin/python bench/cpu_register_read.py [--reads 300] [--rounds 12] [--batch 64]
        [--variant NAME:VAR=VALUE,VAR=VALUE ...]

Starts the echo of `bench_registers.py` and one `npu-emu serve` per variant (its extra
environment after the colon; default: two instances of the server as installed, whose
difference is the measurement's own noise). Each round makes `--reads` echoes, then
`--reads` register reads (one ReadRegister each) on every server in turn (the servers take
turns in every place of a round), reading each process's CPU time (the scheduler's
nanosecond count) and context switches before and after. Prints medians over the rounds:
microseconds per call, the wall time per call with its ratio to the echo's, and the
context switches per call of the server and the worker. With ``--batch N`` the reads go
in RegisterBatch calls of N reads each (``execute``), and the figures are per read.

On this shared 2-core machine, two instances of the same server differ by up to a third
in CPU per read over a dozen rounds (where the scheduler places the three processes of a
read matters as much as the code): compare versions only by effects larger than that.

To compare against another version of the code, give a variant the other checkout's
packages, e.g. ``old:PYTHONPATH=/tmp/old/emulator:/tmp/old/runtime`` (its simulator
workers inherit the path).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import grpc

from npuemu.server.launch import ServerProcess
from xrt.hw.regs import NPU
from xrt.registers import RegRead
from xrt.transport.grpc import GrpcTransport

ECHO_METHOD = "/bench.Echo/Echo"
DEFAULT_VARIANTS = ("a:", "b:")  # two instances of one server: their spread is the noise


def proc_cpu_s(pid: int) -> float:
    """CPU seconds of process `pid`, all its threads: the scheduler's own count in
    nanoseconds (/proc/PID/task/TID/schedstat), not the 10 ms ticks of /proc/PID/stat."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError, ValueError, IndexError):  # a thread just ended
            total += int((task / "schedstat").read_text().split()[0])
    return total / 1e9


def switches(pid: int) -> int:
    """Context switches of process `pid` so far, all threads (voluntary: it slept;
    involuntary: it was preempted)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError, ValueError):
            for line in (task / "status").read_text().splitlines():
                if "ctxt_switches:" in line:
                    total += int(line.split()[1])
    return total


def self_cpu_s() -> float:
    return proc_cpu_s(os.getpid())


def children(pid: int) -> list[int]:
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        out += [int(c) for c in (task / "children").read_text().split()]
    return out


def parse_variant(spec: str) -> tuple[str, dict[str, str]]:
    name, _, env = spec.partition(":")
    pairs = [kv.split("=", 1) for kv in env.split(",") if kv]
    if not name or any(len(p) != 2 for p in pairs):
        raise SystemExit(f"--variant {spec!r}: expected NAME:VAR=VALUE,VAR=VALUE")
    return name, dict(pairs)  # type: ignore[arg-type]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reads", type=int, default=300, help="calls per round and process")
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--variant", action="append", help="NAME:VAR=VALUE,... (repeatable)")
    parser.add_argument(
        "--batch",
        type=int,
        default=0,
        help="reads per RegisterBatch instead of one ReadRegister per read (figures per op)",
    )
    args = parser.parse_args()
    variants = dict(parse_variant(v) for v in args.variant or DEFAULT_VARIANTS)
    n = args.reads
    batch = args.batch
    if batch:
        n -= n % batch  # whole batches; the echo keeps one call per read for the yardstick
    bench = Path(__file__).with_name("bench_registers.py")
    echo_proc = subprocess.Popen(
        [sys.executable, str(bench), "--echo-server"], stdout=subprocess.PIPE, text=True
    )
    servers: dict[str, ServerProcess] = {}
    rows: dict[str, list[float]] = {}

    def record(name: str, seconds: float) -> None:
        rows.setdefault(name, []).append(seconds * 1e6 / n)

    try:
        assert echo_proc.stdout is not None
        port = int(echo_proc.stdout.readline())
        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        echo = channel.unary_unary(ECHO_METHOD)
        clients = {}
        for name, env in variants.items():
            servers[name] = srv = ServerProcess.start(target="buyi", devices=1, env=env)
            t = GrpcTransport(srv.address)
            npu = t.reg_region("npu", NPU)
            addr = npu.base + NPU.register("SCRATCH").offset
            (worker,) = children(srv.proc.pid)
            clients[name] = (t, npu, addr, srv.proc.pid, worker)
            reads = [RegRead(addr)] * batch
            for _ in range(100):  # warm up
                npu.read(addr)
                echo(b"x" * 16)
        load = os.getloadavg()
        order = list(clients.items())
        for _ in range(args.rounds):
            order = order[1:] + order[:1]  # every variant in every place of the round
            c0, e0, w0 = self_cpu_s(), proc_cpu_s(echo_proc.pid), time.perf_counter()
            x0 = switches(echo_proc.pid)
            for _ in range(n):
                echo(b"x" * 16)
            record("echo: server switches", (switches(echo_proc.pid) - x0) / 1e6)
            record("echo: wall", time.perf_counter() - w0)
            record("echo: client cpu", self_cpu_s() - c0)
            record("echo: server cpu", proc_cpu_s(echo_proc.pid) - e0)
            for name, (_, npu, addr, server, worker) in order:
                c0, s0, k0 = self_cpu_s(), proc_cpu_s(server), proc_cpu_s(worker)
                x0, y0 = switches(server), switches(worker)
                w0 = time.perf_counter()
                if batch:
                    for _ in range(n // batch):
                        npu.execute(reads)
                else:
                    for _ in range(n):
                        npu.read(addr)
                record(f"{name}: wall", time.perf_counter() - w0)
                record(f"{name}: client cpu", self_cpu_s() - c0)
                record(f"{name}: server cpu", proc_cpu_s(server) - s0)
                record(f"{name}: worker cpu", proc_cpu_s(worker) - k0)
                # switches per call, shown x1e6 by record(): undo that in the print
                record(f"{name}: server switches", (switches(server) - x0) / 1e6)
                record(f"{name}: worker switches", (switches(worker) - y0) / 1e6)
        for t, *_ in clients.values():
            t.close()
        channel.close()
    finally:
        for srv in servers.values():
            srv.stop()
        echo_proc.kill()
        echo_proc.wait()
    after = os.getloadavg()
    print(
        f"load average {load[0]:.1f} -> {after[0]:.1f} ({os.cpu_count()} cores); "
        f"{args.rounds} rounds of {n} calls per process; medians, us per call"
        + (f" (register reads: per op, in batches of {batch})" if batch else "")
    )
    echo_wall = statistics.median(rows["echo: wall"])
    for name, values in rows.items():
        m = statistics.median(values)
        ratio = f"   = {m / echo_wall:.2f}x the echo" if name.endswith(": wall") else ""
        unit = " per call" if name.endswith("switches") else ""
        print(f"  {name:28s} {m:7.1f}{unit}{ratio}")


if __name__ == "__main__":
    main()
