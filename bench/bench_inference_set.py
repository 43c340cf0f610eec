"""Inferences per second of one quantized light network through `xrt.aic.InferenceSet`,
with 1, 2 and 4 devices on one server and 2 and 4 devices split over two servers.

The network (random weights, tests/network/light_models.py, at ``--size`` pixels) is
quantized and compiled once without a device (`compile_container`); each configuration
opens a `Context` on real ``npu-emu serve`` processes, makes an InferenceSet with one
activation per device and ``--set-size`` handles each, submits ``--inferences`` inputs
(more than the handles: each completed handle is put back and reused), checks every
output bit-exact against HostBackend, and reports inferences per second and the latency
(submission to completion) p50/p99 from a `ProfilingHandle` over the whole run.

On this machine each device is a simulator process: devices beyond the CPU cores share
them, so throughput stops growing at the core count.

    .venv/bin/python bench/bench_inference_set.py [--model squeezenet] [--size 64]
        [--target zg330] [--inferences 24] [--set-size 2]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "network"))

import numpy as np  # noqa: E402
from light_models import random_feeds, reduced, with_random_weights  # noqa: E402

from npuemu.server.launch import ServerProcess  # noqa: E402
from xrt.aic import Context, InferenceSet, ProfilingHandle, ProfilingReport, Qpc  # noqa: E402
from xrt.backend import HostBackend  # noqa: E402
from xrt.network import Network  # noqa: E402
from xrt.quant import quantize_network  # noqa: E402
from xrt.session import Session  # noqa: E402
from xrt.session.container import compile_container  # noqa: E402

CONFIGS = [("1 server", [1]), ("1 server", [2]), ("1 server", [4]), ("2 servers", [1, 1]),
           ("2 servers", [2, 2])]  # fmt: skip


def _run(
    qpc: Qpc, urls: list[str], inputs: list[list[np.ndarray]], want: list[np.ndarray], set_size: int
) -> ProfilingReport:
    reports: list[ProfilingReport] = []
    with (
        Context(urls) as ctx,
        InferenceSet(ctx, qpc, set_size=set_size, num_activations=len(urls)) as iset,
    ):
        iset.submit(inputs[0])  # warm-up: one inference per device is not timed
        iset.wait_for_completion()
        iset.put_completed(iset.get_completed())
        prof = ProfilingHandle(iset, len(inputs), reports.append)
        prof.start()
        t0 = time.perf_counter()
        out = 0
        for i, x in enumerate(inputs):
            if out == iset.num_handles:
                done = iset.get_completed()
                assert done.ok, done.error
                np.testing.assert_array_equal(done.outputs()[0], want[done.id])
                iset.put_completed(done)
                out -= 1
            iset.submit(x, id=i)
            out += 1
        iset.wait_for_completion()
        wall = time.perf_counter() - t0
        for _ in range(out):
            done = iset.get_completed()
            np.testing.assert_array_equal(done.outputs()[0], want[done.id])
            iset.put_completed(done)
        prof.stop()
    (report,) = reports
    print(f"    ({wall:.2f} s wall for {len(inputs)} inferences)", flush=True)
    return report


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="squeezenet")
    ap.add_argument("--size", type=int, default=64, help="input height/width (reduced network)")
    ap.add_argument("--target", default="zg330", choices=("buyi", "zg330"))
    ap.add_argument("--inferences", type=int, default=24)
    ap.add_argument("--set-size", type=int, default=2)
    args = ap.parse_args()

    model = reduced(with_random_weights(args.model, seed=1), args.size)
    net = Network.from_onnx(model)
    qnet = quantize_network(net, [random_feeds(model, 100 + i) for i in range(2)])
    inputs = [list(random_feeds(model, 200 + i).values()) for i in range(args.inferences)]
    with Session.create([HostBackend], qnet).apply() as host:
        want = [host.forward(x)[0].numpy() for x in inputs]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "net.qpc"
        compile_container(qnet, args.target, path)
        qpc = Qpc.from_file(path)
    print(
        f"{args.model} at {args.size}x{args.size}, {args.target}, {args.inferences} inferences, "
        f"set size {args.set_size}; load average {os.getloadavg()[0]:.2f} at start",
        flush=True,
    )
    rows = []
    for where, per_server in CONFIGS:
        with ExitStack() as stack:
            servers = [
                stack.enter_context(_Serving(args.target, n)) for n in per_server
            ]  # fmt: skip
            urls = [s.url for s, n in zip(servers, per_server, strict=True) for _ in range(n)]
            print(f"  {len(urls)} device(s), {where}:", flush=True)
            r = _run(qpc, urls, inputs, want, args.set_size)
        rows.append((len(urls), where, r))
    base = rows[0][2].inferences_per_s
    print("\n| devices | servers | inferences/s | vs 1 device | latency p50 | latency p99 |")
    print("|---|---|---|---|---|---|")
    for n, where, r in rows:
        print(
            f"| {n} | {where} | {r.inferences_per_s:.2f} | {r.inferences_per_s / base:.2f}x | "
            f"{r.latency_p50_s * 1e3:.0f} ms | {r.latency_p99_s * 1e3:.0f} ms |"
        )
    print(f"load average {os.getloadavg()[0]:.2f} at the end")
    return 0


class _Serving:
    """A server for a ``with`` block (stopped afterwards)."""

    def __init__(self, target: str, devices: int) -> None:
        self.target, self.devices = target, devices

    def __enter__(self) -> ServerProcess:
        self.srv = ServerProcess.start(target=self.target, devices=self.devices)
        return self.srv

    def __exit__(self, *exc: object) -> None:
        self.srv.stop()


if __name__ == "__main__":
    sys.exit(main())
