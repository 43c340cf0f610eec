"""NPU backends bind a relabelling reshape only where it belongs to a program (no device:
binding asks the compiler and the bindings made so far, `xrt.backend.npu._binding`)."""

from __future__ import annotations

import numpy as np
import pytest

from xrt import TensorType
from xrt.backend import BuyiBackend, HostBackend, ZG330Backend
from xrt.backend._registry import BindContext
from xrt.backend.npu._binding import LONE_ALIAS
from xrt.dtypes import QuantParams
from xrt.network import Network, NetworkBuilder


def _conv(b: NetworkBuilder, x: str) -> str:
    rng = np.random.default_rng(0)
    (y,) = b.add(
        "QConv2d",
        [x],
        {"lo": -128, "hi": 127, "out_scale": 0.05},
        {
            "weight": b.param("w", rng.integers(-40, 40, (16, 16, 1, 1)).astype(np.int8)),
            "bias": b.param("b", rng.integers(-300, 300, 16).astype(np.int32)),
            "multiplier": b.param("m", np.full(16, 1 << 14, np.int32)),
            "shift": b.param("s", np.full(16, 20, np.int32)),
        },
        name="conv",
    )
    return y


def _net(conv: str) -> Network:
    """int8 ``(1, 16) -> Reshape (1, 16, 1, 1)`` with a 1x1 QConv2d `conv` ("before",
    "after") it or none ("none"); the reshape only relabels the channel-tiled bytes."""
    b = NetworkBuilder("alias")
    shape = [1, 16, 1, 1] if conv == "before" else [1, 16]
    y = b.input("x", TensorType("SInt8", shape, quant=QuantParams(0.05)))
    if conv == "before":
        y = _conv(b, y)
    (y,) = b.add("Reshape", [y], {"shape": [1, 16] if conv == "before" else [1, 16, 1, 1]})
    if conv == "after":
        y = _conv(b, y)
    return b.build([y])


def _reshape(net: Network) -> int:
    (op,) = [op for op in net.ops if op.op_type == "Reshape"]
    return op.op_id


@pytest.mark.parametrize("cls", [BuyiBackend, ZG330Backend])
def test_a_lone_relabelling_reshape_stays_on_the_host(cls: type) -> None:
    backend = cls()
    net = _net("none")
    ctx = BindContext(net, {})
    reshape = net.op(_reshape(net))
    assert not backend.is_op_supported(reshape, ctx)
    assert backend.refusal(reshape, ctx) == LONE_ALIAS
    # Two in a row are no more work than one.
    b = NetworkBuilder("aliases")
    y = b.input("x", TensorType("SInt8", [1, 16], quant=QuantParams(0.05)))
    (y,) = b.add("Reshape", [y], {"shape": [1, 16, 1, 1]})
    (y,) = b.add("Reshape", [y], {"shape": [1, 16]})
    net = b.build([y])
    ctx = BindContext(net, {})
    assert [backend.refusal(op, ctx) for op in net.ops[1:-1]] == [LONE_ALIAS, LONE_ALIAS]
    assert backend.refusal(net.input_op(), ctx) is None  # every backend passes Input through
    # After a convolution the host runs, it is as alone.
    net = _net("before")
    ctx = BindContext(net, {net.ops[1].op_id: HostBackend()})
    assert backend.refusal(net.op(_reshape(net)), ctx) == LONE_ALIAS


@pytest.mark.parametrize("cls", [BuyiBackend, ZG330Backend])
def test_a_reshape_that_belongs_to_a_program_is_bound(cls: type) -> None:
    backend = cls()
    net = _net("after")  # the program starts with it
    assert backend.is_op_supported(net.op(_reshape(net)), BindContext(net, {}))
    net = _net("before")  # it continues what the backend produces
    ctx = BindContext(net, {net.ops[1].op_id: backend})
    assert backend.is_op_supported(net.op(_reshape(net)), ctx)
    assert backend.refusal(net.op(_reshape(net)), ctx) is None
