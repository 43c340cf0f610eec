"""Post-training quantization of a float network into an int8 network (docs/quantization.md).

Activations: symmetric per-tensor int8 (zero point 0), scale ``amax / 127`` from
calibration. Weights: symmetric per-output-channel int8 in ``[-127, 127]``. Biases: int32 at
scale ``s_in * s_w[c]``, a channel's weight scale raised where its bias would otherwise
break the int32 accumulator bound (`xrt.quant.accumulator`). Every rescale is an integer
multiplier and a rounding right shift (`xrt.ops.intmath`). ReLU / Clip after Conv, Gemm,
Add, Sub or Mul fold into the saturation bounds. Per-channel affine maps (BatchNorm, and Mul
/ Add / Sub / Div by a constant that is the same over every pixel, `xrt.quant.affine`) fold
into the convolution or dense layer they alone follow, in float before quantizing; elsewhere
a chain of them over a rank-4 tensor becomes one depthwise 1x1 ``QConv2d``. Sigmoid,
HardSwish, HardSigmoid and LeakyRelu become 256-entry lookup tables. Ops without an integer
kernel (Softmax, MatMul of two values, Cast, BatchNorm over other ranks) run in float
between a dequantize and a quantize ``Cast``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from xrt.errors import ErrorCode, XrtError
from xrt.network import Network, NetworkBuilder, Operator
from xrt.ops import intmath, is_boundary
from xrt.ops.mathops import UNARY_FLOAT_OPS
from xrt.ops.pool import pool_counts
from xrt.ops.reduce import reduce_axes
from xrt.quant.accumulator import QuantReport, fit_layer
from xrt.quant.affine import AFFINE_OPS, AffineChain, affine_chain, affine_weights, following_chain
from xrt.quant.calibrate import Samples, ValueRange, calibrate

__all__ = [
    "FALLBACK_OPS",
    "INT_SUFFIX",
    "LUT_OPS",
    "PASSTHROUGH_OPS",
    "quantize_network",
    "quantize_weight_per_channel",
    "quantize_with_report",
]

INT_SUFFIX = ":q"
"""An int8 value of the quantized network is named after its float value plus this suffix."""

PASSTHROUGH_OPS = (
    "MaxPool2d",
    "Reshape",
    "Flatten",
    "Transpose",
    "Resize",
    "Identity",
    "Relu",
    "Slice",
    "Expand",
    "Tile",
    "DepthToSpace",
    "SpaceToDepth",
)
"""Ops that run unchanged on int8 and keep their input's scale (Resize: nearest only)."""
LUT_OPS = ("LeakyRelu", "Sigmoid", "HardSwish", "HardSigmoid", *UNARY_FLOAT_OPS)
"""Elementwise ops that become a ``QLut`` table."""
FALLBACK_OPS = ("Softmax", "BatchNorm", "MatMul", "Cast", "HardOp")
"""Ops that stay float (dequantize before, quantize after when needed)."""
_FUSABLE = ("Conv2d", "Gemm", "Add", "Sub", "Mul")


def quantize_weight_per_channel(weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric int8 per output channel (axis 0): ``(q, scales)``.

    ``s[c] = max|w[c]| / 127`` (1.0 for an all-zero channel);
    ``q = clamp(rint(w / s[c]), -127, 127)`` in float64, ties to even.
    """
    w = np.asarray(weight, dtype=np.float64)
    flat = np.abs(w.reshape(w.shape[0], -1))
    amax = flat.max(axis=1) if flat.shape[1] else np.zeros(w.shape[0])
    scales = np.array([intmath.symmetric_scale(a, intmath.WEIGHT_QMAX) for a in amax])
    q = np.rint(w / scales.reshape((-1,) + (1,) * (w.ndim - 1)))
    q = np.clip(q, -intmath.WEIGHT_QMAX, intmath.WEIGHT_QMAX).astype(np.int8)
    return q, scales


def _multipliers(reals: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    pairs = [intmath.quantize_multiplier(float(r)) for r in reals]
    return (
        np.array([m for m, _ in pairs], dtype=np.int32),
        np.array([s for _, s in pairs], dtype=np.int32),
    )


class _Quantizer:
    def __init__(
        self,
        net: Network,
        ranges: Mapping[str, ValueRange],
        fuse: bool,
        name: str,
        fold_affine: bool = True,
    ) -> None:
        self.net = net
        self.ranges = ranges
        self.fuse = fuse
        self.fold_affine = fold_affine
        self.b = NetworkBuilder(name)
        self.float_name: dict[str, str] = {}
        self.int_name: dict[str, str] = {}
        self.scale: dict[str, float] = {}
        self.pending_const: dict[str, Operator] = {}
        self.fused: set[int] = set()
        self.report = QuantReport()

    # -- representations ---------------------------------------------------------------

    def range_scale(self, v: str) -> float:
        if v not in self.ranges:
            raise XrtError(ErrorCode.OUT_OF_RANGE, f"no calibration range for value {v!r}")
        return self.ranges[v].scale

    def copy_param(self, pname: str) -> str:
        if pname not in self.b.params:
            self.b.param(pname, self.net.params[pname])
        return pname

    def as_int(self, v: str) -> str:
        """The int8 value for original value `v` (quantizing it when only float exists)."""
        if v in self.int_name:
            return self.int_name[v]
        if v in self.pending_const:
            op = self.pending_const[v]
            arr = self.net.params[op.params["value"]]
            s = intmath.symmetric_scale(float(np.max(np.abs(arr))) if arr.size else 0.0)
            pname = self.b.param(
                f"{op.params['value']}{INT_SUFFIX}", intmath.quantize(arr, s), unique=True
            )
            out = self.b.unique(v + INT_SUFFIX)
            self.b.add("Constant", [], {"scale": s}, {"value": pname}, outputs=[out], name=op.name)
            self.int_name[v], self.scale[v] = out, s
            return out
        f = self.as_float(v)
        s = self.range_scale(v)
        out = self.b.unique(v + INT_SUFFIX)
        self.b.add("Cast", [f], {"to": "SInt8", "scale": s}, outputs=[out], name=f"quantize {v}")
        self.int_name[v], self.scale[v] = out, s
        return out

    def as_float(self, v: str) -> str:
        """The float value for original value `v` (dequantizing the int8 one when needed)."""
        if v in self.float_name:
            return self.float_name[v]
        if v in self.pending_const:
            op = self.pending_const[v]
            self.b.add(
                "Constant",
                [],
                {},
                {"value": self.copy_param(op.params["value"])},
                outputs=[v],
                name=op.name,
            )
            self.float_name[v] = v
            return v
        q = self.int_name[v]
        to = self.net.values[v].dtype.manual_name
        self.b.add(
            "Cast", [q], {"to": to, "scale": self.scale[v]}, outputs=[v], name=f"dequantize {v}"
        )
        self.float_name[v] = v
        return v

    def set_int(self, v: str, scale: float) -> str:
        name = self.b.unique(v + INT_SUFFIX)
        self.int_name[v], self.scale[v] = name, scale
        return name

    # -- fusion ------------------------------------------------------------------------

    def fused_activation(self, op: Operator, out: str | None = None) -> tuple[str, float, int, int]:
        """(result value, output scale, lo, hi) for `op` (whose result is `out`, default its
        output), absorbing a following ReLU/Clip."""
        out = op.outputs[0] if out is None else out
        users = self.net.consumers(out)
        if (
            self.fuse
            and len(users) == 1
            and users[0].op_type in ("Relu", "Clip")
            and out not in self.net.outputs
        ):
            act = users[0]
            result = act.outputs[0]
            s = self.range_scale(result)
            self.fused.add(act.op_id)
            if act.op_type == "Relu":
                return result, s, 0, intmath.INT8_MAX
            lo = intmath.quantize_scalar(act.attrs["min"], s)
            hi = intmath.quantize_scalar(act.attrs["max"], s)
            return result, s, min(lo, hi), hi  # min > max: every output is max (ONNX)
        return out, self.range_scale(out), intmath.INT8_MIN, intmath.INT8_MAX

    # -- op handlers -------------------------------------------------------------------

    def conv_or_gemm(self, op: Operator) -> None:
        x = op.inputs[0]
        xq = self.as_int(x)
        s_in = self.scale[x]
        weight = self.net.params[op.params["weight"]]
        bias = (
            self.net.params[op.params["bias"]] if "bias" in op.params else np.zeros(weight.shape[0])
        )
        out = op.outputs[0]
        chain = following_chain(self.net, out) if self.fold_affine else None
        if chain is not None:
            # y = a * (W x + bias) + b: fold into the weights and bias, in float64.
            shape = (-1,) + (1,) * (weight.ndim - 1)
            weight = np.asarray(weight, np.float64) * chain.a.reshape(shape)
            bias = np.asarray(bias, np.float64) * chain.a + chain.b
            self.fused.update(o.op_id for o in chain.ops)
            out = chain.result
        result, s_out, lo, hi = self.fused_activation(op, out)
        base = op.name or op.outputs[0]
        fitted = fit_layer(weight, bias, s_in, s_out, op.describe())
        self.report.add(base, fitted)
        wq, bq, s_w = fitted.weight, fitted.bias, fitted.scale
        mult, shift = _multipliers(s_in * s_w / s_out)
        params = {
            "weight": self.b.param(f"{base}.weight{INT_SUFFIX}", wq, unique=True),
            "bias": self.b.param(f"{base}.bias{INT_SUFFIX}", bq, unique=True),
            "multiplier": self.b.param(f"{base}.multiplier", mult, unique=True),
            "shift": self.b.param(f"{base}.shift", shift, unique=True),
        }
        attrs = {**op.attrs, "lo": lo, "hi": hi, "out_scale": s_out}
        out = self.set_int(result, s_out)
        self.b.add("Q" + op.op_type, [xq], attrs, params, outputs=[out], name=op.name)

    def affine(self, op: Operator) -> None:
        """BatchNorm / Mul / Add / Sub / Div: a chain of per-channel affine maps over a rank-4
        tensor becomes one depthwise 1x1 QConv2d (`xrt.quant.affine`); otherwise as before."""
        chain = None
        if self.fold_affine:
            for x in op.inputs[:2]:
                if len(self.net.values[x].shape) == 4:
                    chain = affine_chain(self.net, op, x)
                    if chain is not None:
                        break
        if chain is not None:
            self.depthwise_affine(op, chain)
        elif op.op_type in ("Add", "Sub", "Mul"):
            self.add_mul(op)
        else:
            self.fallback(op)

    def depthwise_affine(self, op: Operator, chain: AffineChain) -> None:
        xq = self.as_int(chain.source)
        s_in = self.scale[chain.source]
        self.fused.update(o.op_id for o in chain.ops)
        wq, bq, s_w = affine_weights(chain.a, chain.b, s_in)
        if intmath.accumulator_bound(wq, bq) > intmath.ACC_MAX:  # affine_weights keeps 2**23
            raise XrtError(ErrorCode.BACKEND_INTERNAL, f"{op.describe()}: bias out of bound")
        result, s_out, lo, hi = self.fused_activation(chain.ops[-1])
        mult, shift = _multipliers(s_in * s_w / s_out)
        base = op.name or op.outputs[0]
        params = {
            "weight": self.b.param(f"{base}.weight{INT_SUFFIX}", wq, unique=True),
            "bias": self.b.param(f"{base}.bias{INT_SUFFIX}", bq, unique=True),
            "multiplier": self.b.param(f"{base}.multiplier", mult, unique=True),
            "shift": self.b.param(f"{base}.shift", shift, unique=True),
        }
        attrs = {
            "strides": [1, 1], "pads": [0, 0, 0, 0], "dilations": [1, 1],
            "groups": int(wq.shape[0]), "lo": lo, "hi": hi, "out_scale": s_out,
        }  # fmt: skip
        out = self.set_int(result, s_out)
        self.b.add("QConv2d", [xq], attrs, params, outputs=[out], name=op.name)

    def add_mul(self, op: Operator) -> None:
        a, b = op.inputs
        aq, bq = self.as_int(a), self.as_int(b)
        sa, sb = self.scale[a], self.scale[b]
        result, s_out, lo, hi = self.fused_activation(op)
        out = self.set_int(result, s_out)
        attrs: dict[str, Any] = {"lo": lo, "hi": hi, "out_scale": s_out}
        if op.op_type in ("Add", "Sub"):
            ma, mb, sh = intmath.quantize_multiplier_pair(sa / s_out, sb / s_out)
            attrs.update(mult_a=ma, mult_b=mb, shift=sh)
            self.b.add("Q" + op.op_type, [aq, bq], attrs, outputs=[out], name=op.name)
        else:
            m, sh = intmath.quantize_multiplier(sa * sb / s_out)
            attrs.update(multiplier=m, shift=sh)
            self.b.add("QMul", [aq, bq], attrs, outputs=[out], name=op.name)

    def concat(self, op: Operator) -> None:
        ins = [self.as_int(v) for v in op.inputs]
        scales = [self.scale[v] for v in op.inputs]
        out_v = op.outputs[0]
        if all(s == scales[0] for s in scales):
            out = self.set_int(out_v, scales[0])
            self.b.add("Concat", ins, dict(op.attrs), outputs=[out], name=op.name)
            return
        s_out = self.range_scale(out_v)
        pairs = [intmath.quantize_multiplier(s / s_out) for s in scales]
        attrs = {
            "axis": op.attrs["axis"],
            "multipliers": [m for m, _ in pairs],
            "shifts": [s for _, s in pairs],
            "out_scale": s_out,
        }
        out = self.set_int(out_v, s_out)
        self.b.add("QConcat", ins, attrs, outputs=[out], name=op.name)

    def passthrough(self, op: Operator) -> None:
        x = op.inputs[0]
        xq = self.as_int(x)
        out = self.set_int(op.outputs[0], self.scale[x])
        self.b.add(op.op_type, [xq], dict(op.attrs), outputs=[out], name=op.name)

    def split(self, op: Operator) -> None:
        x = op.inputs[0]
        xq = self.as_int(x)
        outs = [self.set_int(v, self.scale[x]) for v in op.outputs]
        self.b.add("Split", [xq], dict(op.attrs), outputs=outs, name=op.name)

    def pad(self, op: Operator) -> None:
        x = op.inputs[0]
        xq = self.as_int(x)
        attrs = dict(op.attrs)
        attrs["value"] = float(intmath.quantize_scalar(attrs["value"], self.scale[x]))
        out = self.set_int(op.outputs[0], self.scale[x])
        self.b.add("Pad", [xq], attrs, outputs=[out], name=op.name)

    def clip(self, op: Operator) -> None:
        x = op.inputs[0]
        xq = self.as_int(x)
        s = self.scale[x]
        lo = intmath.quantize_scalar(op.attrs["min"], s)
        hi = intmath.quantize_scalar(op.attrs["max"], s)
        out = self.set_int(op.outputs[0], s)
        self.b.add("QClip", [xq], {"lo": min(lo, hi), "hi": hi}, outputs=[out], name=op.name)

    def avgpool(self, op: Operator) -> None:
        x = op.inputs[0]
        xq = self.as_int(x)
        s_in = self.scale[x]
        out_v = op.outputs[0]
        s_out = self.range_scale(out_v)
        h, w = self.net.values[x].shape[2:]
        table = []
        for k in np.unique(pool_counts(op.attrs, h, w)):
            m, sh = intmath.quantize_multiplier(s_in / (s_out * int(k)))
            table.append([int(k), m, sh])
        attrs = {**op.attrs, "requant": table, "out_scale": s_out}
        out = self.set_int(out_v, s_out)
        self.b.add("QAvgPool2d", [xq], attrs, outputs=[out], name=op.name)

    def gap(self, op: Operator) -> None:
        x = op.inputs[0]
        xq = self.as_int(x)
        out_v = op.outputs[0]
        s_out = self.range_scale(out_v)
        k = math.prod(self.net.values[x].shape[2:])
        m, sh = intmath.quantize_multiplier(self.scale[x] / (s_out * k))
        attrs = {"multiplier": m, "shift": sh, "out_scale": s_out}
        out = self.set_int(out_v, s_out)
        self.b.add("QGlobalAvgPool", [xq], attrs, outputs=[out], name=op.name)

    def reduce_mean(self, op: Operator) -> None:
        x = op.inputs[0]
        shape = self.net.values[x].shape
        axes = reduce_axes(op, len(shape))
        if axes is None:
            self.fallback(op)
            return
        xq = self.as_int(x)
        out_v = op.outputs[0]
        s_out = self.range_scale(out_v)
        count = math.prod(shape[a] for a in axes)
        m, sh = intmath.quantize_multiplier(self.scale[x] / (s_out * count))
        attrs = {
            "axes": list(axes),
            "keepdims": op.attrs["keepdims"],
            "multiplier": m,
            "shift": sh,
            "out_scale": s_out,
        }
        out = self.set_int(out_v, s_out)
        self.b.add("QReduceMean", [xq], attrs, outputs=[out], name=op.name)

    def lut(self, op: Operator) -> None:
        x = op.inputs[0]
        xq = self.as_int(x)
        out_v = op.outputs[0]
        s_out = self.range_scale(out_v)
        grid = intmath.dequantize(np.arange(-128, 128), self.scale[x])
        (fx,) = op.op_def.forward(op, [grid], {})
        table = intmath.quantize(fx, s_out)
        pname = self.b.param(f"{op.name or out_v}.table", table, unique=True)
        out = self.set_int(out_v, s_out)
        self.b.add(
            "QLut", [xq], {"out_scale": s_out}, {"table": pname}, outputs=[out], name=op.name
        )

    def fallback(self, op: Operator) -> None:
        ins = [self.as_float(v) for v in op.inputs]
        params = {role: self.copy_param(p) for role, p in op.params.items()}
        self.b.add(op.op_type, ins, dict(op.attrs), params, outputs=list(op.outputs), name=op.name)
        for v in op.outputs:
            self.float_name[v] = v

    def constant(self, op: Operator) -> None:
        self.pending_const[op.outputs[0]] = op

    def run(self, dequantize_outputs: bool) -> Network:
        handlers: dict[str, Callable[[Operator], None]] = {
            "Conv2d": self.conv_or_gemm,
            "Gemm": self.conv_or_gemm,
            **{t: self.affine for t in AFFINE_OPS},
            "ReduceMean": self.reduce_mean,
            "Concat": self.concat,
            "Split": self.split,
            "Pad": self.pad,
            "Clip": self.clip,
            "AvgPool2d": self.avgpool,
            "GlobalAvgPool": self.gap,
            "Constant": self.constant,
            **{t: self.passthrough for t in PASSTHROUGH_OPS},
            **{t: self.lut for t in LUT_OPS},
        }
        for v in self.net.inputs:
            self.b.input(v, self.net.values[v])
            self.float_name[v] = v
        for op in self.net.ops:
            if op.op_id in self.fused or is_boundary(op):  # the builder makes its own
                continue
            if op.op_def.quantized:
                raise XrtError(
                    ErrorCode.WRONG_TYPE, f"{op.describe()}: the network is already quantized"
                )
            handler = handlers.get(op.op_type, self.fallback)
            if handler is not self.fallback and (
                any(not self.net.values[v].dtype.is_float for v in op.inputs)
                or any(not self.net.values[v].dtype.is_float for v in op.outputs)
                or (op.op_type == "Resize" and op.attrs["mode"] != "nearest")
            ):
                handler = self.fallback
            handler(op)
        outputs = [
            self.as_float(v) if dequantize_outputs else self.as_int(v) for v in self.net.outputs
        ]
        return self.b.build(outputs)


def quantize_network(
    network: Network,
    samples: Samples | None = None,
    *,
    ranges: Mapping[str, ValueRange] | None = None,
    fuse_activations: bool = True,
    dequantize_outputs: bool = True,
    name: str | None = None,
    fold_affine: bool = True,
) -> Network:
    """Quantize a float network to int8 (post-training, docs/quantization.md).

    Args:
        network: The float network (e.g. from `Network.from_onnx`).
        samples: Calibration inputs (see `xrt.quant.calibrate`); ignored when `ranges` is given.
        ranges: Precomputed value ranges (from `calibrate`).
        fuse_activations: Fold ReLU/Clip after Conv2d/Gemm/Add/Mul into saturation bounds.
        dequantize_outputs: End with dequantize Casts so outputs are float under their
            original names (else the outputs are the int8 values).
        name: Name of the result; default ``<network name>_int8``.
        fold_affine: Fold per-channel affine maps (BatchNorm, Mul / Add / Sub / Div by a
            per-channel or per-tensor constant) into the convolution or dense layer they
            alone follow, and turn other chains of them over rank-4 tensors into depthwise
            1x1 ``QConv2d`` (`xrt.quant.affine`); without it they quantize one by one
            (``QMul`` / ``QAdd`` with int8 constants; BatchNorm in float).

    Returns:
        A new network: the same inputs (float; quantized by ``Cast`` ops inside), int8 values
        named ``<float name>:q``, integer ops (``QConv2d``, ``QAdd``...).

    Raises:
        XrtError: 11003 without samples or ranges, or when a rescale factor cannot be
            represented; 11010 when the network is already quantized.
    """
    return quantize_with_report(
        network,
        samples,
        ranges=ranges,
        fuse_activations=fuse_activations,
        dequantize_outputs=dequantize_outputs,
        name=name,
        fold_affine=fold_affine,
    )[0]


def quantize_with_report(
    network: Network,
    samples: Samples | None = None,
    *,
    ranges: Mapping[str, ValueRange] | None = None,
    fuse_activations: bool = True,
    dequantize_outputs: bool = True,
    name: str | None = None,
    fold_affine: bool = True,
) -> tuple[Network, QuantReport]:
    """`quantize_network`, and what it changed beyond rounding to keep every convolution's
    and dense layer's int32 accumulator in range (`QuantReport`: raised weight scales,
    clamped biases; ``xrt compile`` and ``xrt run`` print it)."""
    if ranges is None:
        if samples is None:
            raise XrtError(
                ErrorCode.OUT_OF_RANGE, "quantize_network needs calibration samples or ranges"
            )
        ranges = calibrate(network, samples)
    q = _Quantizer(network, ranges, fuse_activations, name or f"{network.name}_int8", fold_affine)
    return q.run(dequantize_outputs), q.report
