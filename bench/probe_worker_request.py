"""What one register read costs inside the simulation worker's process, without the IPC.

    .venv/bin/python bench/probe_worker_request.py [--reads 2000]

Runs the built `npu_sim` (Buyi) with this file as cocotb's test module, as the server runs
its workers, and measures in CPU time (time.process_time, the simulator's process):

- one single register read through `NpuHarness.run_rows` (the hand-over to the register
  bus master, the simulation of its cycles, cocotb's trigger and the master's Python);
- one look at the one-bit ``busy_o`` three ways: ``dut.busy_o.value`` (a binary string
  and a `Logic`), the same on a handle looked up once, and the worker's `_bit_reader`
  (the GPI object's integer read).

Compare with the worker process's CPU per read seen from outside
(`bench/cpu_register_read.py`): the difference is the socket, the (un)pickling and the
wakeups of the request loop.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import cocotb

OUT_ENV = "NPU_PROBE_OUT"
READS_ENV = "NPU_PROBE_READS"


@cocotb.test()
async def probe(dut) -> None:  # type: ignore[no-untyped-def]
    """Runs inside the simulator: writes its figures to $NPU_PROBE_OUT."""
    from npuemu.sim.harness import NpuHarness
    from npuemu.worker.handlers import bit_reader as _bit_reader
    from xrt.hw.regops import RegKind, RegRow
    from xrt.hw.regs import NPU
    from xrt.hw.targets import CLOCK_PERIOD_PS, target
    from xrt.hw.wire import RegisterStatus

    h = NpuHarness(dut, CLOCK_PERIOD_PS)
    await h.reset()
    looks = 20_000
    busy = dut.busy_o
    ways = {
        "dut.busy_o.value": lambda: bool(dut.busy_o.value),
        "handle looked up once, .value": lambda: bool(busy.value),
        "_bit_reader (GPI integer read)": _bit_reader(busy),
    }
    costs: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(5):
        for name, look in ways.items():
            t0 = time.process_time()
            for _ in range(looks):
                look()
            costs[name].append((time.process_time() - t0) / looks * 1e6)
    addr = target("buyi").npu_base + NPU.register("SCRATCH").offset
    reads = int(os.environ.get(READS_ENV, "2000"))
    row = RegRow(RegKind.READ, addr)
    per_read = []
    for _ in range(5):
        t0 = time.process_time()
        for _ in range(reads // 5):
            ((status, _, _),) = await h.run_rows([row])
            assert status == RegisterStatus.OK
        per_read.append((time.process_time() - t0) / (reads // 5) * 1e6)
    lines = [
        f"one register read through run_rows: {statistics.median(per_read):6.1f} us CPU",
        *(
            f"a look at busy_o, {name + ':':32s} {statistics.median(v):5.2f} us CPU"
            for name, v in costs.items()
        ),
    ]
    Path(os.environ[OUT_ENV]).write_text("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reads", type=int, default=2000)
    args = parser.parse_args()
    from npuemu.server.shm import DeviceMemory
    from npuemu.sim.build import build_npu_sim
    from npuemu.sim.cocotb_run import simulator_env
    from xrt.hw.targets import target

    model = build_npu_sim("buyi")
    folder = Path(tempfile.mkdtemp(prefix="npu-probe-", dir="/dev/shm"))
    memory = DeviceMemory(folder, "npu0", target("buyi"))
    out = folder / "figures.txt"
    try:
        env = simulator_env(
            model,
            Path(__file__).stem,
            folder / "results.xml",
            {OUT_ENV: str(out), READS_ENV: str(args.reads)},
        )
        plusargs = [f"+npu_mem_{name}=/proc/self/fd/{fd}" for name, fd in memory.fds.items()]
        proc = subprocess.run(
            [str(model.executable), *plusargs],
            pass_fds=tuple(memory.fds.values()),
            env=env,
            cwd=folder,
            capture_output=True,
            text=True,
            timeout=600,
        )
        if not out.exists():
            log = (proc.stdout + proc.stderr)[-3000:]
            sys.exit(f"the probe did not finish (exit {proc.returncode}):\n{log}")
        load = os.getloadavg()[0]
        print(f"load average {load:.1f} ({os.cpu_count()} cores); medians of 5 rounds")
        print(out.read_text(), end="")
    finally:
        memory.close()
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
