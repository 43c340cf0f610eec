"""Forward time of a ResNet-50-shaped float network at 224x224: host kernels vs onnxruntime.

Builds ResNet-50 (v1.5 layout: stride on the 3x3 convolution, batch 1, random weights,
BatchNormalization after every convolution) with onnx.helper, imports it with
`Network.from_onnx` (BatchNorm folds into the convolutions), checks the two agree, then
times `run_network_reference` and onnxruntime (default CPU settings) in the same run and
prints medians and their ratio, plus where the host time goes by op type.

Usage: .venv/bin/python bench/bench_host_ops.py [--runs N] [--size 224] [--threads N]

``--threads N`` limits both engines to N threads (numpy's BLAS through OPENBLAS_NUM_THREADS /
OMP_NUM_THREADS / MKL_NUM_THREADS, onnxruntime through intra_op_num_threads); the default
is each library's own default (all cores).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections import defaultdict


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

import numpy as np  # noqa: E402  (after the BLAS thread setup)
import onnx  # noqa: E402  (after the BLAS thread setup)
import onnxruntime as ort  # noqa: E402  (after the BLAS thread setup)
from onnx import TensorProto, helper, numpy_helper  # noqa: E402  (after the BLAS thread setup)

from xrt.network import Network, Operator, run_network_reference  # noqa: E402  (after the BLAS thread setup)


class _Builder:
    def __init__(self, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.n = 0

    def _name(self, base: str) -> str:
        self.n += 1
        return f"{base}_{self.n}"

    def _const(self, base: str, arr: np.ndarray) -> str:
        name = self._name(base)
        self.inits.append(numpy_helper.from_array(arr.astype(np.float32), name))
        return name

    def node(self, op: str, inputs: list[str], **attrs: object) -> str:
        out = self._name(op.lower())
        self.nodes.append(helper.make_node(op, inputs, [out], name=out, **attrs))
        return out

    def conv_bn(
        self, x: str, cin: int, cout: int, k: int, stride: int = 1, relu: bool = True
    ) -> str:
        w = self.rng.standard_normal((cout, cin, k, k)) * np.sqrt(2.0 / (cin * k * k))
        y = self.node(
            "Conv",
            [x, self._const("w", w)],
            kernel_shape=[k, k],
            strides=[stride] * 2,
            pads=[k // 2] * 4,
        )
        bn = [
            self._const("gamma", self.rng.uniform(0.5, 1.0, cout)),
            self._const("beta", self.rng.standard_normal(cout) * 0.1),
            self._const("mean", self.rng.standard_normal(cout) * 0.1),
            self._const("var", self.rng.uniform(0.5, 1.5, cout)),
        ]
        y = self.node("BatchNormalization", [y, *bn], epsilon=1e-5)
        return self.node("Relu", [y]) if relu else y

    def bottleneck(self, x: str, cin: int, width: int, stride: int) -> str:
        cout = width * 4
        y = self.conv_bn(x, cin, width, 1)
        y = self.conv_bn(y, width, width, 3, stride)
        y = self.conv_bn(y, width, cout, 1, relu=False)
        short = (
            x if stride == 1 and cin == cout else self.conv_bn(x, cin, cout, 1, stride, relu=False)
        )
        return self.node("Relu", [self.node("Add", [y, short])])


def resnet50(size: int = 224, classes: int = 1000) -> onnx.ModelProto:
    """A ResNet-50-shaped ONNX model (opset 17) with random weights."""
    b = _Builder()
    y = b.conv_bn("input", 3, 64, 7, 2)
    y = b.node("MaxPool", [y], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin = 64
    for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        for i in range(blocks):
            y = b.bottleneck(y, cin, width, stride if i == 0 else 1)
            cin = width * 4
    y = b.node("Flatten", [b.node("GlobalAveragePool", [y])], axis=1)
    w = b.rng.standard_normal((classes, cin)) * np.sqrt(1.0 / cin)
    y = b.node("Gemm", [y, b._const("fc_w", w), b._const("fc_b", np.zeros(classes))], transB=1)
    graph = helper.make_graph(
        b.nodes,
        "resnet50",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, size, size])],
        [helper.make_tensor_value_info(y, TensorProto.FLOAT, [1, classes])],
        initializer=b.inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = min(model.ir_version, 10)  # what the installed onnxruntime reads
    onnx.checker.check_model(model)
    return model


def _median_ms(fn: object, runs: int) -> tuple[float, list[float]]:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times), times


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
    t0 = time.perf_counter()
    net = Network.from_onnx(model)
    import_ms = (time.perf_counter() - t0) * 1e3
    x = np.random.default_rng(1).standard_normal((1, 3, args.size, args.size)).astype(np.float32)

    opts = ort.SessionOptions()
    if args.threads is not None:
        opts.intra_op_num_threads = args.threads
        opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    (ref,) = sess.run(None, {"input": x})
    (ours,) = run_network_reference(net, [x])
    rel = float(np.max(np.abs(ours - ref)) / np.max(np.abs(ref)))

    # Warm up both, then alternate so both see the same machine state.
    sess.run(None, {"input": x})
    run_network_reference(net, [x])
    host, ortt = [], []
    for _ in range(args.runs):
        host.append(_median_ms(lambda: run_network_reference(net, [x]), 1)[0])
        ortt.append(_median_ms(lambda: sess.run(None, {"input": x}), 1)[0])
    host_ms, ort_ms = statistics.median(host), statistics.median(ortt)

    by_type: dict[str, float] = defaultdict(float)
    last = [time.perf_counter()]

    def observer(op: Operator, outs: list[np.ndarray]) -> None:
        now = time.perf_counter()
        by_type[op.op_type] += (now - last[0]) * 1e3
        last[0] = now

    last[0] = time.perf_counter()
    run_network_reference(net, [x], observer=observer)

    n_ops = len(net.ops)
    n_params = sum(p.size for p in net.params.values())
    print(
        f"ResNet-50-shaped network, 1x3x{args.size}x{args.size}, {n_ops} xrt ops, "
        f"{n_params / 1e6:.1f} M parameters"
    )
    threads = "library defaults" if args.threads is None else f"{args.threads} per engine"
    print(f"  threads: {threads}; load average before the run: {os.getloadavg()[0]:.2f}")
    print(f"  import (ONNX -> Network, BN folded):  {import_ms:8.1f} ms")
    print(f"  max |host - onnxruntime| / max |ref|: {rel:.2e}")
    print(
        f"  host reference executor, median of {args.runs}: {host_ms:8.1f} ms  (runs: "
        f"{', '.join(f'{t:.0f}' for t in host)})"
    )
    print(
        f"  onnxruntime CPU,         median of {args.runs}: {ort_ms:8.1f} ms  (runs: "
        f"{', '.join(f'{t:.0f}' for t in ortt)})"
    )
    print(f"  ratio host / onnxruntime: {host_ms / ort_ms:.2f}x")
    print("  host time by op type (one run):")
    for t, ms in sorted(by_type.items(), key=lambda kv: -kv[1]):
        print(f"    {t:14s} {ms:8.1f} ms")


if __name__ == "__main__":
    main()
