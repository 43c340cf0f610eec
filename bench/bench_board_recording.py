"""What recording a board session client-side costs (``axi://...&record=FILE``), measured on
an ``axi://`` device over a sparse file laid out like /dev/mem (no board here: a file's
accesses are faster than a board's uncached bus, so the ratios are upper bounds).

Per access kind, the median time per access without and with ``record=``: single register
reads and writes, a 12-op batch (the DMA programming sequence's size), a poll that matches
at once, and host-visible memory writes and reads of 1 MiB; then the recording's size.

    python bench/bench_board_recording.py [--n 20000] [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from xrt import Device
from xrt.hw.regops import RegRead, RegWrite
from xrt.hw.regs import DMA, NPU
from xrt.hw.targets import target

NPU_BASE, DMA_BASE = target("buyi").npu_base, target("buyi").dma_base
REG = DMA_BASE + DMA.offset("SRC_LO")
STATUS = DMA_BASE + DMA.offset("STATUS")


def board_file(path: Path) -> Path:
    """A sparse file holding the ID registers the device probes."""
    with path.open("wb") as f:
        f.truncate(DMA_BASE + 0x1000)
    fd = os.open(path, os.O_RDWR)
    try:
        for addr, value in (
            (NPU_BASE + NPU.offset("MAGIC"), NPU.register("MAGIC").reset),
            (NPU_BASE + NPU.offset("TARGET"), 1),
            (DMA_BASE + DMA.offset("MAGIC"), DMA.register("MAGIC").reset),
        ):
            os.pwrite(fd, value.to_bytes(4, "little"), addr)
    finally:
        os.close(fd)
    return path


def per_access(fn: Callable[[], None], n: int, runs: int) -> float:
    """Median seconds per call of `fn` over `runs` runs of `n` calls."""
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        times.append((time.perf_counter() - t0) / n)
    return statistics.median(times)


def measure(url: str, n: int, runs: int) -> dict[str, float]:
    out = {}
    with Device.open(url) as dev:
        regs, udma = dev.get_reg_region("dma"), dev.udma
        batch = [RegWrite(REG, i) for i in range(11)] + [RegRead(REG)]
        mib = b"\xa5" * (1 << 20)
        back = bytearray(len(mib))
        out["register read"] = per_access(lambda: regs.read(REG), n, runs)
        out["register write"] = per_access(lambda: regs.write(REG, 5), n, runs)
        out["12-op batch"] = per_access(lambda: regs.execute(batch), n // 10, runs)
        out["poll (matches at once)"] = per_access(lambda: regs.poll(STATUS, 1, 0), n // 10, runs)
        out["udma write 1 MiB"] = per_access(lambda: udma.write(udma.base, mib), 20, runs)
        out["udma read 1 MiB"] = per_access(lambda: udma.read(back, udma.base), 20, runs)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=20_000, help="register accesses per run")
    p.add_argument("--runs", type=int, default=5)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        board = board_file(Path(tmp) / "mem.bin")
        plain = measure(f"axi://b?file={board}", args.n, args.runs)
        rec = Path(tmp) / "session.npurec"
        recorded = measure(f"axi://b?file={board}&record={rec}", args.n, args.runs)
        size = rec.stat().st_size
    print(f"{'access':<24} {'plain':>12} {'recorded':>12} {'ratio':>7}")
    for what, t in plain.items():
        r = recorded[what]
        print(f"{what:<24} {t * 1e6:>9.2f} us {r * 1e6:>9.2f} us {r / t:>6.1f}x")
    print(f"recording: {size / (1 << 20):.1f} MiB; load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
