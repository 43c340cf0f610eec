"""The integer kernels against straightforward loop implementations of docs/quantization.md.

The references here use Python integers, one output element at a time, on small shapes.
They share nothing with the numpy kernels but the document. The last tests run whole
quantized networks and recompute every integer op from the int8 values it actually saw.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from netutil import random_feeds
from onnx_zoo import COMPOSITES

from xrt.dtypes import QuantParams, TensorType
from xrt.network import Network, NetworkBuilder, run_network_reference
from xrt.quant import quantize_network


def shift_round(x: int, s: int) -> int:
    """floor((x + 2^(S-1)) / 2^S) with Python's flooring integer division; x for S = 0."""
    return x if s == 0 else (x + (1 << (s - 1))) // (1 << s)


def requant(acc: int, m: int, s: int, lo: int, hi: int) -> int:
    return min(max(shift_round(acc * m, s), lo), hi)


def ref_qconv(op: Any, x: np.ndarray, p: Mapping[str, np.ndarray]) -> np.ndarray:
    a = op.attrs
    w, b, mult, shift = p["weight"], p["bias"], p["multiplier"], p["shift"]
    n_, _c, h_, w_ = x.shape
    co_, cig, kh, kw = w.shape
    sh, sw = a["strides"]
    dh, dw = a["dilations"]
    pt, pl, pb, pr = a["pads"]
    ho = (h_ + pt + pb - dh * (kh - 1) - 1) // sh + 1
    wo = (w_ + pl + pr - dw * (kw - 1) - 1) // sw + 1
    cog = co_ // a["groups"]
    out = np.zeros((n_, co_, ho, wo), dtype=np.int8)
    for n in range(n_):
        for o in range(co_):
            g = o // cog
            for y in range(ho):
                for xx in range(wo):
                    acc = int(b[o])
                    for c in range(cig):
                        for i in range(kh):
                            for j in range(kw):
                                r, q = y * sh - pt + i * dh, xx * sw - pl + j * dw
                                if 0 <= r < h_ and 0 <= q < w_:
                                    acc += int(x[n, g * cig + c, r, q]) * int(w[o, c, i, j])
                    assert -(2**31) <= acc < 2**31
                    out[n, o, y, xx] = requant(acc, int(mult[o]), int(shift[o]), a["lo"], a["hi"])
    return out


def ref_qgemm(op: Any, x: np.ndarray, p: Mapping[str, np.ndarray]) -> np.ndarray:
    a = op.attrs
    w = p["weight"]
    out = np.zeros((x.shape[0], w.shape[0]), dtype=np.int8)
    for m in range(x.shape[0]):
        for o in range(w.shape[0]):
            acc = int(p["bias"][o]) + sum(int(x[m, k]) * int(w[o, k]) for k in range(w.shape[1]))
            out[m, o] = requant(acc, int(p["multiplier"][o]), int(p["shift"][o]), a["lo"], a["hi"])
    return out


def _elementwise(f: Callable[[int, int], int], a: np.ndarray, b: np.ndarray) -> np.ndarray:
    aa, bb = np.broadcast_arrays(a, b)
    return np.array(
        [f(int(u), int(v)) for u, v in zip(aa.ravel(), bb.ravel(), strict=True)], np.int8
    ).reshape(aa.shape)


def ref_qadd(op: Any, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    t = op.attrs
    return _elementwise(
        lambda u, v: min(
            max(shift_round(u * t["mult_a"] + v * t["mult_b"], t["shift"]), t["lo"]), t["hi"]
        ),
        a,
        b,
    )


def ref_qsub(op: Any, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    t = op.attrs
    return _elementwise(
        lambda u, v: min(
            max(shift_round(u * t["mult_a"] - v * t["mult_b"], t["shift"]), t["lo"]), t["hi"]
        ),
        a,
        b,
    )


def ref_qreduce_mean(op: Any, x: np.ndarray) -> np.ndarray:
    """Sum every group of values that share the kept coordinates, one requantize each."""
    t = op.attrs
    axes = sorted(a % x.ndim for a in t["axes"])
    kept = [d for i, d in enumerate(x.shape) if i not in axes]
    out = np.zeros(kept, dtype=np.int8)
    for idx in np.ndindex(*kept) if kept else [()]:
        total = 0
        for red in np.ndindex(*[x.shape[a] for a in axes]):
            full, k, r = [], 0, 0
            for i in range(x.ndim):
                if i in axes:
                    full.append(red[r])
                    r += 1
                else:
                    full.append(idx[k])
                    k += 1
            total += int(x[tuple(full)])
        out[idx] = requant(total, t["multiplier"], t["shift"], t["lo"], t["hi"])
    if t["keepdims"]:
        out = out.reshape([1 if i in axes else d for i, d in enumerate(x.shape)])
    return out


def ref_qmul(op: Any, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    t = op.attrs
    return _elementwise(
        lambda u, v: requant(u * v, t["multiplier"], t["shift"], t["lo"], t["hi"]), a, b
    )


def ref_qconcat(op: Any, *xs: np.ndarray) -> np.ndarray:
    t = op.attrs
    parts = [
        np.vectorize(lambda v, m=m, s=s: requant(int(v), m, s, t["lo"], t["hi"]), otypes=[np.int8])(
            x
        )
        for x, m, s in zip(xs, t["multipliers"], t["shifts"], strict=True)
    ]
    return np.concatenate(parts, axis=t["axis"])


def _out_len(size: int, k: int, s: int, pb: int, pe: int, d: int, ceil: bool) -> int:
    span = d * (k - 1) + 1
    if not ceil:
        return (size + pb + pe - span) // s + 1
    out = -(-(size + pb + pe - span) // s) + 1
    return out - 1 if (out - 1) * s >= size + pb else out


def ref_qavgpool(op: Any, x: np.ndarray) -> np.ndarray:
    t = op.attrs
    table = {k: (m, s) for k, m, s in t["requant"]}
    n_, c_, h_, w_ = x.shape
    (kh, kw), (sh, sw), (dh, dw) = t["kernel"], t["strides"], t["dilations"]
    pt, pl, pb, pr = t["pads"]
    ho = _out_len(h_, kh, sh, pt, pb, dh, t["ceil_mode"])
    wo = _out_len(w_, kw, sw, pl, pr, dw, t["ceil_mode"])
    out = np.zeros((n_, c_, ho, wo), dtype=np.int8)
    for n in range(n_):
        for c in range(c_):
            for y in range(ho):
                for xx in range(wo):
                    total, count = 0, 0
                    for i in range(kh):
                        for j in range(kw):
                            r, q = y * sh - pt + i * dh, xx * sw - pl + j * dw
                            inside = 0 <= r < h_ and 0 <= q < w_
                            in_pad = -pt <= r < h_ + pb and -pl <= q < w_ + pr
                            if inside:
                                total += int(x[n, c, r, q])
                            if inside or (t["count_include_pad"] and in_pad):
                                count += 1
                    m, s = table[count]
                    out[n, c, y, xx] = requant(total, m, s, t["lo"], t["hi"])
    return out


def ref_qgap(op: Any, x: np.ndarray) -> np.ndarray:
    t = op.attrs
    out = np.zeros(x.shape[:2] + (1,) * (x.ndim - 2), dtype=np.int8)
    for n in range(x.shape[0]):
        for c in range(x.shape[1]):
            total = sum(int(v) for v in x[n, c].ravel())
            out[n, c].flat[0] = requant(total, t["multiplier"], t["shift"], t["lo"], t["hi"])
    return out


def ref_qlut(op: Any, x: np.ndarray, p: Mapping[str, np.ndarray]) -> np.ndarray:
    table = p["table"]
    return np.vectorize(lambda v: table[int(v) + 128], otypes=[np.int8])(x)


def ref_qclip(op: Any, x: np.ndarray) -> np.ndarray:
    return np.vectorize(
        lambda v: min(max(int(v), op.attrs["lo"]), op.attrs["hi"]), otypes=[np.int8]
    )(x)


def ref_quantize_cast(op: Any, x: np.ndarray) -> np.ndarray:
    s = op.attrs["scale"]
    return np.vectorize(lambda v: min(max(round(float(v) / s), -128), 127), otypes=[np.int8])(x)


def reference(
    op: Any, inputs: list[np.ndarray], params: Mapping[str, np.ndarray]
) -> np.ndarray | None:
    """The loop reference of `op`, or None for ops that move data without arithmetic."""
    t = op.op_type
    if t == "QConv2d":
        return ref_qconv(op, inputs[0], params)
    if t == "QGemm":
        return ref_qgemm(op, inputs[0], params)
    if t == "QAdd":
        return ref_qadd(op, *inputs)
    if t == "QSub":
        return ref_qsub(op, *inputs)
    if t == "QMul":
        return ref_qmul(op, *inputs)
    if t == "QReduceMean":
        return ref_qreduce_mean(op, inputs[0])
    if t == "QConcat":
        return ref_qconcat(op, *inputs)
    if t == "QAvgPool2d":
        return ref_qavgpool(op, inputs[0])
    if t == "QGlobalAvgPool":
        return ref_qgap(op, inputs[0])
    if t == "QLut":
        return ref_qlut(op, inputs[0], params)
    if t == "QClip":
        return ref_qclip(op, inputs[0])
    if t == "Cast" and op.attrs["scale"] is not None and inputs[0].dtype.kind == "f":
        return ref_quantize_cast(op, inputs[0])
    return None


def check_every_op(net: Network, feed: Mapping[str, np.ndarray]) -> int:
    """Run `net`, recompute each arithmetic op from the values it saw; return how many."""
    env = run_network_reference(net, feed, return_all=True)
    assert isinstance(env, dict)
    checked = 0
    for op in net.ops:
        want = reference(op, [env[v] for v in op.inputs], net.op_params(op))
        if want is None:
            continue
        np.testing.assert_array_equal(env[op.outputs[0]], want, err_msg=op.describe())
        checked += 1
    return checked


# -- single ops, random integer data ----------------------------------------------------


def _single(
    op_type: str,
    inputs: list[np.ndarray],
    attrs: dict[str, Any],
    params: dict[str, np.ndarray],
    scales: list[float],
) -> tuple[Network, dict[str, np.ndarray]]:
    b = NetworkBuilder("one")
    names = [
        b.input(f"x{i}", TensorType("SInt8", a.shape, quant=QuantParams(s)))
        for i, (a, s) in enumerate(zip(inputs, scales, strict=True))
    ]
    refs = {role: b.param(role, arr) for role, arr in params.items()}
    (y,) = b.add(op_type, names, attrs, refs)
    return b.build([y]), {n: a for n, a in zip(names, inputs, strict=True)}


def _i8(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.integers(-128, 128, size=shape, dtype=np.int8)


def _mults(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    return (
        rng.integers(2**14, 2**15, n).astype(np.int32),
        rng.integers(12, 22, n).astype(np.int32),
    )


CONV_VARIANTS = [
    {"strides": [1, 1], "pads": [1, 1, 1, 1], "dilations": [1, 1], "groups": 1},
    {"strides": [2, 1], "pads": [0, 1, 2, 0], "dilations": [1, 2], "groups": 1},
    {"strides": [1, 1], "pads": [1, 1, 1, 1], "dilations": [1, 1], "groups": 2},
    {"strides": [2, 2], "pads": [1, 1, 1, 1], "dilations": [1, 1], "groups": 4},
]


@pytest.mark.parametrize("variant", range(len(CONV_VARIANTS)))
def test_qconv2d_exact(variant: int) -> None:
    rng = np.random.default_rng(variant)
    attrs = dict(CONV_VARIANTS[variant])
    g = attrs["groups"]
    x = _i8(rng, 1, 4, 6, 5)
    w = rng.integers(-127, 128, size=(4 if g == 4 else 6, 4 // g, 3, 3), dtype=np.int8)
    m, s = _mults(rng, w.shape[0])
    params = {
        "weight": w,
        "bias": rng.integers(-3000, 3000, w.shape[0]).astype(np.int32),
        "multiplier": m,
        "shift": s,
    }
    attrs.update(lo=-100 if variant % 2 else 0, hi=127 if variant < 2 else 90, out_scale=0.1)
    net, feed = _single("QConv2d", [x], attrs, params, [0.05])
    assert check_every_op(net, feed) == 1


def test_qgemm_exact() -> None:
    rng = np.random.default_rng(7)
    m, s = _mults(rng, 5)
    params = {
        "weight": _i8(rng, 5, 12),
        "bias": rng.integers(-500, 500, 5).astype(np.int32),
        "multiplier": m,
        "shift": s,
    }
    net, feed = _single("QGemm", [_i8(rng, 3, 12)], {"out_scale": 0.5}, params, [0.1])
    assert check_every_op(net, feed) == 1


@settings(max_examples=25, deadline=None)
@given(
    st.integers(0, 2**31 - 1),
    st.integers(0, 2**15 - 1),
    st.integers(0, 2**15 - 1),
    st.integers(10, 20),
    st.booleans(),
)
def test_qadd_qmul_exact(seed: int, ma: int, mb: int, shift: int, relu: bool) -> None:
    rng = np.random.default_rng(seed)
    a, b = _i8(rng, 2, 3, 4), _i8(rng, 1, 3, 1)
    lo = 0 if relu else -128
    net, feed = _single(
        "QAdd",
        [a, b],
        {"mult_a": ma, "mult_b": mb, "shift": shift, "lo": lo, "hi": 127, "out_scale": 1.0},
        {},
        [1.0, 1.0],
    )
    assert check_every_op(net, feed) == 1
    net, feed = _single(
        "QSub",
        [a, b],
        {"mult_a": ma, "mult_b": mb, "shift": shift, "lo": lo, "hi": 127, "out_scale": 1.0},
        {},
        [1.0, 1.0],
    )
    assert check_every_op(net, feed) == 1
    net, feed = _single(
        "QMul",
        [a, b],
        {"multiplier": ma, "shift": shift + 4, "lo": lo, "hi": 127, "out_scale": 1.0},
        {},
        [1.0, 1.0],
    )
    assert check_every_op(net, feed) == 1


@pytest.mark.parametrize(
    ("axes", "keepdims"), [([1], True), ([2, 3], False), ([-1], True), ([0, 1, 2, 3], False)]
)
def test_qreduce_mean_exact(axes: list[int], keepdims: bool) -> None:
    rng = np.random.default_rng(7)
    x = _i8(rng, 2, 3, 4, 5)
    for m, s in ((29127, 18), (16384, 14), (32767, 20)):
        net, feed = _single(
            "QReduceMean",
            [x],
            {"axes": axes, "keepdims": keepdims, "multiplier": m, "shift": s, "out_scale": 1.0},
            {},
            [1.0],
        )
        assert check_every_op(net, feed) == 1


def test_qconcat_exact() -> None:
    rng = np.random.default_rng(3)
    xs = [_i8(rng, 1, 2, 3, 3), _i8(rng, 1, 3, 3, 3)]
    attrs = {"axis": 1, "multipliers": [2**14, 23456], "shifts": [14, 15], "out_scale": 1.0}
    net, feed = _single("QConcat", xs, attrs, {}, [1.0, 2.0])
    assert check_every_op(net, feed) == 1


AVG_VARIANTS = [
    {
        "kernel": [3, 3],
        "strides": [1, 1],
        "pads": [1, 1, 1, 1],
        "count_include_pad": False,
        "ceil_mode": False,
    },
    {
        "kernel": [3, 3],
        "strides": [2, 2],
        "pads": [1, 1, 1, 1],
        "count_include_pad": True,
        "ceil_mode": True,
    },
    {
        "kernel": [2, 3],
        "strides": [2, 1],
        "pads": [0, 1, 1, 0],
        "count_include_pad": False,
        "ceil_mode": True,
    },
]


@pytest.mark.parametrize("variant", range(len(AVG_VARIANTS)))
def test_qavgpool_exact(variant: int) -> None:
    from xrt.ops import intmath
    from xrt.ops.pool import pool_counts

    rng = np.random.default_rng(variant)
    attrs = {"dilations": [1, 1], **AVG_VARIANTS[variant]}
    x = _i8(rng, 1, 2, 7, 6)
    counts = np.unique(pool_counts(attrs, 7, 6))
    attrs["requant"] = [[int(k), *intmath.quantize_multiplier(0.9 / int(k))] for k in counts]
    attrs.update(lo=-128, hi=127, out_scale=1.0)
    net, feed = _single("QAvgPool2d", [x], attrs, {}, [0.9])
    assert check_every_op(net, feed) == 1


def test_qgap_qlut_qclip_exact() -> None:
    rng = np.random.default_rng(5)
    x = _i8(rng, 2, 3, 4, 5)
    net, feed = _single(
        "QGlobalAvgPool",
        [x],
        {"multiplier": 27000, "shift": 19, "lo": -128, "hi": 127, "out_scale": 1.0},
        {},
        [1.0],
    )
    assert check_every_op(net, feed) == 1
    net, feed = _single("QLut", [x], {"out_scale": 1.0}, {"table": _i8(rng, 256)}, [1.0])
    assert check_every_op(net, feed) == 1
    net, feed = _single("QClip", [x], {"lo": -5, "hi": 60}, {}, [1.0])
    assert check_every_op(net, feed) == 1


# -- whole quantized networks -----------------------------------------------------------


@pytest.mark.parametrize("name", ["residual", "mobilenet", "inception", "fpn", "head"])
def test_quantized_network_every_op_is_exact(name: str) -> None:
    model = COMPOSITES[name]()
    net = Network.from_onnx(model)
    qnet = quantize_network(net, [random_feeds(model, seed=s) for s in range(4)])
    checked = check_every_op(qnet, random_feeds(model, seed=42))
    assert checked >= 3
    assert any(op.op_def.quantized for op in qnet.ops)


def test_shift_round_reference_itself() -> None:
    # The loop references rest on shift_round; pin it to the document's worked examples.
    assert [shift_round(v, 1) for v in (-3, -1, 1, 3)] == [-1, 0, 1, 2]
    assert shift_round(12345 * 20000, 22) == math.floor(12345 * 20000 / 2**22 + 0.5)


@settings(max_examples=30, deadline=None)
@given(st.data())
def test_random_qconv2d_configurations_exact(data: st.DataObject) -> None:
    d = data.draw
    g, cig, cog = d(st.integers(1, 3)), d(st.integers(1, 2)), d(st.integers(1, 2))
    kh, kw = d(st.integers(1, 3)), d(st.integers(1, 3))
    strides = [d(st.integers(1, 2)), d(st.integers(1, 2))]
    dil = [d(st.integers(1, 2)), d(st.integers(1, 2))]
    pads = [d(st.integers(0, 2)) for _ in range(4)]
    h = max(1, dil[0] * (kh - 1) + 1 - pads[0] - pads[2]) + d(st.integers(0, 3))
    w = max(1, dil[1] * (kw - 1) + 1 - pads[1] - pads[3]) + d(st.integers(0, 3))
    rng = np.random.default_rng(d(st.integers(0, 2**16)))
    co = g * cog
    m, s = _mults(rng, co)
    params = {
        "weight": rng.integers(-127, 128, size=(co, cig, kh, kw), dtype=np.int8),
        "bias": rng.integers(-20000, 20000, co).astype(np.int32),
        "multiplier": m,
        "shift": s,
    }
    lo = d(st.integers(-128, 0))
    attrs = {
        "strides": strides,
        "pads": pads,
        "dilations": dil,
        "groups": g,
        "lo": lo,
        "hi": d(st.integers(lo, 127)),
        "out_scale": 1.0,
    }
    net, feed = _single("QConv2d", [_i8(rng, 1, g * cig, h, w)], attrs, params, [1.0])
    assert check_every_op(net, feed) == 1
