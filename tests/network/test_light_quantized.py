"""The classic light networks (random weights, tests/network/light_models.py) quantize to
int8 and keep onnxruntime's top-1 class on random inputs.

A random-weight network can be nearly input-independent, with a few classes whose logits
differ by less than one int8 step of the logit tensor; no 8-bit scheme can order those.
So top-1 must agree wherever onnxruntime's margin between its two best classes,
``log(p1 / p2)`` (= the logit difference), exceeds four int8 steps of the calibrated logit
scale, and at least half of the inputs must be such clear cases.
"""

from __future__ import annotations

import numpy as np
import pytest
from light_models import random_feeds, with_random_weights
from netutil import ort_run

from xrt.network import Network, run_network_reference
from xrt.quant import calibrate, quantize_network

# The larger networks (inception, ResNet-50, AlexNet...) take tens of seconds each here:
# bench/bench_light_models.py --quantize runs every one with this same check. (SqueezeNet
# with random weights on noise inputs has no clear top-1 at all: its global average pool
# flattens what the noise changes, leaving two classes within 0.2 of 9.)
QUANT_MODELS = ["shufflenet"]
N_INPUTS = 6


@pytest.mark.parametrize("name", QUANT_MODELS)
def test_quantized_light_network_keeps_top1(name: str) -> None:
    model = with_random_weights(name, seed=1)
    net = Network.from_onnx(model)
    (softmax,) = [op for op in net.ops if op.op_type == "Softmax"]
    ranges = calibrate(net, [random_feeds(model, 100 + i) for i in range(4)])
    qnet = quantize_network(net, ranges=ranges)
    assert any(op.op_type == "QConv2d" for op in qnet.ops)
    step = ranges[softmax.inputs[0]].scale
    clear = agree = 0
    for i in range(N_INPUTS):
        feeds = random_feeds(model, 200 + i)
        (ref,) = ort_run(model, feeds)
        (ours,) = run_network_reference(qnet, feeds)
        p = np.sort(ref.reshape(-1).astype(np.float64))
        with np.errstate(divide="ignore"):  # p2 may underflow to 0: an infinite margin
            margin = np.log(p[-1] / p[-2])
        if margin > 4 * step:
            clear += 1
            agree += int(np.argmax(ours)) == int(np.argmax(ref))
    assert clear >= N_INPUTS // 2, f"only {clear} of {N_INPUTS} inputs have a clear top-1"
    assert agree == clear
