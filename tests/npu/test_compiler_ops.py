"""Every operator through compiler + golden model, bit-exact against the xrt.ops host kernels.

Shapes, strides, pads, dilations, groups and requantization parameters come from
hypothesis, including the edges of docs/quantization.md: S = 0, S = 46, M = 0, rounding
ties, saturation, every average-pool divisor. Half of the examples compile for tiny buffers
(`SMALL`) so that the tiler must split rows, output blocks and input block passes.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from npu_util import SMALL, assert_npu_exact, i8, single

from xrt.hw.targets import NPU
from xrt.npu.compiler import refusal
from xrt.ops import intmath
from xrt.ops.pool import pool_counts

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _requant(d: st.DrawFn, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-channel (M, S) with the edges mixed in: M = 0, S = 0, S = 46, M = 2**15 - 1."""
    m = rng.integers(2**14, 2**15, n).astype(np.int32)
    s = rng.integers(8, 24, n).astype(np.int32)
    edges = d(st.sampled_from(["none", "m0", "s0", "s46", "mmax", "mixed"]))
    if edges == "m0":
        m[:] = 0
    elif edges == "s0":
        s[:] = 0
    elif edges == "s46":
        s[:] = 46
    elif edges == "mmax":
        m[:] = 2**15 - 1
    elif edges == "mixed":
        m[::3], s[1::3], s[2::3] = 0, 0, 46
    return m, s


@SETTINGS
@given(st.data())
def test_qconv2d(data: st.DataObject) -> None:
    d = data.draw
    depthwise = d(st.booleans())
    if depthwise:
        g, cig, cog = d(st.integers(1, 40)), 1, d(st.integers(1, 2))
    else:
        g, cig, cog = d(st.sampled_from([1, 1, 2, 3])), d(st.integers(1, 20)), d(st.integers(1, 20))
    kh, kw = d(st.integers(1, 3)), d(st.integers(1, 3))
    strides = [d(st.integers(1, 2)), d(st.integers(1, 2))]
    dil = [d(st.integers(1, 2)), d(st.integers(1, 2))]
    pads = [d(st.integers(0, 2)) for _ in range(4)]
    h = max(1, dil[0] * (kh - 1) + 1 - pads[0] - pads[2]) + d(st.integers(0, 10))
    w = max(1, dil[1] * (kw - 1) + 1 - pads[1] - pads[3]) + d(st.integers(0, 10))
    n = d(st.integers(1, 2))
    rng = np.random.default_rng(d(st.integers(0, 2**16)))
    co = g * cog
    m, s = _requant(d, rng, co)
    params = {
        "weight": rng.integers(-127, 128, size=(co, cig, kh, kw), dtype=np.int8),
        "bias": rng.integers(-30000, 30000, co).astype(np.int32),
        "multiplier": m,
        "shift": s,
    }
    attrs = {"strides": strides, "pads": pads, "dilations": dil, "groups": g}
    attrs.update(lo=d(st.integers(-128, 0)), hi=d(st.integers(1, 127)), out_scale=1.0)
    net, feed = single("QConv2d", [i8(rng, n, g * cig, h, w)], attrs, params)
    assert_npu_exact(net, feed, d(st.sampled_from([NPU, SMALL])))


def test_qconv2d_rounding_ties_and_saturation() -> None:
    # acc * M = k * 2**S + 2**(S-1) exactly: ties round towards +infinity; big biases saturate.
    x = np.ones((1, 1, 3, 3), np.int8)
    w = np.ones((4, 1, 1, 1), np.int8)
    bias = np.array([1, -3, 2**30, -(2**30)], np.int32)  # 1+1=2 -> 2/4 tie; -2/4 tie
    params = {"weight": w, "bias": bias, "multiplier": np.full(4, 1, np.int32),
              "shift": np.full(4, 2, np.int32)}  # fmt: skip
    attrs = {"strides": [1, 1], "pads": [0, 0, 0, 0], "dilations": [1, 1], "groups": 1,
             "lo": -128, "hi": 127, "out_scale": 1.0}  # fmt: skip
    net, feed = single("QConv2d", [x], attrs, params)
    assert_npu_exact(net, feed)


@SETTINGS
@given(st.data())
def test_qgemm(data: st.DataObject) -> None:
    d = data.draw
    batch, k, o = d(st.integers(1, 20)), d(st.integers(1, 70)), d(st.integers(1, 40))
    rng = np.random.default_rng(d(st.integers(0, 2**16)))
    m, s = _requant(d, rng, o)
    params = {
        "weight": rng.integers(-127, 128, size=(o, k), dtype=np.int8),
        "bias": rng.integers(-30000, 30000, o).astype(np.int32),
        "multiplier": m,
        "shift": s,
    }
    attrs = {"lo": d(st.integers(-128, 0)), "hi": 127, "out_scale": 1.0}
    net, feed = single("QGemm", [i8(rng, batch, k)], attrs, params)
    assert_npu_exact(net, feed, d(st.sampled_from([NPU, SMALL])))


@SETTINGS
@given(st.data())
def test_qadd_qmul(data: st.DataObject) -> None:
    d = data.draw
    rank4 = d(st.booleans())
    rng = np.random.default_rng(d(st.integers(0, 2**16)))
    if rank4:
        shape = (
            d(st.integers(1, 2)),
            d(st.integers(1, 40)),
            d(st.integers(1, 9)),
            d(st.integers(1, 9)),
        )
        bshape = d(st.sampled_from([shape, (shape[0], shape[1], 1, 1), (1, shape[1], 1, 1)]))
    else:
        shape = (d(st.integers(1, 9)), d(st.integers(1, 50)))
        bshape = shape
    a, b = i8(rng, *shape), i8(rng, *bshape)
    if d(st.booleans()):
        a, b = b, a
    lo = d(st.sampled_from([-128, 0, -20]))
    hi = d(st.sampled_from([127, 6, 100]))
    ma, mb = d(st.integers(0, 2**15 - 1)), d(st.integers(0, 2**15 - 1))
    shift = d(st.integers(0, 46))
    cfg = d(st.sampled_from([NPU, SMALL]))
    net, feed = single(
        "QAdd", [a, b],
        {"mult_a": ma, "mult_b": mb, "shift": shift, "lo": lo, "hi": hi, "out_scale": 1.0},
    )  # fmt: skip
    assert_npu_exact(net, feed, cfg)
    net, feed = single(
        "QMul", [a, b], {"multiplier": ma, "shift": shift, "lo": lo, "hi": hi, "out_scale": 1.0}
    )
    assert_npu_exact(net, feed, cfg)


def _pool_attrs(d: st.DrawFn) -> dict:
    kh, kw = d(st.integers(1, 4)), d(st.integers(1, 4))
    return {
        "kernel": [kh, kw],
        "strides": [d(st.integers(1, 3)), d(st.integers(1, 3))],
        "pads": [
            d(st.integers(0, kh - 1)),
            d(st.integers(0, kw - 1)),
            d(st.integers(0, kh - 1)),
            d(st.integers(0, kw - 1)),
        ],
        "dilations": [d(st.integers(1, 2)), d(st.integers(1, 2))],
        "ceil_mode": d(st.booleans()),
    }


@SETTINGS
@given(st.data())
def test_maxpool_and_avgpool_every_divisor(data: st.DataObject) -> None:
    d = data.draw
    attrs = _pool_attrs(d)
    kh, kw = attrs["kernel"]
    dh, dw = attrs["dilations"]
    h = dh * (kh - 1) + 1 + d(st.integers(0, 9))
    w = dw * (kw - 1) + 1 + d(st.integers(0, 9))
    rng = np.random.default_rng(d(st.integers(0, 2**16)))
    x = i8(rng, d(st.integers(1, 2)), d(st.integers(1, 35)), h, w)
    cfg = d(st.sampled_from([NPU, SMALL]))
    try:
        net, feed = single("MaxPool2d", [x], attrs)
    except Exception:
        return
    assert_npu_exact(net, feed, cfg)
    attrs["count_include_pad"] = d(st.booleans())
    counts = np.unique(pool_counts(attrs, h, w))
    s_in = d(st.sampled_from([1.0, 0.7, 3.0]))
    attrs["requant"] = [[int(k), *intmath.quantize_multiplier(s_in / int(k))] for k in counts]
    attrs.update(lo=d(st.sampled_from([-128, 0])), hi=127, out_scale=1.0)
    net, feed = single("QAvgPool2d", [x], attrs)
    assert_npu_exact(net, feed, cfg)


@SETTINGS
@given(st.data())
def test_gap_clip_relu_lut(data: st.DataObject) -> None:
    d = data.draw
    rng = np.random.default_rng(d(st.integers(0, 2**16)))
    shape = (
        d(st.integers(1, 2)),
        d(st.integers(1, 40)),
        d(st.integers(1, 30)),
        d(st.integers(1, 30)),
    )
    x = i8(rng, *shape)
    cfg = d(st.sampled_from([NPU, SMALL]))
    m, s = d(st.integers(0, 2**15 - 1)), d(st.sampled_from([0, 9, 17, 46]))
    net, feed = single(
        "QGlobalAvgPool",
        [x],
        {"multiplier": m, "shift": s, "lo": -128, "hi": 127, "out_scale": 1.0},
    )
    assert_npu_exact(net, feed, cfg)
    lo = d(st.integers(-128, 0))
    net, feed = single("QClip", [x], {"lo": lo, "hi": d(st.integers(lo, 127))})
    assert_npu_exact(net, feed, cfg)
    net, feed = single("Relu", [x], {})
    assert_npu_exact(net, feed, cfg)
    net, feed = single("QLut", [x], {"out_scale": 1.0}, {"table": i8(rng, 256)})
    assert_npu_exact(net, feed, cfg)


@SETTINGS
@given(st.data())
def test_concat_and_qconcat(data: st.DataObject) -> None:
    d = data.draw
    rng = np.random.default_rng(d(st.integers(0, 2**16)))
    n, h, w = d(st.integers(1, 2)), d(st.integers(1, 8)), d(st.integers(1, 8))
    chans = d(st.lists(st.integers(1, 40), min_size=1, max_size=4))
    xs = [i8(rng, n, c, h, w) for c in chans]
    cfg = d(st.sampled_from([NPU, SMALL]))
    net, feed = single("Concat", xs, {"axis": 1})
    assert_npu_exact(net, feed, cfg)
    ms = [d(st.sampled_from([2**14, 0, 23456, 2**15 - 1])) for _ in chans]
    ss = [d(st.sampled_from([14, 0, 15, 46])) for _ in chans]
    attrs = {"axis": 1, "multipliers": ms, "shifts": ss, "lo": -100, "hi": 120, "out_scale": 1.0}
    net, feed = single("QConcat", xs, attrs)
    assert_npu_exact(net, feed, cfg)


@SETTINGS
@given(st.data())
def test_pad_resize_transpose(data: st.DataObject) -> None:
    d = data.draw
    rng = np.random.default_rng(d(st.integers(0, 2**16)))
    x = i8(
        rng, d(st.integers(1, 2)), d(st.integers(1, 20)), d(st.integers(1, 9)), d(st.integers(1, 9))
    )
    cfg = d(st.sampled_from([NPU, SMALL]))
    p = [
        0,
        0,
        d(st.integers(0, 3)),
        d(st.integers(0, 3)),
        0,
        0,
        d(st.integers(0, 3)),
        d(st.integers(0, 3)),
    ]
    net, feed = single(
        "Pad", [x], {"pads": p, "mode": "constant", "value": float(d(st.sampled_from([0, -128])))}
    )
    assert_npu_exact(net, feed, cfg)
    n, c, h, w = x.shape
    fy, fx = d(st.sampled_from([1, 2, 3])), d(st.sampled_from([1, 2, 3]))
    mode = d(st.sampled_from(["asymmetric", "half_pixel"]))
    attrs = {"sizes": [n, c, h * fy, w * fx], "scales": [1.0, 1.0, float(fy), float(fx)],
             "coordinate_transformation_mode": mode, "nearest_mode": "floor"}  # fmt: skip
    net, feed = single("Resize", [x], attrs)
    assert_npu_exact(net, feed, cfg)
    net, feed = single("Transpose", [x], {"perm": [0, 1, 3, 2]})
    assert_npu_exact(net, feed, cfg)


@pytest.mark.parametrize("cfg", [NPU, SMALL], ids=["npu", "small"])
def test_run_of_ops_is_one_program(cfg) -> None:  # type: ignore[no-untyped-def]
    # conv -> maxpool -> conv (+ residual QAdd) -> GAP -> Flatten -> QGemm in one program.
    from xrt.dtypes import QuantParams, TensorType
    from xrt.network import NetworkBuilder

    rng = np.random.default_rng(1)

    def conv_params(o: int, c: int, k: int) -> dict:
        return {
            "weight": rng.integers(-20, 21, size=(o, c, k, k), dtype=np.int8),
            "bias": rng.integers(-500, 500, o).astype(np.int32),
            "multiplier": rng.integers(2**14, 2**15, o).astype(np.int32),
            "shift": np.full(o, 17, np.int32),
        }

    b = NetworkBuilder("run")
    x = b.input("x", TensorType("SInt8", (1, 5, 12, 12), quant=QuantParams(1.0)))
    conv = {"strides": [1, 1], "pads": [1, 1, 1, 1], "dilations": [1, 1], "groups": 1,
            "lo": 0, "hi": 127, "out_scale": 1.0}  # fmt: skip

    def p(prefix: str, d: dict) -> dict:
        return {k: b.param(f"{prefix}_{k}", v) for k, v in d.items()}

    (y1,) = b.add("QConv2d", [x], conv, p("c1", conv_params(24, 5, 3)))
    (y2,) = b.add("MaxPool2d", [y1], {"kernel": [2, 2], "strides": [2, 2]})
    (y3,) = b.add("QConv2d", [y2], conv, p("c2", conv_params(24, 24, 3)))
    (y4,) = b.add("QAdd", [y3, y2], {"mult_a": 20000, "mult_b": 15000, "shift": 15,
                                     "lo": -128, "hi": 127, "out_scale": 1.0})  # fmt: skip
    (y5,) = b.add("QGlobalAvgPool", [y4], {"multiplier": 29127, "shift": 20, "lo": -128,
                                           "hi": 127, "out_scale": 1.0})  # fmt: skip
    (y6,) = b.add("Flatten", [y5], {"axis": 1})
    gp = {
        "weight": rng.integers(-127, 128, size=(10, 24), dtype=np.int8),
        "bias": rng.integers(-500, 500, 10).astype(np.int32),
        "multiplier": np.full(10, 20000, np.int32),
        "shift": np.full(10, 14, np.int32),
    }
    (y7,) = b.add("QGemm", [y6], {"lo": -128, "hi": 127, "out_scale": 1.0}, p("fc", gp))
    net = b.build([y7, y1])
    prog = assert_npu_exact(net, {"x": i8(rng, 1, 5, 12, 12)}, cfg)
    assert [r.kind for r in prog.bases] == ["const", "input", "output", "output", "scratch"]
    assert prog.scratch_bytes > 0


@pytest.mark.parametrize(("k", "stride", "pad", "dil"), [(7, 2, 3, 1), (3, 2, 0, 1), (3, 1, 2, 2)])
def test_stem_with_columns_folded_into_channels(k: int, stride: int, pad: int, dil: int) -> None:
    # Few input channels: the compiler folds the kw taps into lanes (two convolutions).
    rng = np.random.default_rng(k)
    params = {
        "weight": rng.integers(-127, 128, size=(20, 3, k, k), dtype=np.int8),
        "bias": rng.integers(-9000, 9000, 20).astype(np.int32),
        "multiplier": rng.integers(2**14, 2**15, 20).astype(np.int32),
        "shift": np.full(20, 19, np.int32),
    }
    attrs = {"strides": [stride, stride], "pads": [pad] * 4, "dilations": [dil, dil],
             "groups": 1, "lo": -128, "hi": 127, "out_scale": 1.0}  # fmt: skip
    net, feed = single("QConv2d", [i8(rng, 2, 3, 19, 23)], attrs, params)
    prog = assert_npu_exact(net, feed)
    assert "columns folded into" in prog.layers[0].detail


@SETTINGS
@given(st.data())
def test_flatten_moves_features_across_lanes(data: st.DataObject) -> None:
    # (N, C, H, W) -> (N, C*H*W) with H*W > 1: single-entry selection GEMMs (_movement).
    d = data.draw
    rng = np.random.default_rng(d(st.integers(0, 2**16)))
    n, c = d(st.integers(1, 2)), d(st.integers(1, 40))
    h, w = d(st.integers(1, 7)), d(st.integers(1, 7))
    x = i8(rng, n, c, h, w)
    cfg = d(st.sampled_from([NPU, SMALL]))
    net, feed = single("Flatten", [x], {"axis": 1})
    prog = assert_npu_exact(net, feed, cfg)
    if h * w > 1:
        assert "selection GEMMs" in prog.layers[0].detail
    net, feed = single("Reshape", [x], {"shape": [n, -1]})
    assert_npu_exact(net, feed, cfg)


@SETTINGS
@given(st.data())
def test_channel_shuffle_is_one_program(data: st.DataObject) -> None:
    # ShuffleNet's Reshape (N, G, C/G, H, W) -> Transpose -> Reshape: two aliases and one
    # channel permutation by selection GEMMs, all in one program.
    from xrt.dtypes import QuantParams, TensorType
    from xrt.network import NetworkBuilder

    d = data.draw
    rng = np.random.default_rng(d(st.integers(0, 2**16)))
    n, g, cg = d(st.integers(1, 2)), d(st.integers(1, 5)), d(st.integers(1, 12))
    h, w = d(st.integers(1, 6)), d(st.integers(1, 6))
    c = g * cg
    cfg = d(st.sampled_from([NPU, SMALL]))
    b = NetworkBuilder("shuffle")
    x = b.input("x", TensorType("SInt8", (n, c, h, w), quant=QuantParams(1.0)))
    (y1,) = b.add("Reshape", [x], {"shape": [n, g, cg, h, w]})
    (y2,) = b.add("Transpose", [y1], {"perm": [0, 2, 1, 3, 4]})
    (y3,) = b.add("Reshape", [y2], {"shape": [n, c, h, w]})
    net = b.build([y3])
    prog = assert_npu_exact(net, {"x": i8(rng, n, c, h, w)}, cfg)
    assert len(prog.op_ids) == 3
    # A rank-4 transpose of two channel-like axes never occurs; (N, C, H, W) with the
    # channel axes of a rank-5 tensor reversed in place is the same permutation.
    x4 = i8(rng, n, g, cg, h, w)
    net, feed = single("Transpose", [x4], {"perm": [0, 2, 1, 3, 4]})
    assert_npu_exact(net, feed, cfg)


@SETTINGS
@given(st.data())
def test_conv_with_more_output_blocks_than_half_prm(data: st.DataObject) -> None:
    # SMALL's 16 PRM rows: more than 8 output blocks load PRM rows per output block chunk.
    d = data.draw
    rng = np.random.default_rng(d(st.integers(0, 2**16)))
    co, ci = d(st.integers(129, 200)), d(st.integers(1, 20))
    k = d(st.sampled_from([1, 3]))
    h, w = d(st.integers(k, 6)), d(st.integers(k, 6))
    m, s = _requant(d, rng, co)
    params = {
        "weight": rng.integers(-127, 128, size=(co, ci, k, k), dtype=np.int8),
        "bias": rng.integers(-30000, 30000, co).astype(np.int32),
        "multiplier": m,
        "shift": s,
    }
    attrs = {"strides": [1, 1], "pads": [k // 2] * 4, "dilations": [1, 1], "groups": 1,
             "lo": -128, "hi": 127, "out_scale": 1.0}  # fmt: skip
    net, feed = single("QConv2d", [i8(rng, 1, ci, h, w)], attrs, params)
    assert refusal(net.ops[1], net.values, net.op_params(net.ops[1]), SMALL) is None
    assert_npu_exact(net, feed, SMALL)
