"""A second, NPU-like backend for the session tests, and the networks they run.

`TinyNpuBackend` is a real backend, not a mock: a non-host backend that runs a few int8
operators with its own numpy code (not the `xrt.ops` kernels), under constraints such as an
NPU has, and reports its compute time as hardware time. It runs:

* ``HardOp`` whose ``target`` is ``"tinynpu"``: its ``program`` is a 256-entry int8 table,
  ``out = program[q + 128]`` (an elementwise int8 function compiled to a lookup);
* ``Relu`` on int8;
* ``MaxPool2d`` on int8 without dilation or ceil mode;
* ``Cast`` that dequantizes (int8 -> float with a scale), but only when its input is
  produced on this backend: the manual's example constraint ("Cast runs here when its input
  and output are in external memory").

With `auto_merge` on, the session hands it runs of consecutive operators as one subgraph;
`launches` records each `forward_subgraph` call's op ids.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

import numpy as np

from xrt import DataType, HostDevice, Tensor, TensorType
from xrt.backend import Backend, BindContext, Subgraph, read_array
from xrt.device import Device
from xrt.network import Network, NetworkBuilder, Operator

__all__ = [
    "TinyNpuBackend",
    "grouping_network",
    "lut_program",
    "manual_network",
    "reference_twin",
]


class TinyNpuBackend(Backend):
    """An NPU-like backend: int8 kernels of its own, constraints, hardware time."""

    is_host = False

    def __init__(self) -> None:
        super().__init__()
        self.launches: list[tuple[int, ...]] = []

    def default_device(self) -> Device:
        return HostDevice.default()

    def _fork_from(self, parent: Backend) -> None:
        self.launches = []

    def forward_subgraph(
        self, subgraph: Subgraph, inputs: Mapping[str, Tensor], outputs: Mapping[str, Tensor]
    ) -> None:
        self.launches.append(tuple(subgraph.op_ids))
        super().forward_subgraph(subgraph, inputs, outputs)


def _timed(backend: Backend, fn, *args):  # type: ignore[no-untyped-def]
    t0 = time.perf_counter()
    out = fn(*args)
    if backend.time_profile:
        backend.add_time(hardware=time.perf_counter() - t0)
    return out


def _input_type(op: Operator, ctx: BindContext, i: int = 0) -> TensorType:
    return ctx.graph.values[op.inputs[i]]


@TinyNpuBackend.op("HardOp", constraint=lambda op, backend, ctx: op.attrs["target"] == "tinynpu")
def _hardop(
    op: Operator, inputs: list[Tensor], outputs: list[Tensor], backend: Backend
) -> Sequence[np.ndarray]:
    program = backend.network_view.params[op.params["program"]]  # type: ignore[union-attr]
    q = read_array(inputs[0])
    return [_timed(backend, lambda: np.take(program, q.astype(np.intp) + 128))]


@TinyNpuBackend.op(
    "Relu", constraint=lambda op, backend, ctx: _input_type(op, ctx).dtype is DataType.SINT8
)
def _relu(
    op: Operator, inputs: list[Tensor], outputs: list[Tensor], backend: Backend
) -> Sequence[np.ndarray]:
    q = read_array(inputs[0])
    return [_timed(backend, lambda: np.where(q > 0, q, np.int8(0)).astype(np.int8))]


def _maxpool_ok(op: Operator, backend: Backend, ctx: BindContext) -> bool:
    a = op.attrs
    return (
        _input_type(op, ctx).dtype is DataType.SINT8
        and a["dilations"] == [1, 1]
        and not a["ceil_mode"]
    )


@TinyNpuBackend.op("MaxPool2d", constraint=_maxpool_ok)
def _maxpool(op: Operator, inputs: list[Tensor], outputs: list[Tensor], backend: Backend) -> None:
    # Fills its output tensor itself (the other kernels return arrays).
    a = op.attrs
    q = read_array(inputs[0])
    kh, kw = a["kernel"]
    sh, sw = a["strides"]
    top, left, bottom, right = a["pads"]
    n, c, ho, wo = outputs[0].shape

    def pool() -> np.ndarray:
        padded = np.full(
            (n, c, q.shape[2] + top + bottom, q.shape[3] + left + right), -128, np.int8
        )
        padded[:, :, top : top + q.shape[2], left : left + q.shape[3]] = q
        out = np.full((n, c, ho, wo), -128, np.int8)
        for i in range(kh):
            for j in range(kw):
                tap = padded[:, :, i : i + sh * (ho - 1) + 1 : sh, j : j + sw * (wo - 1) + 1 : sw]
                np.maximum(out, tap, out=out)
        return out

    outputs[0].copy_data(_timed(backend, pool))


def _cast_ok(op: Operator, backend: Backend, ctx: BindContext) -> bool:
    return (
        op.attrs["scale"] is not None
        and _input_type(op, ctx).dtype is DataType.SINT8
        and DataType.parse(op.attrs["to"]) is DataType.FP32
        and ctx.producer_backend(op.inputs[0]) is backend
    )


@TinyNpuBackend.op("Cast", constraint=_cast_ok)
def _dequantize(
    op: Operator, inputs: list[Tensor], outputs: list[Tensor], backend: Backend
) -> Sequence[np.ndarray]:
    q = read_array(inputs[0])
    scale = np.float32(op.attrs["scale"])
    zp = np.float32(op.attrs["zero_point"])
    return [_timed(backend, lambda: (q.astype(np.float32) - zp) * scale)]


# -- networks -------------------------------------------------------------------------------


def lut_program(seed: int = 0) -> np.ndarray:
    """A 256-entry int8 table: a saturating tanh-like curve with a seeded wobble."""
    q = np.arange(-128, 128)
    wobble = np.random.default_rng(seed).integers(-3, 4, 256)
    return np.clip(np.rint(100 * np.tanh(q / 40.0)) + wobble, -128, 127).astype(np.int8)


def _add_hardop(b: NetworkBuilder, x: str, scale: float, name: str = "") -> str:
    shape = list(b.values[x].shape)
    program = b.param(f"program_{name or x}", lut_program(len(b.ops)))
    (y,) = b.add(
        "HardOp",
        [x],
        attrs={
            "target": "tinynpu",
            "output_types": [{"dtype": "SInt8", "shape": shape, "scale": scale}],
        },
        params={"program": program},
        name=name,
    )
    return y


def manual_network(seed: int = 0) -> Network:
    """The manual's network: Input -> Conv2d -> Cast -> HardOp -> Cast -> ReLU -> MaxPool2d
    -> Output, op ids 0..7 as in the manual."""
    rng = np.random.default_rng(seed)
    b = NetworkBuilder("manual")
    x = b.input("x", TensorType("FP32", [1, 3, 8, 8]))
    w = b.param("w", (rng.standard_normal((4, 3, 3, 3)) * 0.3).astype(np.float32))
    (c,) = b.add("Conv2d", [x], {"pads": [1, 1, 1, 1]}, {"weight": w}, name="conv")
    (q,) = b.add("Cast", [c], {"to": "SInt8", "scale": 0.02}, name="quantize")
    h = _add_hardop(b, q, 0.01, "npu_program")
    (f,) = b.add("Cast", [h], {"to": "FP32", "scale": 0.01}, name="dequantize")
    (r,) = b.add("Relu", [f], name="relu")
    (m,) = b.add("MaxPool2d", [r], {"kernel": [2, 2], "strides": [2, 2]}, name="pool")
    return b.build([m])


def grouping_network(seed: int = 0) -> Network:
    """Two runs of TinyNpu operators, with values crossing their boundaries.

    ====  ==============  ===========  =========================================
    id    op              TinyNpu?     why
    ====  ==============  ===========  =========================================
    0     Input           no           the host's (a boundary op)
    1     Conv2d          no           float
    2     Cast quantize   no           only dequantize runs there
    3     Relu int8       yes
    4     MaxPool2d int8  yes          its output is also a network output
    5     HardOp          yes
    6     Cast deq        yes          input from op 5 (TinyNpu)
    7     Conv2d          no
    8     Cast quantize   no
    9     Relu int8       yes
    10    Cast deq        yes          input from op 9
    11    Cast deq of 3   yes          input from op 3 (TinyNpu, an earlier run)
    12    MaxPool2d       no           float
    13    Add             no
    14    MaxPool2d int8  no           dilation 2: the constraint refuses it
    15    Output          no           the host's (a boundary op)
    ====  ==============  ===========  =========================================
    """
    rng = np.random.default_rng(seed)
    b = NetworkBuilder("grouping")
    x = b.input("x", TensorType("FP32", [1, 3, 8, 8]))
    w1 = b.param("w1", (rng.standard_normal((4, 3, 3, 3)) * 0.3).astype(np.float32))
    w2 = b.param("w2", (rng.standard_normal((4, 4, 3, 3)) * 0.3).astype(np.float32))
    (c,) = b.add("Conv2d", [x], {"pads": [1, 1, 1, 1]}, {"weight": w1})
    (q,) = b.add("Cast", [c], {"to": "SInt8", "scale": 0.02})
    (r,) = b.add("Relu", [q])
    (m,) = b.add("MaxPool2d", [r], {"kernel": [2, 2], "strides": [2, 2]})
    h = _add_hardop(b, m, 0.01)
    (f,) = b.add("Cast", [h], {"to": "FP32", "scale": 0.01})
    (g,) = b.add("Conv2d", [f], {"pads": [1, 1, 1, 1]}, {"weight": w2})
    (q2,) = b.add("Cast", [g], {"to": "SInt8", "scale": 0.03})
    (r2,) = b.add("Relu", [q2])
    (f2,) = b.add("Cast", [r2], {"to": "FP32", "scale": 0.03})
    (fr,) = b.add("Cast", [r], {"to": "FP32", "scale": 0.02})
    (pr,) = b.add("MaxPool2d", [fr], {"kernel": [2, 2], "strides": [2, 2]})
    (out,) = b.add("Add", [f2, pr])
    (d,) = b.add("MaxPool2d", [r], {"kernel": [2, 2], "dilations": [2, 2]})
    return b.build([out, m, d])


def reference_twin(net: Network) -> Network:
    """`net` with every TinyNpu ``HardOp`` replaced by the equivalent host ``QLut``.

    The host-only reference of a network using TinyNpu programs: same ids, names, values.
    """
    ops = []
    params = dict(net.params)
    for op in net.ops:
        if op.op_type == "HardOp" and op.attrs["target"] == "tinynpu":
            scale = op.attrs["output_types"][0]["scale"]
            op = Operator(
                op.op_id,
                "QLut",
                op.inputs,
                op.outputs,
                {"out_scale": scale},
                {"table": op.params["program"]},
                op.name,
            )
        ops.append(op)
    return Network(ops, dict(net.values), net.inputs, net.outputs, params, net.name + "_host")
