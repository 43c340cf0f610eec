"""`make demo-npu` (and the second half of `make demo`): a quantized CNN on the simulated NPU.

1. starts `npu-emu serve` on loopback (Buyi; the first run builds the verilated model);
2. builds a small CNN classifier (convolutions, a residual add, pooling, a dense layer),
   calibrates and quantizes it to int8 (docs/quantization.md);
3. binds it with ``Session.create([BuyiBackend, HostBackend], ...)``: the operators the NPU
   runs go to BuyiBackend (compiled into one program at ``apply``), the rest to the host;
4. runs one forward with the time profile on, prints where the operators ran (and why any
   quantized one stayed on the host), the profile (wall, memory, hardware time), the NPU's
   cycles and utilisation from its counters, and checks that the result equals
   HostBackend's bit for bit;
5. stops the server.
"""

from __future__ import annotations

import sys
import time

import numpy as np

import xrt
from npuemu.server.launch import ServerProcess
from xrt.backend import BuyiBackend, HostBackend
from xrt.dtypes import TensorType
from xrt.network import Network, NetworkBuilder
from xrt.quant import calibrate, quantize_network
from xrt.session import Session


def classifier(seed: int = 0) -> Network:
    """A small residual CNN: 3x32x32 -> 10 classes (float32)."""
    rng = np.random.default_rng(seed)

    def w(*shape: int) -> np.ndarray:
        fan_in = int(np.prod(shape[1:]))
        return (rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)

    b = NetworkBuilder("demo_cnn")
    x = b.input("image", TensorType("FP32", [1, 3, 32, 32]))
    (c1,) = b.add("Conv2d", [x], {"pads": [1] * 4}, {"weight": b.param("w1", w(32, 3, 3, 3))})
    (r1,) = b.add("Relu", [c1])
    (c2,) = b.add("Conv2d", [r1], {"pads": [1] * 4}, {"weight": b.param("w2", w(32, 32, 3, 3))})
    (r2,) = b.add("Relu", [c2])
    (c3,) = b.add("Conv2d", [r2], {"pads": [1] * 4}, {"weight": b.param("w3", w(32, 32, 3, 3))})
    (s,) = b.add("Add", [c3, r1])
    (r3,) = b.add("Relu", [s])
    (p,) = b.add("MaxPool2d", [r3], {"kernel": [2, 2], "strides": [2, 2]})
    (c4,) = b.add("Conv2d", [p], {"strides": [2, 2]}, {"weight": b.param("w4", w(64, 32, 1, 1))})
    (r4,) = b.add("Relu", [c4])
    (g,) = b.add("GlobalAvgPool", [r4])
    (f,) = b.add("Flatten", [g])
    (y,) = b.add("Gemm", [f], {}, {"weight": b.param("fc", w(10, 64))})
    return b.build([y])


def run_cnn(url: str, step: int, steps: int) -> bool:
    """Quantize the demo CNN, run it on the NPU of the server at `url`, print what happened;
    True when the NPU's result equals the host's bit for bit. Prints steps
    `step`..`step + 2` of `steps`."""
    net = classifier()
    rng = np.random.default_rng(1)
    samples = [{"image": rng.standard_normal((1, 3, 32, 32)).astype(np.float32)} for _ in range(4)]
    qnet = quantize_network(net, ranges=calibrate(net, samples))
    image = rng.standard_normal((1, 3, 32, 32)).astype(np.float32)
    print(f"[{step}/{steps}] quantized the CNN {net.name!r} to int8: {len(qnet.ops)} operators")
    with xrt.Device.open(url) as dev:
        sess = Session.create([BuyiBackend, HostBackend], qnet, [dev, None])
        t = time.perf_counter()
        sess.apply()
        print(
            f"[{step + 1}/{steps}] apply (compile for the NPU, upload to plddr): "
            f"{time.perf_counter() - t:.2f} s"
        )
        for line in sess.placement().summary_lines():
            print(f"      {line}")
        sess.enable_time_profile(True)
        out = sess.forward({"image": image})[0].numpy()
        print(sess.profile_table())
        stats = sess.backends[0].last_stats
        if stats is not None:
            print(
                f"      NPU: {stats.busy_cycles} cycles, MAC array busy "
                f"{100 * stats.mac_utilisation:.1f}% of them; counters {stats.counters}"
            )
        with Session.create([HostBackend], qnet).apply() as host:
            want = host.forward({"image": image})[0].numpy()
        same = np.array_equal(out, want)
        verdict = "bit-exact" if same else "MISMATCH"
        print(f"[{step + 2}/{steps}] NPU result against HostBackend's: {verdict}")
        print(f"      top-1 class {int(np.argmax(out))}; logits {np.round(out[0], 3)}")
        sess.close()
    return same


def main() -> int:
    print("[1/4] starting the device server on loopback (the first run builds the model) ...")
    t0 = time.perf_counter()
    with ServerProcess.start(target="buyi") as srv:
        print(f"      {srv.url} serving after {time.perf_counter() - t0:.1f} s")
        same = run_cnn(srv.url, 2, 4)
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
