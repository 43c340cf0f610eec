"""Cycles saved by tuning records (issue 24 item 4) on the onnx wheel's light networks.

For each network (random weights, quantized) and each target (Buyi: every tensor in DDR;
ZG330: intermediates in the 1 MiB OCM, a layer measured alone on chip when it fits), every
NPU run is tuned on the golden model's cost model (`xrt.tuning.NpuTuner`, the best
--top-k candidates of each convolution's wide tiling set), then compiled again from the
records alone and compared with the untuned compile: simulated cycles of each (the cost
model's schedule of one launch), cycles saved, layers whose tiling changed, tuning wall
time. A tuned compile slower than the untuned one is an error (the tuner's whole-run check
must prevent it).

Usage: python bench/bench_tuning.py [--quick] [--nets a,b] [--targets buyi,zg330] [--top-k 6]

--quick runs each network at the reduced input size of tests/npu/test_tuning.py (vgg19
and inception_v1, which have none, are skipped); the default is 224 x 224.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "network"))

from light_models import LIGHT_MODELS, reduced, with_random_weights  # noqa: E402
from netutil import random_feeds  # noqa: E402

from xrt.hw.targets import NPU, target  # noqa: E402
from xrt.network import Network, NetworkView  # noqa: E402
from xrt.npu.compiler import compile_run, partition, simulated_cycles  # noqa: E402
from xrt.quant import quantize_network  # noqa: E402
from xrt.tuning import CostModelMeasure, NpuTuner, TuningRecords  # noqa: E402

QUICK_SIZES = {
    "squeezenet": 32,
    "shufflenet": 32,
    "inception_v2": 32,
    "resnet50": 16,
    "densenet121": 32,
    "bvlc_alexnet": 64,
    "zfnet512": 64,
}


def bench(name: str, hw: int, tgt: str, top_k: int) -> str:
    model = with_random_weights(name, seed=1)
    if hw != 224:
        model = reduced(model, hw)
    qnet = quantize_network(Network.from_onnx(model), [random_feeds(model, seed=0)])
    ocm = target(tgt).memory("ocm").size if target(tgt).has_memory("ocm") else 0
    on_chip = ocm > 0
    records = TuningRecords()
    measure = CostModelMeasure(tgt, NPU, on_chip)
    tuner = NpuTuner(records, NPU, tgt, tune=True, top_k=top_k, measure=measure, ocm_bytes=ocm)
    again = NpuTuner(records, NPU, tgt, ocm_bytes=ocm)
    before = after = changed = 0
    for npu, ops in partition(qnet):
        if not npu:
            continue
        view = NetworkView(qnet, ops)
        tuner.plans_for(view)
        plans = again.plans_for(view)
        changed += len(plans)
        b = simulated_cycles(compile_run(view, NPU, ocm_bytes=ocm), tgt, NPU)
        a = simulated_cycles(compile_run(view, NPU, ocm_bytes=ocm, plans=plans), tgt, NPU)
        if a > b:
            raise AssertionError(f"{name} {tgt}: tuned run {a} cycles > untuned {b}")
        before += b
        after += a
    r = tuner.report
    saved = before - after
    return (
        f"{name:<13} {hw:>4} {tgt:<6} {before:>11} {after:>11} {saved:>9} "
        f"{100 * saved / before:>6.2f}% {changed:>4}/{r.tuned:<4} {r.reverted:>3} "
        f"{r.measurements:>6} {r.seconds:>8.1f}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="reduced input sizes")
    ap.add_argument("--nets", default=",".join(LIGHT_MODELS))
    ap.add_argument("--targets", default="buyi,zg330")
    ap.add_argument("--top-k", type=int, default=6)
    args = ap.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.2f} (1 min)")
    print(
        f"{'network':<13} {'hw':>4} {'target':<6} {'untuned':>11} {'tuned':>11} {'saved':>9} "
        f"{'saved':>7} {'chg/tuned':>9} {'rev':>3} {'meas':>6} {'tune s':>8}"
    )
    for name in args.nets.split(","):
        if args.quick and name not in QUICK_SIZES:
            print(f"{name:<13} skipped: no reduced size (run without --quick)")
            continue
        hw = QUICK_SIZES[name] if args.quick else 224
        for tgt in args.targets.split(","):
            t0 = time.perf_counter()
            line = bench(name, hw, tgt, args.top_k)
            print(f"{line}   ({time.perf_counter() - t0:.0f} s in all)", flush=True)
    print(f"load average at end: {os.getloadavg()[0]:.2f} (1 min)")


if __name__ == "__main__":
    main()
