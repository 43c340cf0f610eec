"""Random convolution and pooling configurations against onnxruntime (hypothesis)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from netutil import check_model, make_model
from onnx import helper

from xrt.ops._common import pool_out_size

_SETTINGS = settings(max_examples=40, deadline=None)


@st.composite
def conv_case(
    draw: st.DrawFn,
) -> tuple[dict[str, object], tuple[int, ...], tuple[int, ...], bool, int]:
    g = draw(st.integers(1, 3))
    cig, cog = draw(st.integers(1, 3)), draw(st.integers(1, 2))
    kh, kw = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    sh, sw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    dh, dw = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    pads = [draw(st.integers(0, 2)) for _ in range(4)]
    h = max(1, dh * (kh - 1) + 1 - pads[0] - pads[2]) + draw(st.integers(0, 5))
    w = max(1, dw * (kw - 1) + 1 - pads[1] - pads[3]) + draw(st.integers(0, 5))
    attrs = {
        "group": g,
        "strides": [sh, sw],
        "dilations": [dh, dw],
        "pads": pads,
        "kernel_shape": [kh, kw],
    }
    return (
        attrs,
        (draw(st.integers(1, 2)), g * cig, h, w),
        (g * cog, cig, kh, kw),
        draw(st.booleans()),
        draw(st.integers(0, 2**16)),
    )


@_SETTINGS
@given(conv_case())
def test_random_conv_matches_onnxruntime(
    case: tuple[dict[str, object], tuple[int, ...], tuple[int, ...], bool, int],
) -> None:
    attrs, xshape, wshape, bias, seed = case
    rng = np.random.default_rng(seed)
    inits = {"w": rng.standard_normal(wshape).astype(np.float32)}
    ins = ["x", "w"]
    if bias:
        inits["b"] = rng.standard_normal(wshape[0]).astype(np.float32)
        ins.append("b")
    model = make_model([helper.make_node("Conv", ins, ["y"], **attrs)], {"x": xshape}, ["y"], inits)
    check_model(model, {"x": rng.standard_normal(xshape).astype(np.float32)})


@st.composite
def pool_case(draw: st.DrawFn) -> tuple[str, dict[str, object], tuple[int, ...], int]:
    op = draw(st.sampled_from(["MaxPool", "AveragePool"]))
    kh, kw = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    sh, sw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    dh, dw = (draw(st.integers(1, 2)), draw(st.integers(1, 2))) if op == "MaxPool" else (1, 1)
    pads = [draw(st.integers(0, k - 1)) for k in (kh, kw, kh, kw)]
    ceil = draw(st.booleans())
    h = dh * (kh - 1) + 1 + draw(st.integers(0, 6))
    w = dw * (kw - 1) + 1 + draw(st.integers(0, 6))
    attrs: dict[str, object] = {
        "kernel_shape": [kh, kw],
        "strides": [sh, sw],
        "pads": pads,
        "ceil_mode": int(ceil),
    }
    if op == "MaxPool":
        attrs["dilations"] = [dh, dw]
    else:
        attrs["count_include_pad"] = int(draw(st.booleans()))
    # Keep to shapes where every output window starts inside the input or its begin padding.
    assert pool_out_size(h, kh, sh, pads[0], pads[2], dh, ceil) >= 1
    return op, attrs, (1, draw(st.integers(1, 3)), h, w), draw(st.integers(0, 2**16))


@_SETTINGS
@given(pool_case())
def test_random_pool_matches_onnxruntime(
    case: tuple[str, dict[str, object], tuple[int, ...], int],
) -> None:
    op, attrs, xshape, seed = case
    model = make_model([helper.make_node(op, ["x"], ["y"], **attrs)], {"x": xshape}, ["y"])
    check_model(
        model, {"x": np.random.default_rng(seed).standard_normal(xshape).astype(np.float32)}
    )
