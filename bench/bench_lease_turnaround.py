"""How long a lease end takes, and so how soon the next holder gets the device.

CloseDevice returns once the device is cleared for the next holder (the request in flight
stopped, the model put back to its pristine state, every flop and SRAM, new memory files
mapped): its duration is the turnaround. Measured with the runtime's public
API on a real server of each target: ``Device.close`` and the next ``Device.open``, median
over ``--repeat`` leases, each of which wrote 1 MiB to udma and to plddr first.

Usage: python bench/bench_lease_turnaround.py [--repeat 20] [--targets buyi,zg330]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

from npuemu.server.launch import ServerProcess
from xrt import Device


def turnaround(target: str, repeat: int) -> tuple[list[float], list[float]]:
    closes, opens = [], []
    data = np.random.default_rng(0).integers(0, 256, 1 << 20, dtype=np.uint8)
    with ServerProcess.start(target=target, devices=1) as srv:
        url = f"{srv.url}/npu0"
        dev = Device.open(url)
        for _ in range(repeat + 1):  # the first lease warms up
            for region in ("udma", "plddr"):
                mem = dev.get_mem_region(region)
                mem.write(mem.base, data)
            t0 = time.perf_counter()
            dev.close()
            t1 = time.perf_counter()
            dev = Device.open(url)
            t2 = time.perf_counter()
            closes.append(t1 - t0)
            opens.append(t2 - t1)
        dev.close()
    return closes[1:], opens[1:]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--targets", default="buyi,zg330")
    args = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f}")
    for target in args.targets.split(","):
        closes, opens = turnaround(target, args.repeat)
        print(
            f"{target}: close (lease end, clearing) median {statistics.median(closes) * 1e3:.1f} ms"
            f" (max {max(closes) * 1e3:.1f}); next open median"
            f" {statistics.median(opens) * 1e3:.1f} ms ({args.repeat} leases)"
        )
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
