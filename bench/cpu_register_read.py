"""CPU time per register read in each process (client, server, worker) beside a bare gRPC
unary echo's (client, echo server), for servers started differently, interleaved.

    .venv/bin/python bench/cpu_register_read.py [--reads 300] [--rounds 12]
        [--variant NAME:VAR=VALUE,VAR=VALUE ...]

Starts the echo of `bench_registers.py` and one `npu-emu serve` per variant (its extra
environment after the colon; default: the server as installed, and the same with
asyncio's own event loop, ``NPU_EMU_EVENT_LOOP=asyncio``). Each round makes `--reads`
echoes, then `--reads` register reads (one ReadRegister each) on every server in turn,
reading each process's user+system CPU time from /proc before and after. Prints the
medians over the rounds, in microseconds per call, and the wall time per call with its
ratio to the echo's. On a shared machine the wall times move with the load; CPU times
much less, and rounds interleave the variants so that all see the same load.

To compare against another version of the code, give a variant the other checkout's
packages, e.g. ``old:PYTHONPATH=/tmp/old/emulator:/tmp/old/runtime`` (its simulator
workers inherit the path).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import grpc

from npuemu.server.launch import ServerProcess
from xrt._generated.regmap_npu import NPU
from xrt.transport.grpc import GrpcTransport

ECHO_METHOD = "/bench.Echo/Echo"
DEFAULT_VARIANTS = ("installed:", "asyncio-loop:NPU_EMU_EVENT_LOOP=asyncio")
_TICK = os.sysconf("SC_CLK_TCK")


def proc_cpu_s(pid: int) -> float:
    """User + system CPU seconds of process `pid` (all its threads)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def self_cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


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
    args = parser.parse_args()
    variants = dict(parse_variant(v) for v in args.variant or DEFAULT_VARIANTS)
    n = args.reads
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
            for _ in range(100):  # warm up
                npu.read(addr)
                echo(b"x" * 16)
        load = os.getloadavg()
        for _ in range(args.rounds):
            c0, e0, w0 = self_cpu_s(), proc_cpu_s(echo_proc.pid), time.perf_counter()
            for _ in range(n):
                echo(b"x" * 16)
            record("echo: wall", time.perf_counter() - w0)
            record("echo: client cpu", self_cpu_s() - c0)
            record("echo: server cpu", proc_cpu_s(echo_proc.pid) - e0)
            for name, (_, npu, addr, server, worker) in clients.items():
                c0, s0, k0 = self_cpu_s(), proc_cpu_s(server), proc_cpu_s(worker)
                w0 = time.perf_counter()
                for _ in range(n):
                    npu.read(addr)
                record(f"{name}: wall", time.perf_counter() - w0)
                record(f"{name}: client cpu", self_cpu_s() - c0)
                record(f"{name}: server cpu", proc_cpu_s(server) - s0)
                record(f"{name}: worker cpu", proc_cpu_s(worker) - k0)
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
    )
    echo_wall = statistics.median(rows["echo: wall"])
    for name, values in rows.items():
        m = statistics.median(values)
        ratio = f"   = {m / echo_wall:.2f}x the echo" if name.endswith(": wall") else ""
        print(f"  {name:28s} {m:7.1f}{ratio}")


if __name__ == "__main__":
    main()
