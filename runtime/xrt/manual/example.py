"""The manual's example network (its ``generate_network`` / ``GenerateNetwork``).

Chapter 1 of the manual runs ``Input -> Conv2d -> Cast -> HardOp -> Cast -> ReLU ->
MaxPool2d -> Output``: a float convolution for the host, a quantize, an int8 convolution
compiled ahead of time into an NPU program (a ``HardOp``, the manual's "BY stage"), a
dequantize, ReLU and pooling. `generate_network` builds it with fixed weights, so every
call gives the same network and the same results.
"""

from __future__ import annotations

import numpy as np

from xrt.backend.npu import to_hardop
from xrt.dtypes import TensorType
from xrt.errors import ErrorCode, XrtError
from xrt.hw.targets import TARGETS
from xrt.network import Framework, Network, NetworkBuilder

__all__ = ["generate_network"]

_SEED = 0


def generate_network(
    name: str = "network",
    framework: Framework = Framework.PYTORCH,
    version: str = "v1.9",
    *,
    target: str | None = "buyi",
) -> Network:
    """The manual's example network, its HardOp compiled for `target`.

    Args:
        name: The network's name.
        framework: The framework recorded on it (`Network.framework`, a label).
        version: That framework's version, recorded as `Network.framework_version`.
        target: The NPU the HardOp is compiled for (``"buyi"``, ``"zg330"``); None leaves
            its quantized convolution an ordinary ``QConv2d`` (the same weights, which the
            host runs: the reference a check compares an NPU session with).

    Returns:
        A network with one input ``"input"`` (FP32 ``[1, 3, 12, 12]``) and one output
        (FP32 ``[1, 16, 6, 6]``); its operators are Conv2d, Cast, HardOp, Cast, Relu and
        MaxPool2d, numbered as `NetworkBuilder` numbers them.

    Raises:
        XrtError: 11010 naming a bad argument or an unknown target.
    """
    if not isinstance(name, str) or not name:
        raise XrtError(ErrorCode.WRONG_TYPE, f"generate_network: name must be a string: {name!r}")
    if not isinstance(framework, Framework):
        raise XrtError(
            ErrorCode.WRONG_TYPE,
            f"generate_network: framework must be a Framework (Framework.PYTORCH, ...): "
            f"{framework!r}",
        )
    if not isinstance(version, str):
        raise XrtError(
            ErrorCode.WRONG_TYPE, f"generate_network: version must be a string: {version!r}"
        )
    if target is not None and target not in TARGETS:
        known = ", ".join(sorted(TARGETS))
        raise XrtError(
            ErrorCode.WRONG_TYPE, f"generate_network: unknown target {target!r} (known: {known})"
        )
    rng = np.random.default_rng(_SEED)
    b = NetworkBuilder(name)
    x = b.input("input", TensorType("FP32", [1, 3, 12, 12]))
    w = b.param("conv_weight", (rng.standard_normal((8, 3, 3, 3)) * 0.3).astype(np.float32))
    (c,) = b.add("Conv2d", [x], {"pads": [1, 1, 1, 1]}, {"weight": w}, name="conv")
    (q,) = b.add("Cast", [c], {"to": "SInt8", "scale": 0.05}, name="quantize")
    params = {
        "weight": b.param("npu_weight", rng.integers(-60, 60, (16, 8, 3, 3)).astype(np.int8)),
        "bias": b.param("npu_bias", rng.integers(-500, 500, 16).astype(np.int32)),
        "multiplier": b.param(
            "npu_multiplier", rng.integers(1 << 14, 1 << 15, 16).astype(np.int32)
        ),
        "shift": b.param("npu_shift", np.full(16, 20, np.int32)),
    }
    attrs = {"pads": [1, 1, 1, 1], "lo": -128, "hi": 127, "out_scale": 0.04}
    (h,) = b.add("QConv2d", [q], attrs, params, name="npu_conv")
    (f,) = b.add("Cast", [h], {"to": "FP32", "scale": 0.04}, name="dequantize")
    (r,) = b.add("Relu", [f], name="relu")
    (m,) = b.add("MaxPool2d", [r], {"kernel": [2, 2], "strides": [2, 2]}, name="pool")
    built = b.build([m])
    npu_ops = [op.op_id for op in built.ops if op.op_type == "QConv2d"]
    network = built if target is None else to_hardop(built, npu_ops, target)
    network.framework = framework
    network.framework_version = version
    return network
