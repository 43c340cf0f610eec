"""Session forward of a ResNet-50-shaped float network vs onnxruntime, and its memory plan.

Builds the ResNet-50-shaped ONNX model of bench/bench_host_ops.py (random weights,
BatchNormalization folded by the importer), makes a `Session` on the `HostBackend`, checks
its output against onnxruntime, then times `Session.forward` and onnxruntime (default CPU
settings) alternately in the same run and prints medians and their ratio; also the direct
reference executor (`run_network_reference`), to show what the session adds; then the
memory plan: the arena size against the sum of all planned tensors and the liveness lower
bound, and the per-op-type time from the session's time profile.

Usage: .venv/bin/python bench/bench_session.py [--runs N] [--size 224] [--threads N]

``--threads N`` limits both engines to N threads (numpy's BLAS through OPENBLAS_NUM_THREADS /
OMP_NUM_THREADS / MKL_NUM_THREADS, onnxruntime through intra_op_num_threads); the default is
each library's own default (all cores).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path


def _early_threads() -> int | None:
    # BLAS reads its thread count when numpy is first imported, so look before importing it.
    for i, arg in enumerate(sys.argv):
        if arg == "--threads" and i + 1 < len(sys.argv):
            return int(sys.argv[i + 1])
        if arg.startswith("--threads="):
            return int(arg.split("=", 1)[1])
    return None


_THREADS = _early_threads()
if _THREADS is not None:
    for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[_var] = str(_THREADS)

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402  (after the BLAS thread setup)
import onnxruntime as ort  # noqa: E402  (after the BLAS thread setup)
from bench_host_ops import resnet50  # noqa: E402  (the same model as the host-ops bench)

from xrt.backend import HostBackend  # noqa: E402  (after the BLAS thread setup)
from xrt.network import Network, run_network_reference  # noqa: E402  (after the BLAS thread setup)
from xrt.session import Session  # noqa: E402  (after the BLAS thread setup)


def _time_ms(fn: object) -> float:
    t0 = time.perf_counter()
    fn()  # type: ignore[operator]
    return (time.perf_counter() - t0) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--runs", type=int, default=5, help="timed runs per engine (median reported)"
    )
    parser.add_argument("--size", type=int, default=224, help="input height and width")
    parser.add_argument("--threads", type=int, default=None, help="threads for both engines")
    args = parser.parse_args()

    model = resnet50(args.size)
    net = Network.from_onnx(model)
    x = np.random.default_rng(1).standard_normal((1, 3, args.size, args.size)).astype(np.float32)

    t0 = time.perf_counter()
    sess = Session.create([HostBackend], net)
    sess.apply()
    setup_ms = (time.perf_counter() - t0) * 1e3

    opts = ort.SessionOptions()
    if args.threads is not None:
        opts.intra_op_num_threads = args.threads
        opts.inter_op_num_threads = 1
    ort_sess = ort.InferenceSession(
        model.SerializeToString(), opts, providers=["CPUExecutionProvider"]
    )
    (ref,) = ort_sess.run(None, {"input": x})
    ours = sess.forward([x])[0].numpy()
    rel = float(np.max(np.abs(ours - ref)) / np.max(np.abs(ref)))
    direct = run_network_reference(net, [x])[0]
    same = bool(np.array_equal(ours, direct))

    # Warm up, then alternate the engines so that all see the same machine state.
    ort_sess.run(None, {"input": x})
    sess.forward([x])
    s_ms, o_ms, r_ms = [], [], []
    for _ in range(args.runs):
        s_ms.append(_time_ms(lambda: sess.forward([x])))
        o_ms.append(_time_ms(lambda: ort_sess.run(None, {"input": x})))
        r_ms.append(_time_ms(lambda: run_network_reference(net, [x])))
    session_ms, ort_ms, ref_ms = (statistics.median(v) for v in (s_ms, o_ms, r_ms))

    sess.enable_time_profile()
    sess.forward([x])
    by_type: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for t in sess.time_profile_results().values():
        by_type[t.op_type][0] += t.wall
        by_type[t.op_type][1] += t.memory
    profiled_ms = sess.total_time() * 1e3

    plan = sess.memory_plan
    mib = 1 << 20
    intermediates = [p for n, p in plan.placements.items() if n not in net.inputs]
    inter_sum = sum(p.size for p in intermediates)
    print(
        f"ResNet-50-shaped network, 1x3x{args.size}x{args.size}, {len(net.ops)} xrt ops, "
        f"HostBackend session"
    )
    threads = "library defaults" if args.threads is None else f"{args.threads} per engine"
    print(f"  threads: {threads}; load average before the run: {os.getloadavg()[0]:.2f}")
    print(f"  Session.create + apply:                {setup_ms:8.1f} ms")
    print(f"  max |session - onnxruntime| / max |ref|: {rel:.2e}")
    print(f"  session output == reference executor output (bit for bit): {same}")

    def runs(v: list[float]) -> str:
        return ", ".join(f"{t:.0f}" for t in v)

    print(f"  Session.forward,        median of {args.runs}: {session_ms:8.1f} ms  ({runs(s_ms)})")
    print(f"  onnxruntime CPU,        median of {args.runs}: {ort_ms:8.1f} ms  ({runs(o_ms)})")
    print(f"  reference executor,     median of {args.runs}: {ref_ms:8.1f} ms  ({runs(r_ms)})")
    print(f"  ratio Session / onnxruntime:       {session_ms / ort_ms:.2f}x")
    print(f"  ratio Session / reference executor: {session_ms / ref_ms:.2f}x")
    print(
        f"  memory plan: {len(plan.placements)} tensors ({len(intermediates)} intermediates "
        f"+ {len(net.inputs)} input)"
    )
    print(f"    arena (plan peak):                {plan.peak_bytes / mib:8.2f} MiB")
    print(f"    liveness lower bound:             {plan.lower_bound_bytes / mib:8.2f} MiB")
    print(f"    sum of all intermediates:         {inter_sum / mib:8.2f} MiB")
    print(f"    sum of all planned tensors:       {plan.total_bytes / mib:8.2f} MiB")
    print(f"    peak / sum of intermediates:      {plan.peak_bytes / inter_sum:8.1%}")
    print(f"  profiled forward (one run): {profiled_ms:.1f} ms; by op type (wall, of it memory):")
    for op_type, (wall, mem) in sorted(by_type.items(), key=lambda kv: -kv[1][0]):
        print(f"    {op_type:14s} {wall:8.1f} ms  {mem:6.1f} ms")


if __name__ == "__main__":
    main()
