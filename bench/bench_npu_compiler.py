"""Figures of the NPU compiler (issue 9) on SqueezeNet 1.1- and ResNet-18-shaped networks.

For each network at --hw (default 224): the quantized network's NPU run compiled into one
program (instructions, program bytes, constant bytes, compile time: median of --repeat),
executed on the golden model (estimated cycles; MAC utilisation = useful MACs, on real
channels and taps outside the padding, / (256 * cycles); outputs bit-exact against the host
kernels), then every convolution compiled and executed alone: its cycles and utilisation.

Usage: python bench/bench_npu_compiler.py [--hw 224] [--repeat 3] [--nets squeezenet,resnet18]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "network"))

from netutil import random_feeds  # noqa: E402
from onnx_zoo import resnet18_model, squeezenet11_model  # noqa: E402

from xrt.network import Network, NetworkView, run_network_reference  # noqa: E402
from xrt.npu.compiler import compile_run, partition, run_on_golden  # noqa: E402
from xrt.quant import quantize_network  # noqa: E402

MACS_PER_CYCLE = 256


def _valid_taps(size: int, out: int, k: int, stride: int, pad: int, dil: int) -> int:
    """Output positions x kernel taps along one axis that land inside the input."""
    pos = np.arange(out)[:, None] * stride - pad + np.arange(k)[None, :] * dil
    return int(((pos >= 0) & (pos < size)).sum())


def useful_macs(op, net) -> int:  # type: ignore[no-untyped-def]
    """Multiply-accumulates of a QConv2d / QGemm on real channels and real (not padding) taps."""
    w = net.op_params(op)["weight"]
    out = net.values[op.outputs[0]].shape
    if op.op_type == "QGemm":
        return int(np.prod(out)) * w.shape[1]
    a = op.attrs
    n, _, h, wd = net.values[op.inputs[0]].shape
    rows = _valid_taps(h, out[2], w.shape[2], a["strides"][0], a["pads"][0], a["dilations"][0])
    cols = _valid_taps(wd, out[3], w.shape[3], a["strides"][1], a["pads"][1], a["dilations"][1])
    return n * out[1] * w.shape[1] * rows * cols


def bench_network(name: str, model, repeat: int) -> None:  # type: ignore[no-untyped-def]
    net = Network.from_onnx(model)
    qnet = quantize_network(net, [random_feeds(model, seed=0)])
    feeds = random_feeds(model, seed=1)
    env = run_network_reference(qnet, feeds, return_all=True)
    assert isinstance(env, dict)
    runs = [ops for npu, ops in partition(qnet) if npu]
    assert len(runs) == 1, "expected one NPU run between the edge casts"
    view = NetworkView(qnet, runs[0])
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        prog = compile_run(view)
        times.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    outs, res = run_on_golden(prog, {v: env[v] for v in view.inputs})
    sim_s = time.perf_counter() - t0
    for v in view.outputs:
        np.testing.assert_array_equal(outs[v], env[v])
    macs = sum(useful_macs(op, qnet) for op in view.ops if op.op_type in ("QConv2d", "QGemm"))
    total = res.cycles.total
    print(f"\n== {name}: one program for {len(view.ops)} operators (outputs bit-exact)")
    print(
        f"instructions {len(prog.instructions)}, program {prog.program_bytes} B, constants "
        f"{len(prog.constants)} B, scratch {prog.scratch_bytes} B"
    )
    print(f"compile time median {statistics.median(times):.2f} s over {repeat}")
    print(
        f"estimated cycles {total} ({total / 100e6 * 1e3:.1f} ms at 100 MHz), useful MACs "
        f"{macs / 1e9:.3f} G, MAC utilisation {macs / (MACS_PER_CYCLE * total):.1%} "
        f"(golden model run {sim_s:.1f} s incl. checker)"
    )
    print(f"{'layer':<16} {'shape':<28} {'k':>3} {'cycles':>9} {'util':>6}  tiling")
    for op in view.ops:
        if op.op_type != "QConv2d":
            continue
        one = NetworkView(qnet, [op])
        p1 = compile_run(one)
        _, r1 = run_on_golden(p1, {v: env[v] for v in one.inputs}, check=False)
        cyc = r1.cycles.total
        w = qnet.op_params(op)["weight"]
        xs = qnet.values[op.inputs[0]].shape
        ys = qnet.values[op.outputs[0]].shape
        shape = f"{xs[1]}x{xs[2]}x{xs[3]}->{ys[1]}x{ys[2]}x{ys[3]}"
        util = useful_macs(op, qnet) / (MACS_PER_CYCLE * cyc)
        tiling = p1.layers[0].detail.split(": ", 1)[-1]
        print(f"{op.name[:16]:<16} {shape:<28} {w.shape[2]:>3} {cyc:>9} {util:>6.1%}  {tiling}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hw", type=int, default=224)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--nets", default="squeezenet,resnet18")
    args = ap.parse_args()
    models = {"squeezenet": squeezenet11_model, "resnet18": resnet18_model}
    for name in args.nets.split(","):
        bench_network(f"{name} {args.hw}x{args.hw}", models[name](hw=args.hw), args.repeat)


if __name__ == "__main__":
    main()
