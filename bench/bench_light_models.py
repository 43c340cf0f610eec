"""The light networks of the onnx wheel on the host: import, forward time against
onnxruntime (one thread each, alternated in the same run, medians), and with
``--quantize`` the int8 network's top-1 against onnxruntime.

Each network gets random weights in place of its ConstantOfShape ones
(tests/network/light_models.py) so that the comparison means something; its output is
checked against onnxruntime before timing.

Usage: .venv/bin/python bench/bench_light_models.py [--runs N] [--models a,b] [--quantize]
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

# One thread for both engines: BLAS reads its thread count when numpy is first imported.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "network"))

import argparse  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402  (after the BLAS thread setup)
import onnxruntime as ort  # noqa: E402
from light_models import LIGHT_MODELS, random_feeds, with_random_weights  # noqa: E402

from xrt.backend import HostBackend  # noqa: E402
from xrt.network import Network, run_network_reference  # noqa: E402
from xrt.quant import calibrate, quantize_network  # noqa: E402
from xrt.session import Session  # noqa: E402


def _ort_session(model: object) -> ort.InferenceSession:
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    return ort.InferenceSession(
        model.SerializeToString(),  # type: ignore[attr-defined]
        opts,
        providers=["CPUExecutionProvider"],
    )


def _ms(fn: object) -> float:
    t0 = time.perf_counter()
    fn()  # type: ignore[operator]
    return (time.perf_counter() - t0) * 1e3


def bench_forward(name: str, runs: int) -> tuple[float, float, float, float]:
    """(import s, xrt ms, onnxruntime ms, max |difference|)."""
    model = with_random_weights(name, seed=1)
    feeds = random_feeds(model, 2)
    t0 = time.perf_counter()
    net = Network.from_onnx(model)
    t_import = time.perf_counter() - t0
    ort_sess = _ort_session(model)
    with Session.create([HostBackend], net) as sess:
        sess.apply()
        ours = sess.forward(feeds)[0].numpy()
        ref = ort_sess.run(None, feeds)[0]
        diff = float(np.max(np.abs(ours - ref)))
        xs, os_ = [], []
        for _ in range(runs):
            xs.append(_ms(lambda: sess.forward(feeds)))
            os_.append(_ms(lambda: ort_sess.run(None, feeds)))
    return t_import, statistics.median(xs), statistics.median(os_), diff


def check_quantized(name: str, n_inputs: int = 8) -> tuple[int, int, int]:
    """(inputs, clear top-1 cases, agreeing) as in tests/network/test_light_quantized.py."""
    model = with_random_weights(name, seed=1)
    net = Network.from_onnx(model)
    softmax = [op for op in net.ops if op.op_type == "Softmax"]
    ranges = calibrate(net, [random_feeds(model, 100 + i) for i in range(4)])
    qnet = quantize_network(net, ranges=ranges)
    # The margin is in logits: log(p1 / p2) after a Softmax, else the output's own values.
    logits = softmax[0].inputs[0] if softmax else net.outputs[0]
    step = ranges[logits].scale
    ort_sess = _ort_session(model)
    clear = agree = 0
    for i in range(n_inputs):
        feeds = random_feeds(model, 200 + i)
        ref = ort_sess.run(None, feeds)[0]
        (ours,) = run_network_reference(qnet, feeds)
        p = np.sort(ref.reshape(-1).astype(np.float64))
        with np.errstate(divide="ignore"):  # p2 may underflow to 0: an infinite margin
            margin = np.log(p[-1] / p[-2]) if softmax else p[-1] - p[-2]
        if margin > 4 * step:
            clear += 1
            agree += int(np.argmax(ours)) == int(np.argmax(ref))
    return n_inputs, clear, agree


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--models", default=",".join(LIGHT_MODELS))
    parser.add_argument("--quantize", action="store_true", help="also check the int8 networks")
    args = parser.parse_args()
    ort.set_default_logger_severity(3)
    names = [n for n in args.models.split(",") if n]
    print(f"one thread each, {args.runs} alternated runs, medians")
    print(
        f"{'network':<14}{'import s':>9}{'xrt ms':>10}{'ort ms':>10}{'xrt/ort':>9}{'max|diff|':>11}"
    )
    for name in names:
        t_imp, x, o, diff = bench_forward(name, args.runs)
        print(f"{name:<14}{t_imp:>9.2f}{x:>10.1f}{o:>10.1f}{x / o:>9.2f}{diff:>11.2e}")
    if args.quantize:
        print("\nint8 networks: top-1 against onnxruntime where its top-2 margin is clear")
        for name in names:
            n, clear, agree = check_quantized(name)
            print(
                f"{name:<14} {agree}/{clear} agree ({n} inputs, {n - clear} without a clear top-1)"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
