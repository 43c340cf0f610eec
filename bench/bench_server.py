"""Server start to first served request, in seconds (model already built and cached).

Starts `npu-emu serve --port 0` as a subprocess, and measures from the spawn to the first
answered ReadRegister on an opened device (ListDevices retried until it answers). Medians
over --repeat runs. Usage: python bench/bench_server.py [--repeat 5] [--devices 1]
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import time

import grpc

from npuemu.sim.build import build_npu_sim
from xrt.hw.wire import pb, pb_grpc


def one_start(devices: int) -> tuple[float, float]:
    """(seconds to the first ListDevices answer, seconds to the first register read)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "npuemu.cli", "serve", "--port", "0", "--devices", str(devices)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        m = re.search(r"on ([\d.]+:\d+)", line)
        if not m:
            raise RuntimeError(f"server did not start: {line!r}")
        stub = pb_grpc.DeviceServiceStub(grpc.insecure_channel(m.group(1)))
        while True:
            try:
                stub.ListDevices(pb.ListDevicesRequest(), timeout=5)
                break
            except grpc.RpcError:
                time.sleep(0.01)
        t_list = time.perf_counter() - t0
        lease = stub.OpenDevice(pb.OpenDeviceRequest(protocol_version=1)).lease_id
        stub.ReadRegister(pb.ReadRegisterRequest(lease_id=lease, address=0x4000_0000))
        return t_list, time.perf_counter() - t0
    finally:
        proc.terminate()
        proc.wait(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--devices", type=int, default=1)
    args = parser.parse_args()
    build_npu_sim("buyi")  # the figure is for a cached model; building is bench_dma's figure
    runs = [one_start(args.devices) for _ in range(args.repeat)]
    print(
        f"server start (spawn) to first ListDevices answer: "
        f"{statistics.median(r[0] for r in runs):.2f} s"
    )
    print(
        f"server start (spawn) to first register read:      "
        f"{statistics.median(r[1] for r in runs):.2f} s  "
        f"({args.devices} device(s), median of {args.repeat})"
    )


if __name__ == "__main__":
    main()
