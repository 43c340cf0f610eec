"""The operators added for real models against onnxruntime on random data (ONNX's node
tests cover them too, on fixed small examples; these vary shapes and attributes)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from netutil import check_model, make_model, rand
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from xrt.network import Network, run_network_reference

N = helper.make_node

CONVT_CASES = {
    "plain": ({}, (3, 4, 3, 3), (1, 3, 5, 5)),
    "stride2": ({"strides": [2, 2]}, (3, 4, 3, 3), (1, 3, 5, 6)),
    "stride2_pads": ({"strides": [2, 2], "pads": [1, 1, 1, 1]}, (4, 2, 4, 4), (2, 4, 6, 6)),
    "output_padding": (
        {"strides": [2, 2], "pads": [1, 1, 1, 1], "output_padding": [1, 1]},
        (3, 2, 3, 3),
        (1, 3, 5, 5),
    ),
    "dilation": ({"dilations": [2, 2]}, (2, 3, 3, 3), (1, 2, 5, 5)),
    "groups": ({"group": 2, "strides": [2, 2]}, (4, 3, 3, 3), (1, 4, 5, 5)),
    "same_upper": ({"auto_pad": "SAME_UPPER", "strides": [2, 2]}, (3, 2, 3, 3), (1, 3, 4, 4)),
    "output_shape": ({"strides": [3, 2], "output_shape": [10, 8]}, (1, 2, 3, 3), (1, 1, 3, 3)),
}


@pytest.mark.parametrize("case", sorted(CONVT_CASES))
def test_conv_transpose(case: str) -> None:
    attrs, wshape, xshape = CONVT_CASES[case]
    inits = {"w": rand(*wshape, seed=4), "b": rand(wshape[1] * attrs.get("group", 1), seed=5)}
    model = make_model(
        [N("ConvTranspose", ["x", "w", "b"], ["y"], **attrs)], {"x": xshape}, ["y"], inits
    )
    check_model(model)


@pytest.mark.parametrize(
    ("attrs", "wshape"),
    [
        ({}, (2, 3, 2, 3, 2)),
        (
            {"strides": [2, 1, 2], "pads": [1, 0, 1, 0, 1, 1], "output_padding": [1, 0, 1]},
            (2, 2, 3, 3, 3),
        ),
        ({"group": 2, "dilations": [1, 2, 1]}, (2, 2, 2, 2, 3)),
        ({"auto_pad": "SAME_UPPER", "strides": [2, 2, 2]}, (2, 1, 3, 2, 2)),
    ],
)
def test_conv_transpose_3d(attrs: dict, wshape: tuple[int, ...]) -> None:
    co = wshape[1] * attrs.get("group", 1)
    inits = {"w": rand(*wshape, seed=4), "b": rand(co, seed=5)}
    model = make_model(
        [N("ConvTranspose", ["x", "w", "b"], ["y"], **attrs)], {"x": (2, 2, 3, 4, 5)}, ["y"], inits
    )
    check_model(model)


@pytest.mark.parametrize(
    ("op", "attrs"),
    [
        ("Conv", {"pads": [2, 1], "strides": [2], "dilations": [2]}),
        ("Conv", {"group": 4, "pads": [1, 1]}),
        ("ConvTranspose", {"strides": [2]}),
        ("MaxPool", {"kernel_shape": [3], "strides": [2], "pads": [1, 1]}),
        ("AveragePool", {"kernel_shape": [4], "strides": [3], "ceil_mode": 1}),
    ],
)
def test_one_dimensional_layers(op: str, attrs: dict) -> None:
    inits = {}
    ins = ["x"]
    if op == "Conv":
        inits["w"] = rand(8, 8 // attrs.get("group", 1), 3, seed=6)
        ins.append("w")
    if op == "ConvTranspose":
        inits["w"] = rand(8, 4, 3, seed=6)
        ins.append("w")
    model = make_model([N(op, ins, ["y"], **attrs)], {"x": (2, 8, 19)}, ["y"], inits)
    check_model(model)


@pytest.mark.parametrize("size", [1, 3, 5])  # onnxruntime refuses even sizes
def test_lrn(size: int) -> None:
    model = make_model(
        [N("LRN", ["x"], ["y"], size=size, alpha=1e-3, beta=0.6, bias=2.0)],
        {"x": (2, 7, 4, 5)},
        ["y"],
    )
    check_model(model)


RESIZE_CASES = [
    ("linear", "half_pixel", [1, 1, 2, 2]),
    ("linear", "align_corners", [1, 1, 1.7, 0.6]),
    ("linear", "asymmetric", [1, 1, 3, 3]),
    ("linear", "pytorch_half_pixel", [1, 1, 0.5, 2.5]),
    ("cubic", "half_pixel", [1, 1, 2, 2]),
    ("cubic", "align_corners", [1, 1, 1.5, 1.5]),
    ("cubic", "asymmetric", [1, 1, 0.75, 2]),
]


@pytest.mark.parametrize(("mode", "ctm", "scales"), RESIZE_CASES)
def test_resize_linear_cubic(mode: str, ctm: str, scales: list[float]) -> None:
    model = make_model(
        [
            N(
                "Resize",
                ["x", "", "scales"],
                ["y"],
                mode=mode,
                coordinate_transformation_mode=ctm,
            )
        ],
        {"x": (1, 3, 6, 7)},
        ["y"],
        {"scales": np.array(scales, np.float32)},
    )
    check_model(model)


@pytest.mark.parametrize(
    ("attrs", "xshape"),
    [
        ({"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}, (2, 3, 7, 8)),
        ({"kernel_shape": [2, 3], "dilations": [2, 1], "ceil_mode": 1}, (1, 2, 7, 6)),
        ({"kernel_shape": [3, 2], "strides": [1, 2], "storage_order": 1}, (2, 2, 5, 7)),
        ({"kernel_shape": [3], "strides": [2], "pads": [1, 1]}, (2, 3, 9)),
    ],
)
def test_maxpool_indices(attrs: dict, xshape: tuple[int, ...]) -> None:
    # The Indices output: each maximum's flat index in the input (NCHW row-major, or H and
    # W column-major with storage_order 1).
    graph = helper.make_graph(
        [N("MaxPool", ["x"], ["y", "i"], **attrs)],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(xshape))],
        [
            helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
            helper.make_tensor_value_info("i", TensorProto.INT64, None),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = min(model.ir_version, 10)
    check_model(onnx.shape_inference.infer_shapes(model, strict_mode=True))


@pytest.mark.parametrize("xshape", [(4, 3, 5, 6), (6, 2, 7), (8, 5)])
def test_batchnorm_training_mode(xshape: tuple[int, ...]) -> None:
    # Training mode normalises with the batch's statistics and updates the running ones
    # by momentum; onnxruntime's inference build lacks it, ONNX's reference evaluator has it.
    c = xshape[1]
    inits = {
        "s": rand(c, seed=2),
        "b": rand(c, seed=3),
        "m": rand(c, seed=4),
        "v": np.abs(rand(c, seed=5)) + 0.5,
    }
    model = make_model(
        [
            N(
                "BatchNormalization",
                ["x", "s", "b", "m", "v"],
                ["y", "rm", "rv"],
                training_mode=1,
                momentum=0.8,
                epsilon=1e-3,
            )
        ],
        {"x": xshape},
        ["y", "rm", "rv"],
        inits,
        opset=15,
    )
    x = rand(*xshape, seed=6) * 3 + 1
    net = Network.from_onnx(model)
    ours = run_network_reference(net, {"x": x})
    ref = ReferenceEvaluator(model).run(None, {"x": x})
    for a, e in zip(ours, ref, strict=True):
        np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
@pytest.mark.parametrize(
    ("roi", "sizes"),
    [
        ([0, 0, 0.2, 0.1, 1, 1, 0.9, 0.8], [1, 2, 5, 4]),
        ([0, 0, -0.3, 0.4, 1, 1, 0.7, 1.5], [1, 2, 5, 3]),  # beyond the input: extrapolated
    ],
)
def test_resize_tf_crop_and_resize(mode: str, roi: list[float], sizes: list[int]) -> None:
    # Every cropped axis changes size: onnxruntime skips an axis whose size is unchanged,
    # crop or not (ONNX's reference does not, nor does xrt).
    model = make_model(
        [
            N(
                "Resize",
                ["x", "roi", "", "sizes"],
                ["y"],
                mode=mode,
                coordinate_transformation_mode="tf_crop_and_resize",
                extrapolation_value=-7.5,
            )
        ],
        {"x": (1, 2, 6, 7)},
        ["y"],
        {"roi": np.array(roi, np.float32), "sizes": np.array(sizes, np.int64)},
    )
    check_model(model)


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
@pytest.mark.parametrize(
    "attrs",
    [
        {"kernel_shape": [2, 3, 2]},
        {"kernel_shape": [3, 3, 3], "strides": [2, 1, 2], "pads": [1, 1, 0, 1, 0, 1]},
        {"kernel_shape": [2, 2, 3], "strides": [2, 2, 2], "ceil_mode": 1},
        {"kernel_shape": [3, 2, 2], "pads": [1, 1, 1, 1, 1, 1], "count_include_pad": 1},
        {"kernel_shape": [2, 2, 2], "auto_pad": "SAME_UPPER", "strides": [2, 2, 2]},
    ],
)
def test_volumetric_pools(op: str, attrs: dict) -> None:
    attrs = dict(attrs)
    if op == "MaxPool":
        attrs.pop("count_include_pad", None)
    model = make_model([N(op, ["x"], ["y"], **attrs)], {"x": (2, 3, 5, 6, 7)}, ["y"])
    check_model(model)


@pytest.mark.parametrize("mode", ["linear", "cubic"])
@pytest.mark.parametrize(
    ("scales", "extra"),
    [
        ([1, 1, 0.6, 0.35], {}),
        ([1, 1, 0.25, 1.5], {"coordinate_transformation_mode": "pytorch_half_pixel"}),
        ([1, 1, 0.5, 0.4], {"exclude_outside": 1}),
    ],
)
def test_resize_antialias(mode: str, scales: list[float], extra: dict) -> None:
    # Downscaling filters through the kernel stretched by 1 / scale; upscaling is unchanged.
    model = make_model(
        [N("Resize", ["x", "", "scales"], ["y"], mode=mode, antialias=1, **extra)],
        {"x": (1, 2, 13, 17)},
        ["y"],
        {"scales": np.array(scales, np.float32)},
        opset=18,
    )
    check_model(model)


@pytest.mark.parametrize("policy", ["not_larger", "not_smaller"])
@pytest.mark.parametrize(("sizes", "axes"), [([9, 11], [2, 3]), ([4, 20], [3, 2]), ([3], [2])])
@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_resize_keep_aspect_ratio(
    policy: str, sizes: list[int], axes: list[int], mode: str
) -> None:
    # One scale over the axes (the smallest or largest of size / n), sizes rounded half up.
    model = make_model(
        [
            N(
                "Resize",
                ["x", "", "", "sizes"],
                ["y"],
                mode=mode,
                keep_aspect_ratio_policy=policy,
                axes=axes,
            )
        ],
        {"x": (1, 2, 6, 7)},
        ["y"],
        {"sizes": np.array(sizes, np.int64)},
        opset=18,
    )
    net = check_model(model)
    ratios = [s / (6, 7)[a - 2] for s, a in zip(sizes, axes, strict=True)]
    r = min(ratios) if policy == "not_larger" else max(ratios)
    want = [int(r * n + 0.5) if a in axes else n for a, n in enumerate((1, 2, 6, 7))]
    assert list(net.values[net.outputs[0]].shape) == want


@pytest.mark.parametrize(
    ("op", "attrs", "inits"),
    [
        ("LayerNormalization", {"axis": -1}, {"s": rand(6, seed=2), "b": rand(6, seed=3)}),
        ("LayerNormalization", {"axis": 1}, {"s": rand(4, 5, 6, seed=2)}),
        ("InstanceNormalization", {}, {"s": rand(4, seed=2), "b": rand(4, seed=3)}),
    ],
)
def test_normalisations(op: str, attrs: dict, inits: dict) -> None:
    model = make_model([N(op, ["x", *inits], ["y"], **attrs)], {"x": (2, 4, 5, 6)}, ["y"], inits)
    check_model(model)


def test_slice_split_gather_tile_expand_depth_space() -> None:
    inits = {
        "st": np.array([5, -1], np.int64),
        "en": np.array([0, -100], np.int64),
        "ax": np.array([2, 3], np.int64),
        "sp": np.array([-2, -3], np.int64),
        "idx": np.array([[2, -1], [0, 1]], np.int64),
        "rep": np.array([1, 2, 1, 1], np.int64),
        "shp": np.array([2, 1, 1, 1], np.int64),
        "split": np.array([1, 3], np.int64),
    }
    nodes = [
        N("Slice", ["x", "st", "en", "ax", "sp"], ["s"]),
        N("Gather", ["x", "idx"], ["g"], axis=1),
        N("Tile", ["x", "rep"], ["t"]),
        N("Expand", ["x", "shp"], ["e"]),
        N("Split", ["x", "split"], ["p0", "p1"], axis=1),
        N("DepthToSpace", ["x"], ["d"], blocksize=2, mode="CRD"),
        N("SpaceToDepth", ["x"], ["z"], blocksize=2),
        N("Squeeze", ["p0", "ax0"], ["q"]),
        N("Unsqueeze", ["q", "ax0"], ["u"]),
    ]
    inits["ax0"] = np.array([1], np.int64)
    model = make_model(nodes, {"x": (1, 4, 6, 8)}, ["s", "g", "t", "e", "p1", "d", "z", "u"], inits)
    check_model(model)


def test_math_comparisons_and_reductions() -> None:
    inits = {"axes": np.array([1, 3], np.int64)}
    nodes = [
        N("Abs", ["x"], ["a"]),
        N("Sqrt", ["a"], ["sq"]),
        N("Exp", ["y"], ["ex"]),
        N("Log", ["sq"], ["lg"]),
        N("Tanh", ["x"], ["th"]),
        N("Erf", ["x"], ["ef"]),
        N("Gelu", ["x"], ["ge"]),
        N("Div", ["x", "ex"], ["dv"]),
        N("Pow", ["a", "y"], ["pw"]),
        N("Max", ["x", "y", "th"], ["mx"]),
        N("Min", ["x", "y"], ["mn"]),
        N("Mean", ["x", "y"], ["me"]),
        N("Sum", ["x", "y", "th"], ["sm"]),
        N("Less", ["x", "y"], ["ls"]),
        N("Where", ["ls", "x", "y"], ["wh"]),
        N("ReduceMean", ["x", "axes"], ["rm"]),
        N("ReduceSum", ["x", "axes"], ["rs"], keepdims=0),
        N("ReduceMax", ["x", "axes"], ["rx"]),
        N("Neg", ["x"], ["ng"]),
    ]
    outs = [
        "sq",
        "ex",
        "lg",
        "th",
        "ef",
        "ge",
        "dv",
        "pw",
        "mx",
        "mn",
        "me",
        "sm",
        "wh",
        "rm",
        "rs",
        "rx",
        "ng",
    ]
    model = make_model(nodes, {"x": (2, 3, 4, 5), "y": (1, 3, 1, 5)}, outs, inits, opset=20)
    check_model(model)
