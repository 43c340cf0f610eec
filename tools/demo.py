"""`make demo`: the simulated NPU behind its gRPC server, driven by the runtime.

1. starts `npu-emu serve` on loopback (a real subprocess; the first run builds the
   verilated model first, announced on stderr with its expected duration and an ETA,
   then it is cached: docs/performance.md, "RTL speed and cold start");
2. opens the device from the runtime: ``xrt.Device.open("grpc://127.0.0.1:PORT")``;
3. writes 16 MiB of random data to `plddr` (device DDR: staged through host-visible
   memory, moved by the DMA engine, as a driver on the board does) and reads it back the
   same way, checking every byte; prints the register round-trip time, the transfer rates
   and the simulated cycles;
4. the main job: quantizes a small CNN to int8 and runs it on the simulated NPU (compiled
   at ``apply``, run by the compute engine), prints where its operators ran, the time
   profile and the engine's cycles, and checks the result against the host's, bit for bit
   (`tools.demo_npu`, also `make demo-npu` alone);
5. stops the server (SIGTERM: a clean shutdown, nothing left behind).
"""

from __future__ import annotations

import statistics
import sys
import time

import numpy as np

import xrt
from npuemu.server.launch import ServerProcess
from tools.demo_npu import run_cnn
from xrt.hw.targets import CLOCK_PERIOD_PS

NBYTES = 16 << 20


def main() -> int:
    print(
        "[1/7] starting the device server on loopback (the first run builds the model) ...",
        flush=True,
    )
    t0 = time.perf_counter()
    with ServerProcess.start(target="buyi") as srv:
        print(f"      {srv.url} serving after {time.perf_counter() - t0:.1f} s")
        with xrt.Device.open(srv.url) as dev:
            print(f"[2/7] opened {dev!r}")
            npu = dev.get_reg_region("npu")
            rtts = []
            for _ in range(200):
                t = time.perf_counter()
                magic = npu.regs.MAGIC.read()
                rtts.append(time.perf_counter() - t)
            assert magic == 0x4E50_5530, hex(magic)
            rtts.sort()

            plddr = dev.default_mem_region()
            data = np.random.default_rng().integers(0, 256, NBYTES, dtype=np.uint8)
            chunk = plddr.malloc(NBYTES)
            print(
                f"[3/7] {NBYTES >> 20} MiB of random data -> {plddr.name} at "
                f"{chunk.begin.addr:#x} and back ...",
                flush=True,
            )
            c0, t = dev.cycles, time.perf_counter()
            chunk.write(data)
            w_s, w_cycles = time.perf_counter() - t, dev.cycles - c0
            back = np.empty_like(data)
            c0, t = dev.cycles, time.perf_counter()
            chunk.read(back)
            r_s, r_cycles = time.perf_counter() - t, dev.cycles - c0
            ok = np.array_equal(back, data)
            fast = getattr(dev.transport, "local_fast_path", False)
            chunk.free()
        print(f"[4/7] verify: {'OK, bit-exact' if ok else 'MISMATCH'}")
        mib = NBYTES / (1 << 20)
        p50, p99 = statistics.median(rtts) * 1e6, rtts[int(0.99 * len(rtts))] * 1e6
        path = "local fast path (shared memory)" if fast else "gRPC streaming"
        print(
            f"      register round trip (runtime -> gRPC -> server -> simulated AXI4-Lite): "
            f"p50 {p50:.0f} us, p99 {p99:.0f} us"
        )
        print(f"      host-visible memory path: {path}")
        for what, secs, cycles in (("write", w_s, w_cycles), ("read", r_s, r_cycles)):
            sim_ms = cycles * CLOCK_PERIOD_PS / 1e9
            print(
                f"      plddr {what}: {mib / secs:.1f} MiB/s wall; {cycles} simulated cycles "
                f"({NBYTES / cycles:.2f} bytes/cycle, {sim_ms:.2f} ms at 100 MHz)"
            )
        print()
        same = run_cnn(srv.url, 5, 7)
        print("stopping the server")
    print(f"demo done in {time.perf_counter() - t0:.1f} s")
    return 0 if ok and same else 1


if __name__ == "__main__":
    sys.exit(main())
