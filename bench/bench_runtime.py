"""Figures of the runtime's data model (no simulator): allocator and tensor transfer speed.

    .venv/bin/python bench/bench_runtime.py

Prints medians of several runs:

- malloc+free pairs per second with 10,000 live chunks, on a device region (the best-fit
  range allocator) and on the host region (numpy buffers), in three patterns: free right
  away (LIFO), free a random live chunk (keeps 10,000 live and fragments the free list),
  and let the chunk free itself when its last reference goes (auto-free);
- the round trip numpy -> host chunk -> numpy of a 64 MiB float32 tensor, in GB/s of tensor
  bytes per round trip (``Tensor.from_numpy(a).numpy()``: allocate, copy in, copy out),
  plus the same into an existing tensor and the zero-copy view.
"""

from __future__ import annotations

import gc
import random
import statistics
import sys
import time
from collections.abc import Callable

import numpy as np

from xrt import HostDevice, HostMemRegion, MemRegion, Tensor
from xrt.testing.memory_transport import MemoryMemRegion

LIVE = 10_000
PAIRS = 20_000
RUNS = 5


def median_time(fn: Callable[[], None], runs: int) -> float:
    times = []
    for _ in range(runs):
        gc.collect()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def alloc_rates(make: Callable[[], MemRegion]) -> dict[str, float]:
    """Pairs per second of each pattern, each on a fresh region with LIVE live chunks."""
    rng = random.Random(1)
    sizes = [rng.randrange(64, 4096) for _ in range(PAIRS)]
    victims = [rng.randrange(LIVE) for _ in range(PAIRS)]

    def populated() -> tuple[MemRegion, list]:
        region = make()
        return region, [region.malloc(rng.randrange(64, 4096), True, 64) for _ in range(LIVE)]

    def lifo(region: MemRegion, live: list) -> None:
        malloc = region.malloc
        for n in sizes:
            malloc(n, True, 64).free()

    def random_replace(region: MemRegion, live: list) -> None:
        malloc = region.malloc
        for n, v in zip(sizes, victims, strict=True):
            live[v].free()
            live[v] = malloc(n, True, 64)

    def auto_free(region: MemRegion, live: list) -> None:
        malloc = region.malloc
        for n in sizes:
            malloc(n, True, 64)  # dropped at once: freed by its finalizer

    rates = {}
    for name, pattern in (("lifo", lifo), ("random", random_replace), ("auto-free", auto_free)):
        region, live = populated()
        rates[name] = PAIRS / median_time(lambda: pattern(region, live), RUNS)  # noqa: B023
        assert region.mem_manager.chunk_count == LIVE
    return rates


def tensor_round_trip() -> dict[str, float]:
    nbytes = 64 << 20
    arr = np.random.default_rng(0).standard_normal(nbytes // 4).astype(np.float32)
    HostDevice.default()  # not part of the measurement
    assert np.array_equal(Tensor.from_numpy(arr).numpy(), arr)
    out = {}
    out["from_numpy + numpy"] = nbytes / median_time(lambda: Tensor.from_numpy(arr).numpy(), 7)
    t = Tensor.from_numpy(arr)
    out["copy_data + numpy (existing tensor)"] = nbytes / median_time(
        lambda: t.copy_data(arr).numpy(), 7
    )
    out["copy_data + numpy(copy=False)"] = nbytes / median_time(
        lambda: t.copy_data(arr).numpy(copy=False), 7
    )
    return {k: v / 1e9 for k, v in out.items()}


def main() -> None:
    print(f"Python {sys.version.split()[0]}, numpy {np.__version__}; medians of {RUNS}+ runs")
    print(f"\nmalloc+free pairs per second with {LIVE:,} live chunks ({PAIRS:,} pairs a run)")
    regions: dict[str, Callable[[], MemRegion]] = {
        "device region (best-fit allocator)": lambda: MemoryMemRegion(
            "plddr", 0, 1 << 30, host_visible=False
        ),
        "host region (numpy buffers)": lambda: HostMemRegion("host"),
    }
    for name, make in regions.items():
        rates = alloc_rates(make)
        cells = ", ".join(f"{k} {v:,.0f}/s" for k, v in rates.items())
        print(f"  {name:36s} {cells}")
    print("\nTensor round trip numpy -> host chunk -> numpy, 64 MiB float32 (GB/s of tensor)")
    for name, gbs in tensor_round_trip().items():
        print(f"  {name:36s} {gbs:6.2f} GB/s")


if __name__ == "__main__":
    main()
