"""Figures of the runtime over gRPC: runtime -> server -> worker -> RTL, one machine.

    .venv/bin/python bench/bench_runtime_grpc.py [--quick]

Starts one ``npu-emu serve`` (Buyi, one device) and prints medians of several runs:

- register round trip: one ReadRegister (p50, p99), and the cost per op of a batch of 64
  reads (one RegisterBatch);
- host-visible memory (``udma``, 64 MiB): write and read MB/s, streamed over gRPC (1 MiB
  messages) and on the local fast path (the shared-memory file mapped by the client);
- ``plddr`` round trip (write then read back, staged through the udma bounce buffer by the
  DMA engine): MB/s of payload, and simulated bytes per cycle (payload moved both ways over
  the cycles the server reports), for local/streaming x double/single buffering;
- a direct DMA copy udma -> plddr (no staging), bytes per cycle: the engine's own rate.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np

from npuemu.server.launch import ServerProcess
from xrt import Device, RegRead
from xrt.npu_device import NpuDevice
from xrt.transport.grpc import GrpcTransport

MIB = 1 << 20


def median_s(fn: Callable[[], object], runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def registers(url: str, n: int) -> None:
    with Device.open(url) as dev:
        npu = dev.get_reg_region("npu")
        addr = npu.regs.SCRATCH.address
        for _ in range(20):
            npu.read(addr)
        lat = []
        for _ in range(n):
            t0 = time.perf_counter()
            npu.read(addr)
            lat.append(time.perf_counter() - t0)
        lat.sort()
        p50, p99 = lat[len(lat) // 2], lat[min(len(lat) - 1, int(len(lat) * 0.99))]
        ops = [RegRead(addr)] * 64
        batch = median_s(lambda: npu.execute(ops), max(20, n // 10))
        print(f"register read, one RPC:      p50 {p50 * 1e6:7.0f} us   p99 {p99 * 1e6:7.0f} us")
        print(
            f"batch of 64 reads:           {batch * 1e3:7.2f} ms = {batch / 64 * 1e6:5.1f} us/op "
            f"({p50 / (batch / 64):.0f}x cheaper per op)"
        )


def udma(address: str, runs: int, local: bool) -> None:
    t = GrpcTransport(address, local=local)
    try:
        assert t.local_fast_path == local, t.local_note
        region = t.host_region("udma")
        n = region.size
        data = np.random.default_rng(1).integers(0, 256, n, dtype=np.uint8)
        out = np.empty_like(data)
        w = median_s(lambda: region.write(region.base, data), runs)
        r = median_s(lambda: region.read(out, region.base), runs)
        assert np.array_equal(out, data)
        path = "local fast path" if local else "gRPC streaming "
        print(
            f"udma {n // MIB} MiB, {path}:  write {n / w / 1e6:7.0f} MB/s   "
            f"read {n / r / 1e6:7.0f} MB/s"
        )
    finally:
        t.close()


def plddr(url: str, size: int, runs: int, query: str) -> None:
    with Device.open(f"{url}?{query}") as dev:
        assert isinstance(dev, NpuDevice)
        region = dev.get_mem_region("plddr")
        data = np.random.default_rng(2).integers(0, 256, size, dtype=np.uint8)
        out = np.empty_like(data)
        walls, per_cycle = [], []
        for _ in range(runs):
            c0, t0 = dev.cycles, time.perf_counter()
            region.write(region.base + 64, data)
            region.read(out, region.base + 64)
            walls.append(time.perf_counter() - t0)
            assert dev.cycles is not None and c0 is not None
            per_cycle.append(2 * size / (dev.cycles - c0))
            assert np.array_equal(out, data)
        wall = statistics.median(walls)
        print(
            f"plddr {size // MIB:2d} MiB round trip, {query:28s}: {2 * size / wall / 1e6:6.1f} MB/s"
            f"  ({wall:5.2f} s)   {statistics.median(per_cycle):5.2f} B/cycle simulated"
        )


def direct_dma(url: str, size: int) -> None:
    with Device.open(url) as dev:
        assert isinstance(dev, NpuDevice)
        udma, pl = dev.get_mem_region("udma"), dev.get_mem_region("plddr")
        src = udma.malloc(size)
        c0, t0 = dev.cycles, time.perf_counter()
        pl.memcpy(pl.base, udma, src.begin, size)
        wall = time.perf_counter() - t0
        assert dev.cycles is not None and c0 is not None
        cycles = dev.cycles - c0
        print(
            f"direct DMA udma -> plddr {size // MIB} MiB: {size / cycles:5.2f} B/cycle, "
            f"{cycles / wall / 1e6:4.2f} Mcycles/s simulated, {size / wall / 1e6:5.1f} MB/s"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer runs, smaller transfers")
    args = ap.parse_args()
    runs = 2 if args.quick else 3
    srv = ServerProcess.start(target="buyi", devices=1)
    try:
        print(f"server {srv.url} (Buyi), started in {srv.started_s:.1f} s\n")
        registers(srv.url, 200 if args.quick else 1000)
        udma(srv.address, runs, local=False)
        udma(srv.address, runs, local=True)
        size = 16 * MIB
        for query in (
            "local=1&double_buffer=1",
            "local=1&double_buffer=0",
            "local=0&double_buffer=1",
            "local=0&double_buffer=0",
        ):
            plddr(srv.url, size, runs, query)
        if not args.quick:
            plddr(srv.url, 64 * MIB, 1, "local=1&double_buffer=1&bounce=16777216")
        direct_dma(srv.url, 16 * MIB)
    finally:
        srv.stop()


if __name__ == "__main__":
    main()
