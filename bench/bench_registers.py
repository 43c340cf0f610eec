"""Register access figures with a bare gRPC unary echo on the same machine as the
yardstick, all in one run: the local register ring (runtime -> shared memory -> the
simulator's main loop -> RTL), the remote path (runtime -> gRPC -> server -> worker -> RTL),
and a C driver on the ring (bench/npu_read_bench.c under `npu-emu attach`).

    .venv/bin/python bench/bench_registers.py [--quick]

Prints medians of:

- a bare Python gRPC unary echo (grpc.aio server in its own process, sync client: the
  shapes the device server and the runtime use), round trip p50/p99;
- one register read (ReadRegister) round trip p50/p99, measured interleaved with the echo
  and with a gRPC health check (grpc.health.v1 Check) to the device server itself, so all
  see the same load, and their ratios;
- the cost per op of batches of 64 and 1024 reads (RegisterBatch);
- a poll loop of 10,000 reads: the driver's loop (one ReadRegister each), and the same
  reads in batches of 1024;
- the simulated cycles per access (from the cycle counts the server reports), and the
  model's idle speed two ways: the cycles of a 1024-read batch over its wall time (what
  a batch gets), and a poll that never matches for 2 million cycles (the simulation
  alone: one trigger, no Python while it runs);
- the load average before and after (the machine is shared: ratios from one loop are the
  figures to read);
- the same register figures with every request through the worker's Python loop (the path
  before the server's ring: serve --no-server-ring) and with the worker's cocotbext-axi
  master (the path before the RTL master: serve --register-master cocotbext), in the same run;
- with the register ring (a client on the server's machine, the default): one read and the
  batches again, and a C driver's read p50/p99.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from npuemu.server.launch import ServerProcess
from xrt import RegRead
from xrt.hw.regs import NPU
from xrt.hw.wire import RegisterStatus, pb
from xrt.transport.grpc import GrpcTransport

ECHO_METHOD = "/bench.Echo/Echo"
IDLE_CYCLES = 2_000_000


def echo_server() -> None:
    """Serve the echo on a free loopback port; print the port; run until killed."""
    import asyncio

    async def serve() -> None:
        server = grpc.aio.server()
        handler = grpc.method_handlers_generic_handler(
            "bench.Echo",
            {"Echo": grpc.unary_unary_rpc_method_handler(_echo)},
        )
        server.add_generic_rpc_handlers((handler,))
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        print(port, flush=True)
        await server.wait_for_termination()

    asyncio.run(serve())


async def _echo(request: bytes, context: object) -> bytes:
    return request


def percentiles(samples: list[float]) -> tuple[float, float]:
    s = sorted(samples)
    return s[len(s) // 2], s[min(len(s) - 1, int(len(s) * 0.99))]


def median_s(fn: Callable[[], object], runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def measure(
    address: str, echo: Callable[[bytes], bytes], n: int, label: str, ring: bool = False
) -> dict:
    t = GrpcTransport(address, ring=ring)
    assert (t.ring is not None) == ring, t.ring_note
    health_channel = grpc.insecure_channel(address)
    check = health_pb2_grpc.HealthStub(health_channel).Check
    health_request = health_pb2.HealthCheckRequest()
    try:
        npu = t.reg_region("npu", NPU)
        addr = npu.base + NPU.register("SCRATCH").offset
        for _ in range(50):  # warm up all paths
            npu.read(addr)
            echo(b"x" * 16)
            check(health_request)
        lat, lat_echo, lat_health = [], [], []
        for _ in range(n):
            t0 = time.perf_counter()
            echo(b"x" * 16)
            t1 = time.perf_counter()
            check(health_request)
            t2 = time.perf_counter()
            npu.read(addr)
            t3 = time.perf_counter()
            lat_echo.append(t1 - t0)
            lat_health.append(t2 - t1)
            lat.append(t3 - t2)
        out: dict = {
            "read": percentiles(lat),
            "echo": percentiles(lat_echo),
            "health": percentiles(lat_health),
        }
        # One read after another (a driver's poll loop): no echo between them, so a
        # simulator that serves the ring has not gone to sleep between two reads.
        back_to_back = []
        for _ in range(n):
            t0 = time.perf_counter()
            npu.read(addr)
            back_to_back.append(time.perf_counter() - t0)
        out["read_back_to_back"] = percentiles(back_to_back)
        runs = max(10, n // 20)
        for size in (64, 1024):
            ops = [RegRead(addr)] * size
            out[f"batch{size}"] = median_s(lambda ops=ops: npu.execute(ops), runs) / size
        # Simulated cycles per access: two batches, the difference of the reported counts.
        ops = [RegRead(addr)] * 1024
        npu.execute(ops)
        c0 = t.cycles
        t0 = time.perf_counter()
        npu.execute(ops)
        wall = time.perf_counter() - t0
        out["cycles_per_read"] = (t.cycles - c0) / 1024
        out["batch_cycles_per_s"] = (t.cycles - c0) / wall
        # The model alone: a poll of SCRATCH (0 after reset) for a bit that never comes.
        poll = pb.RegisterOp(
            poll=pb.RegisterPoll(address=addr, mask=1, expected=1, max_cycles=IDLE_CYCLES)
        )
        request = pb.RegisterBatchRequest(lease_id=t.lease_id, ops=[poll])
        speeds = []
        for _ in range(3 if label == "regbus" else 0):  # the RTL model's figure (no ring)
            c0 = t.cycles
            t0 = time.perf_counter()
            reply = t._stub.RegisterBatch(request, timeout=600)
            speeds.append((reply.cycles - c0) / (time.perf_counter() - t0))
            assert reply.results[-1].status == RegisterStatus.POLL_TIMEOUT, reply
        out["idle_cycles_per_s"] = statistics.median(speeds) if speeds else 0.0
        t0 = time.perf_counter()
        for _ in range(10_000):
            npu.read(addr)
        out["poll_loop"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        for _ in range(10_000 // 1024):
            npu.execute(ops)
        npu.execute(ops[: 10_000 % 1024])
        out["poll_batched"] = time.perf_counter() - t0
    finally:
        health_channel.close()
        t.close()
    print(f"[{label}] done", flush=True)
    return out


def c_driver_reads(url: str, n: int) -> str:
    """bench/npu_read_bench.c (built here) under `npu-emu attach`: its printed line."""
    import tempfile
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory() as tmp:
        exe = Path(tmp) / "npu_read_bench"
        sources = [root / "bench" / "npu_read_bench.c", root / "src" / "npu_mmio.c"]
        subprocess.run(
            ["cc", "-O2", "-std=gnu11", "-DNPU_MMIO_EMU", "-I", str(root / "include"),
             *map(str, sources), "-o", str(exe)],
            check=True,
        )  # fmt: skip
        run = subprocess.run(
            [sys.executable, "-m", "npuemu", "attach", url, "--", str(exe), str(n)],
            capture_output=True,
            text=True,
            check=True,
        )
    print("[c driver] done", flush=True)
    return run.stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer samples")
    parser.add_argument("--echo-server", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.echo_server:
        echo_server()
        return
    n = 300 if args.quick else 2000
    load_before = os.getloadavg()
    proc = subprocess.Popen(
        [sys.executable, __file__, "--echo-server"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        echo = channel.unary_unary(ECHO_METHOD)
        results = {}
        # The remote path as it is (the server's ring into the simulator), as it was (every
        # request through the worker's Python loop), and with cocotbext-axi's master.
        configs = {
            "regbus": (),
            "worker": ("--no-server-ring",),
            "cocotbext": ("--register-master", "cocotbext"),
        }
        for name, serve_args in configs.items():
            srv = ServerProcess.start(target="buyi", devices=1, extra_args=serve_args)
            try:
                results[name] = measure(srv.address, echo, n, name)
                if name == "regbus":
                    results["ring"] = measure(srv.address, echo, n, "ring", ring=True)
                    results["c"] = c_driver_reads(srv.url, n)
            finally:
                srv.stop()
        channel.close()
    finally:
        proc.kill()
        proc.wait()

    new, old, ring = results["regbus"], results["cocotbext"], results["ring"]
    loop = results["worker"]
    us = 1e6
    load_after = os.getloadavg()
    print(
        f"\nload average (1, 5, 15 min): before {' '.join(f'{x:.1f}' for x in load_before)}, "
        f"after {' '.join(f'{x:.1f}' for x in load_after)} ({os.cpu_count()} cores)"
    )
    e50, e99 = new["echo"]
    h50, h99 = new["health"]
    print(f"\nbare gRPC unary echo:            p50 {e50 * us:6.0f} us   p99 {e99 * us:6.0f} us")
    print(f"health check, the device server: p50 {h50 * us:6.0f} us   p99 {h99 * us:6.0f} us")
    for name, r in (("server ring", new), ("worker loop", loop), ("cocotbext-axi", old)):
        p50, p99 = r["read"]
        print(
            f"register read, one RPC ({name:13s}): p50 {p50 * us:6.0f} us   "
            f"p99 {p99 * us:6.0f} us   = {p50 / r['echo'][0]:.2f}x the echo, "
            f"{p50 / r['health'][0]:.2f}x the health check (p50, same loop)"
        )
    for size in (64, 1024):
        key = f"batch{size}"
        print(
            f"batch of {size:4d} reads, per op:   server ring {new[key] * us:6.1f} us   "
            f"worker loop {loop[key] * us:6.1f} us   "
            f"cocotbext-axi {old[key] * us:6.1f} us   ({old[key] / new[key]:.1f}x)"
        )
    print(
        f"poll loop of 10,000 reads:       one RPC each {new['poll_loop']:.2f} s "
        f"({10_000 / new['poll_loop']:.0f}/s), in batches of 1024 {new['poll_batched']:.2f} s "
        f"(cocotbext-axi: {old['poll_loop']:.2f} s, {old['poll_batched']:.2f} s)"
    )
    print(
        f"simulated cycles per read:       RTL master {new['cycles_per_read']:.1f}   "
        f"cocotbext-axi {old['cycles_per_read']:.1f}"
    )
    r50, r99 = ring["read"]
    b50, b99 = ring["read_back_to_back"]
    print(
        f"\nregister ring (local): one read back to back p50 {b50 * us:.1f} us p99 "
        f"{b99 * us:.1f} us; after an echo (the simulator asleep) p50 {r50 * us:.1f} us p99 "
        f"{r99 * us:.1f} us; batch of 64 {ring['batch64'] * us:.2f} us per op, of 1024 "
        f"{ring['batch1024'] * us:.2f} us per op"
    )
    g50, _ = new["read_back_to_back"]
    print(f"remote path, one read back to back: p50 {g50 * us:.0f} us")
    print(f"register ring, C driver (npu_mmio.h): {results['c']}")
    print(
        f"remote path / ring, one read: {new['read'][0] / r50:.0f}x; "
        f"batch of 64: {new['batch64'] / ring['batch64']:.1f}x"
    )
    print(
        f"idle model speed:                {new['batch_cycles_per_s'] / 1e3:.0f} kcycles/s over "
        f"a 1024-read batch (cycles / its wall time), {new['idle_cycles_per_s'] / 1e3:.0f} "
        f"kcycles/s in a {IDLE_CYCLES:,}-cycle poll (the simulation alone)"
    )


if __name__ == "__main__":
    main()
