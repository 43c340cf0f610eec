"""What waveform support costs: a plddr round trip (write then read back through the DMA
engine) on an untraced model, on the traced model (`--waves`) with no window open, and
with a window recording.

    .venv/bin/python bench/bench_waves.py [--mib 4] [--runs 5]

Prints the median wall time of each, the ratios to the untraced model (same run), and
the FST bytes per simulated cycle of a recorded window.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from npuemu.server.launch import ServerProcess
from xrt import Device


def round_trips(url: str, nbytes: int, runs: int, record: bool) -> tuple[float, list]:
    data = np.random.default_rng(0).integers(0, 256, nbytes, dtype=np.uint8)
    back = np.empty_like(data)
    times, windows = [], []
    with Device.open(url) as dev:
        chunk = dev.default_mem_region().malloc(nbytes)
        for _ in range(runs):
            if record:
                dev.transport.start_waves()
            t0 = time.perf_counter()
            chunk.write(data)
            chunk.read(back)
            times.append(time.perf_counter() - t0)
            if record:
                windows.append(dev.transport.stop_waves())
            assert np.array_equal(back, data)
    return statistics.median(times), windows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=int, default=4, help="payload of one round trip")
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    nbytes = args.mib << 20
    with tempfile.TemporaryDirectory() as tmp:
        with ServerProcess.start() as plain:
            base, _ = round_trips(f"{plain.url}/npu0", nbytes, args.runs, False)
        with ServerProcess.start(extra_args=("--waves", str(Path(tmp)))) as traced:
            idle, _ = round_trips(f"{traced.url}/npu0", nbytes, args.runs, False)
            rec, windows = round_trips(f"{traced.url}/npu0", nbytes, args.runs, True)
        w = windows[-1]
        cycles = w.last_cycle - w.first_cycle
        print(f"plddr round trip of {args.mib} MiB, median of {args.runs}:")
        print(f"  untraced model          {base * 1e3:8.1f} ms   1.00x")
        print(f"  traced, no window       {idle * 1e3:8.1f} ms   {idle / base:.2f}x")
        print(f"  traced, window open     {rec * 1e3:8.1f} ms   {rec / base:.2f}x")
        print(
            f"  one window: {cycles} cycles, {w.size_bytes / 1e6:.2f} MB FST "
            f"({w.size_bytes / cycles:.1f} B/cycle)"
        )


if __name__ == "__main__":
    main()
