"""The embedded ``sim://buyi`` against ``grpc://`` on the same machine, in one run.

    .venv/bin/python bench/bench_sim_device.py [--runs N]

Opens ``sim://buyi`` (a simulation worker of this process, no server) and a device of one
``npu-emu serve`` on loopback (local fast path and register ring: the fastest ``grpc://``
there is), and prints for each, as medians:

- open: from ``Device.open`` to a usable device (the model built and cached already; the
  server's worker started before, with the server);
- one register read (``npu.SCRATCH``);
- a 1 MiB ``plddr`` round trip: write then read back, staged through ``udma`` by the DMA
  engine (the simulated cycles it took are the same on both: the RTL's).

Both devices are measured in alternating rounds of one run, so the ratios grpc / sim hold
on a shared machine whose load changes.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from npuemu.server.launch import ServerProcess
from xrt import Device
from xrt.npu_device import NpuDevice

MIB = 1 << 20


def open_timed(url: str) -> tuple[NpuDevice, float]:
    t0 = time.perf_counter()
    dev = Device.open(url)
    assert isinstance(dev, NpuDevice)
    return dev, time.perf_counter() - t0


class Probe:
    """One device's samples: register reads and 1 MiB plddr round trips."""

    def __init__(self, dev: NpuDevice) -> None:
        self.dev = dev
        self.npu = dev.get_reg_region("npu")
        self.addr = self.npu.regs.SCRATCH.address
        self.plddr = dev.get_mem_region("plddr")
        self.data = np.random.default_rng(1).integers(0, 256, MIB, dtype=np.uint8)
        self.back = np.empty_like(self.data)
        self.reads: list[float] = []
        self.trips: list[float] = []
        self.cycles: list[int] = []

    def read_round(self, n: int) -> None:
        read = self.npu.read
        for _ in range(n):
            t0 = time.perf_counter()
            read(self.addr)
            self.reads.append(time.perf_counter() - t0)

    def trip(self) -> None:
        c0 = self.dev.cycles or 0
        t0 = time.perf_counter()
        self.plddr.write(self.plddr.base, self.data)
        self.plddr.read(self.back, self.plddr.base)
        self.trips.append(time.perf_counter() - t0)
        self.cycles.append((self.dev.cycles or 0) - c0)
        assert np.array_equal(self.back, self.data)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20, help="rounds, alternating the devices")
    args = parser.parse_args()
    with ServerProcess.start(devices=1) as srv:
        sim_dev, sim_open = open_timed("sim://buyi")
        grpc_dev, grpc_open = open_timed(srv.url)
        try:
            probes = [Probe(sim_dev), Probe(grpc_dev)]
            for p in probes:  # warm up: the pages of the memory files, the spin heuristics
                p.read_round(100)
                p.trip()
                for samples in (p.reads, p.trips, p.cycles):
                    samples.clear()
            # Alternating rounds: a machine that gets busier meanwhile slows both alike.
            for _ in range(args.runs):
                for p in probes:
                    p.read_round(100)
                    p.trip()
        finally:
            sim_dev.close()
            grpc_dev.close()
    sim, grpc = probes
    med = statistics.median
    rows = (
        ("open (model cached)", sim_open, grpc_open, 1.0, "s"),
        ("register read", med(sim.reads), med(grpc.reads), 1e6, "us"),
        ("1 MiB plddr round trip", med(sim.trips), med(grpc.trips), 1e3, "ms"),
    )
    print(f"{'':26} {'sim://buyi':>12} {'grpc:// local':>14} {'grpc / sim':>11}")
    for label, s_val, g_val, scale, unit in rows:
        print(
            f"{label:26} {s_val * scale:9.2f} {unit:2} {g_val * scale:11.2f} {unit:2} "
            f"{g_val / s_val:10.2f}x"
        )
    print(
        f"{'  simulated cycles':26} {med(sim.cycles):12.0f} {med(grpc.cycles):14.0f}"
        f"   ({2 * MIB / med(sim.trips) / 1e6:.1f} MB/s of payload on sim://)"
    )


if __name__ == "__main__":
    main()
