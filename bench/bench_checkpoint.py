"""Device checkpoints: save and restore times and file sizes with 64 MiB of plddr touched
(random, so nothing compresses: the worst case), the same with compressible contents, and
how fast a lease gets a warm device from ``serve --warm``.

    python bench/bench_checkpoint.py [--target buyi] [--repeat 5]

Medians of --repeat runs, one server, real processes (docs/performance.md keeps the table).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from npuemu.server.launch import ServerProcess
from xrt import Device
from xrt.hw import dma
from xrt.hw.config import TargetConfig
from xrt.hw.targets import target

MIB = 1 << 20


def _fill(dev: Device, cfg, random: bool) -> None:
    """64 MiB of plddr (two DMA copies of a 32 MiB udma block) and 32 MiB of udma."""
    udma, plddr = cfg.memory("udma"), cfg.memory("plddr")
    n = 32 * MIB
    if random:
        data = np.random.default_rng(1).integers(0, 256, n, dtype=np.uint8)
    else:  # tensors of small integers, as quantized activations often are
        data = (np.arange(n, dtype=np.uint32) % 7).astype(np.uint8)
    dev.get_mem_region("udma").write(udma.base, data.tobytes())
    regs = dev.get_reg_region("dma")
    for off in (0, n):
        ops = dma.program_ops(cfg.dma_base, dma.DmaTransfer(udma.base, plddr.base + off, n))
        out = dma.decode_readout(regs.execute([*ops, *dma.readout_ops(cfg.dma_base, 120)])[-4:-1])
        assert out.ok, out.describe()


def _median(xs: list[float]) -> float:
    return statistics.median(xs)


def main() -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--target", default="buyi")
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args()
    cfg = target(args.target)
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        # Both servers seal with one key, as a farm's do: the warm server trusts the file.
        key = folder / "npu-emu.key"
        key.write_bytes(os.urandom(32))
        key.chmod(0o600)
        keyed = ("--checkpoint-key-file", str(key))
        _run(cfg, folder, keyed, args.repeat)
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0


def _run(cfg: TargetConfig, folder: Path, keyed: tuple[str, ...], repeat: int) -> None:
    with ServerProcess.start(target=cfg.name, devices=1, extra_args=keyed) as srv:
        for random in (True, False):
            kind = "random" if random else "compressible"
            path = folder / f"{kind}.npuckpt"
            saves, restores = [], []
            with Device.open(f"{srv.url}/npu0") as dev:
                _fill(dev, cfg, random)
                for _ in range(repeat):
                    t0 = time.perf_counter()
                    dev.checkpoint(path)
                    saves.append(time.perf_counter() - t0)
                    t0 = time.perf_counter()
                    dev.restore(path)
                    restores.append(time.perf_counter() - t0)
            size = path.stat().st_size
            print(
                f"{cfg.name} {kind:12s} 64 MiB plddr + 32 MiB udma touched: "
                f"save {_median(saves):.3f} s, restore {_median(restores):.3f} s, "
                f"file {size / MIB:.1f} MiB"
            )
        warm = folder / "random.npuckpt"
        cold_open, warm_open, warm_turn, cold_turn = [], [], [], []
        for flag, opens, turns in ((False, cold_open, cold_turn), (True, warm_open, warm_turn)):
            extra = ("--warm", str(warm), *keyed) if flag else keyed
            with ServerProcess.start(target=cfg.name, devices=1, extra_args=extra) as s2:
                closed = None
                for _ in range(repeat + 1):
                    t0 = time.perf_counter()
                    dev = Device.open(f"{s2.url}/npu0")  # retries while the device is being reset
                    t1 = time.perf_counter()
                    if closed is not None:
                        turns.append(t1 - closed)
                        opens.append(t1 - t0)
                    dev.get_reg_region("npu").read(0x40, relative=True)
                    closed = time.perf_counter()  # CloseDevice returns once the device is ready
                    dev.close()
        print(
            f"{cfg.name} OpenDevice to a device ready: cold {_median(cold_open) * 1e3:.0f} ms, "
            f"warm (96 MiB touched) {_median(warm_open) * 1e3:.0f} ms; close to the next lease "
            f"ready: cold {_median(cold_turn) * 1e3:.0f} ms, warm {_median(warm_turn) * 1e3:.0f} ms"
        )


if __name__ == "__main__":
    sys.exit(main())
