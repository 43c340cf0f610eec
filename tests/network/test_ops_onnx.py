"""Every operator and attribute variant against onnxruntime (float, rtol 1e-4)."""

from __future__ import annotations

import numpy as np
import pytest
from netutil import check_model, make_model, rand
from onnx import helper, numpy_helper

from xrt.network import run_network_reference

N = helper.make_node

CONV_CASES = {
    "plain": ({}, (6, 3, 3, 3), (1, 3, 9, 9), True),
    "stride2_asym_pads": (
        {"strides": [2, 2], "pads": [0, 1, 1, 0]},
        (4, 3, 3, 3),
        (2, 3, 10, 9),
        True,
    ),
    "dilation2": ({"dilations": [2, 2], "pads": [2, 2, 2, 2]}, (5, 3, 3, 3), (1, 3, 11, 11), True),
    "groups2": ({"group": 2, "pads": [1, 1, 1, 1]}, (6, 2, 3, 3), (1, 4, 8, 8), True),
    "depthwise": (
        {"group": 8, "pads": [1, 1, 1, 1], "strides": [2, 2]},
        (8, 1, 3, 3),
        (1, 8, 9, 9),
        True,
    ),
    "depthwise_mult2": ({"group": 4, "pads": [1, 1, 1, 1]}, (8, 1, 3, 3), (1, 4, 7, 7), False),
    "pointwise": ({}, (16, 8, 1, 1), (1, 8, 5, 5), True),
    "pointwise_stride2": ({"strides": [2, 2]}, (16, 8, 1, 1), (1, 8, 6, 6), True),
    "nonsquare_kernel": (
        {"pads": [1, 2, 1, 2], "strides": [1, 2]},
        (3, 2, 3, 5),
        (1, 2, 8, 10),
        True,
    ),
    "same_upper": ({"auto_pad": "SAME_UPPER", "strides": [2, 2]}, (4, 3, 4, 4), (1, 3, 9, 9), True),
    "same_lower": ({"auto_pad": "SAME_LOWER", "strides": [2, 2]}, (4, 3, 4, 4), (1, 3, 9, 9), True),
    "valid": ({"auto_pad": "VALID", "strides": [3, 3]}, (4, 3, 3, 3), (1, 3, 10, 10), False),
    "large_kernel_7x7_s2": (
        {"strides": [2, 2], "pads": [3, 3, 3, 3]},
        (8, 3, 7, 7),
        (1, 3, 32, 32),
        True,
    ),
}


@pytest.mark.parametrize("case", sorted(CONV_CASES))
def test_conv(case: str) -> None:
    attrs, wshape, xshape, bias = CONV_CASES[case]
    inits = {"w": rand(*wshape, seed=2)}
    ins = ["x", "w"]
    if bias:
        inits["b"] = rand(wshape[0], seed=3)
        ins.append("b")
    model = make_model([N("Conv", ins, ["y"], name="conv", **attrs)], {"x": xshape}, ["y"], inits)
    net = check_model(model)
    assert [op.op_type for op in net.ops] == ["Input", "Conv2d", "Output"]


POOL_CASES = {
    "max_k2s2": ("MaxPool", {"kernel_shape": [2, 2], "strides": [2, 2]}, (1, 3, 8, 8)),
    "max_k3s2p1": (
        "MaxPool",
        {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]},
        (1, 4, 9, 9),
    ),
    "max_ceil": (
        "MaxPool",
        {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1},
        (1, 2, 10, 10),
    ),
    "max_ceil_pad": (
        "MaxPool",
        {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1, "pads": [1, 1, 1, 1]},
        (1, 2, 7, 8),
    ),
    "max_dilation": ("MaxPool", {"kernel_shape": [2, 2], "dilations": [2, 2]}, (1, 2, 7, 7)),
    "max_same_upper": (
        "MaxPool",
        {"kernel_shape": [3, 3], "strides": [2, 2], "auto_pad": "SAME_UPPER"},
        (1, 2, 9, 9),
    ),
    "avg_k2s2": ("AveragePool", {"kernel_shape": [2, 2], "strides": [2, 2]}, (1, 3, 8, 8)),
    "avg_pad_exclude": (
        "AveragePool",
        {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]},
        (1, 3, 6, 6),
    ),
    "avg_pad_include": (
        "AveragePool",
        {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "count_include_pad": 1},
        (1, 3, 6, 6),
    ),
    "avg_ceil": (
        "AveragePool",
        {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1},
        (1, 2, 10, 10),
    ),
    "avg_ceil_pad_include": (
        "AveragePool",
        {
            "kernel_shape": [3, 3],
            "strides": [2, 2],
            "ceil_mode": 1,
            "pads": [1, 1, 1, 1],
            "count_include_pad": 1,
        },
        (1, 2, 8, 8),
    ),
    "avg_asym_pads": (
        "AveragePool",
        {"kernel_shape": [2, 3], "strides": [1, 2], "pads": [0, 1, 1, 2]},
        (1, 2, 7, 9),
    ),
}


@pytest.mark.parametrize("case", sorted(POOL_CASES))
def test_pool(case: str) -> None:
    op, attrs, xshape = POOL_CASES[case]
    model = make_model([N(op, ["x"], ["y"], name="pool", **attrs)], {"x": xshape}, ["y"])
    check_model(model)


def test_global_average_pool() -> None:
    model = make_model([N("GlobalAveragePool", ["x"], ["y"])], {"x": (2, 5, 7, 6)}, ["y"])
    check_model(model)


UNARY = {
    "relu": ([N("Relu", ["x"], ["y"])], {}),
    "leaky_relu": ([N("LeakyRelu", ["x"], ["y"], alpha=0.1)], {}),
    "leaky_relu_default": ([N("LeakyRelu", ["x"], ["y"])], {}),
    "sigmoid": ([N("Sigmoid", ["x"], ["y"])], {}),
    "hard_swish": ([N("HardSwish", ["x"], ["y"])], {}),
    "hard_sigmoid": ([N("HardSigmoid", ["x"], ["y"], alpha=0.3, beta=0.4)], {}),
    "relu6_clip_inputs": (
        [N("Clip", ["x", "lo", "hi"], ["y"])],
        {"lo": np.array(0.0, np.float32), "hi": np.array(6.0, np.float32)},
    ),
    "clip_min_only": ([N("Clip", ["x", "lo"], ["y"])], {"lo": np.array(-0.5, np.float32)}),
    "clip_max_only": ([N("Clip", ["x", "", "hi"], ["y"])], {"hi": np.array(0.25, np.float32)}),
}


@pytest.mark.parametrize("case", sorted(UNARY))
def test_unary(case: str) -> None:
    nodes, inits = UNARY[case]
    model = make_model(nodes, {"x": (2, 3, 5, 5)}, ["y"], inits)
    x = rand(2, 3, 5, 5, seed=4, scale=5.0)
    check_model(model, {"x": x})


def test_sigmoid_extremes_do_not_overflow() -> None:
    model = make_model([N("Sigmoid", ["x"], ["y"])], {"x": (1, 6)}, ["y"])
    x = np.array([[-1000.0, -90.0, -1e-3, 0.0, 50.0, 1000.0]], np.float32)
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        check_model(model, {"x": x})


@pytest.mark.parametrize(
    ("op", "a_shape", "b_shape", "b_const"),
    [
        ("Add", (2, 4, 5, 5), (2, 4, 5, 5), False),
        ("Add", (1, 4, 5, 5), (1, 4, 1, 1), True),
        ("Add", (1, 4, 5, 5), (5,), False),
        ("Mul", (1, 4, 5, 5), (1, 4, 1, 1), False),
        ("Mul", (1, 4, 5, 5), (), True),
        ("Mul", (3, 1, 5), (1, 4, 1), False),
    ],
)
def test_binary(op: str, a_shape: tuple[int, ...], b_shape: tuple[int, ...], b_const: bool) -> None:
    inputs = {"a": a_shape}
    inits = {}
    if b_const:
        inits["b"] = rand(*b_shape, seed=5)
    else:
        inputs["b"] = b_shape
    model = make_model([N(op, ["a", "b"], ["y"])], inputs, ["y"], inits)
    check_model(model)


@pytest.mark.parametrize("axis", [1, -1, 0])
def test_concat(axis: int) -> None:
    shapes = {
        1: [(1, 2, 4, 4), (1, 3, 4, 4), (1, 1, 4, 4)],
        -1: [(1, 2, 4, 1), (1, 2, 4, 3), (1, 2, 4, 2)],
    }
    shapes[0] = [(1, 2, 3, 3), (2, 2, 3, 3), (1, 2, 3, 3)]
    ins = {f"x{i}": s for i, s in enumerate(shapes[axis])}
    model = make_model([N("Concat", list(ins), ["y"], axis=axis)], ins, ["y"])
    check_model(model)


def test_concat_with_constant_input() -> None:
    model = make_model(
        [N("Concat", ["x", "c"], ["y"], axis=1)],
        {"x": (1, 2, 3, 3)},
        ["y"],
        {"c": rand(1, 1, 3, 3)},
    )
    net = check_model(model)
    assert [op.op_type for op in net.ops] == ["Input", "Constant", "Concat", "Output"]


@pytest.mark.parametrize("shape", [[0, -1], [2, 0, 3, -1], [-1], [1, 30, 2]])
def test_reshape(shape: list[int]) -> None:
    model = make_model(
        [N("Reshape", ["x", "s"], ["y"])],
        {"x": (2, 5, 3, 2)},
        ["y"],
        {"s": np.array(shape, np.int64)},
    )
    if shape == [1, 30, 2]:
        model = make_model(
            [N("Reshape", ["x", "s"], ["y"])],
            {"x": (1, 5, 3, 4)},
            ["y"],
            {"s": np.array(shape, np.int64)},
        )
    check_model(model)


@pytest.mark.parametrize("axis", [0, 1, 2, 4, -1])
def test_flatten(axis: int) -> None:
    model = make_model([N("Flatten", ["x"], ["y"], axis=axis)], {"x": (2, 3, 4, 5)}, ["y"])
    check_model(model)


@pytest.mark.parametrize("perm", [[0, 2, 3, 1], [3, 2, 1, 0], None])
def test_transpose(perm: list[int] | None) -> None:
    kw = {} if perm is None else {"perm": perm}
    model = make_model([N("Transpose", ["x"], ["y"], **kw)], {"x": (2, 3, 4, 5)}, ["y"])
    check_model(model)


GEMM_CASES = {
    "transB_bias": ({"transB": 1}, (4, 10), (6, 10), (6,)),
    "alpha_beta": ({"alpha": 0.5, "beta": 2.0}, (4, 10), (10, 6), (6,)),
    "bias_row": ({}, (3, 8), (8, 5), (1, 5)),
    "bias_matrix": ({"beta": 0.5}, (3, 8), (8, 5), (3, 5)),
    "no_bias": ({}, (3, 8), (8, 5), None),
    "transA": ({"transA": 1, "transB": 1}, (8, 3), (5, 8), (5,)),
}


@pytest.mark.parametrize("case", sorted(GEMM_CASES))
def test_gemm(case: str) -> None:
    attrs, a_shape, b_shape, c_shape = GEMM_CASES[case]
    inits = {"B": rand(*b_shape, seed=6)}
    ins = ["A", "B"]
    if c_shape is not None:
        inits["C"] = rand(*c_shape, seed=7)
        ins.append("C")
    model = make_model([N("Gemm", ins, ["y"], **attrs)], {"A": a_shape}, ["y"], inits)
    check_model(model)


def test_gemm_dynamic_b() -> None:
    model = make_model(
        [N("Gemm", ["A", "B", "C"], ["y"], alpha=2.0, transB=1)],
        {"A": (3, 4), "B": (5, 4), "C": (5,)},
        ["y"],
    )
    check_model(model)


def test_matmul_constant_is_gemm() -> None:
    model = make_model([N("MatMul", ["x", "w"], ["y"])], {"x": (3, 8)}, ["y"], {"w": rand(8, 4)})
    net = check_model(model)
    assert [op.op_type for op in net.ops] == ["Input", "Gemm", "Output"]


@pytest.mark.parametrize(
    ("a", "b"), [((2, 3, 4), (2, 4, 5)), ((2, 3, 4), (4, 6)), ((4,), (2, 4, 3)), ((3, 4), (4,))]
)
def test_matmul_dynamic(a: tuple[int, ...], b: tuple[int, ...]) -> None:
    model = make_model([N("MatMul", ["a", "b"], ["y"])], {"a": a, "b": b}, ["y"])
    check_model(model)


def _bn_params(c: int, seed: int = 8) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "g": rng.uniform(0.5, 1.5, c).astype(np.float32),
        "be": rng.standard_normal(c).astype(np.float32),
        "m": rng.standard_normal(c).astype(np.float32),
        "v": rng.uniform(0.2, 2.0, c).astype(np.float32),
    }


def test_batchnorm_folds_into_conv() -> None:
    inits = {"w": rand(6, 3, 3, 3), **_bn_params(6)}
    model = make_model(
        [
            N("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
            N("BatchNormalization", ["c", "g", "be", "m", "v"], ["y"], epsilon=1e-3),
        ],
        {"x": (1, 3, 8, 8)},
        ["y"],
        inits,
    )
    net = check_model(model)
    assert [op.op_type for op in net.ops] == ["Input", "Conv2d", "Output"]
    assert net.outputs == ("y",)
    unfolded = check_model(model, fold_batchnorm=False)
    assert [op.op_type for op in unfolded.ops] == ["Input", "Conv2d", "BatchNorm", "Output"]


def test_batchnorm_not_folded_when_conv_output_is_shared() -> None:
    inits = {"w": rand(4, 3, 1, 1), **_bn_params(4)}
    model = make_model(
        [
            N("Conv", ["x", "w"], ["c"]),
            N("BatchNormalization", ["c", "g", "be", "m", "v"], ["bn"]),
            N("Add", ["bn", "c"], ["y"]),
        ],
        {"x": (1, 3, 5, 5)},
        ["y"],
        inits,
    )
    net = check_model(model)
    assert [op.op_type for op in net.ops] == ["Input", "Conv2d", "BatchNorm", "Add", "Output"]


def test_batchnorm_standalone_on_input() -> None:
    model = make_model(
        [N("BatchNormalization", ["x", "g", "be", "m", "v"], ["y"])],
        {"x": (2, 5, 3, 3)},
        ["y"],
        _bn_params(5),
    )
    check_model(model)


@pytest.mark.parametrize(
    ("opset", "axis", "shape"),
    [(13, -1, (2, 10)), (13, 1, (2, 4, 3, 3)), (11, 1, (2, 4, 3, 3)), (11, -1, (3, 7))],
)
def test_softmax(opset: int, axis: int, shape: tuple[int, ...]) -> None:
    model = make_model([N("Softmax", ["x"], ["y"], axis=axis)], {"x": shape}, ["y"], opset=opset)
    check_model(model, {"x": rand(*shape, scale=4.0)})


RESIZE_CASES = {
    "x2_asymmetric_floor": ([1, 1, 2, 2], None, "asymmetric", "floor", (1, 2, 4, 5)),
    "x2_half_pixel": ([1, 1, 2, 2], None, "half_pixel", "round_prefer_floor", (1, 2, 4, 5)),
    "x3_half_pixel_ceil": ([1, 1, 3, 3], None, "half_pixel", "round_prefer_ceil", (1, 2, 3, 4)),
    "sizes_align_corners": (
        None,
        [1, 2, 7, 9],
        "align_corners",
        "round_prefer_floor",
        (1, 2, 4, 5),
    ),
    "down_half": ([1, 1, 0.5, 0.5], None, "asymmetric", "ceil", (1, 2, 8, 6)),
    "pytorch_half_pixel": (
        None,
        [1, 2, 9, 1],
        "pytorch_half_pixel",
        "round_prefer_floor",
        (1, 2, 4, 5),
    ),
    "tf_half_pixel_for_nn": (
        [1, 1, 1.5, 2.5],
        None,
        "tf_half_pixel_for_nn",
        "round_prefer_ceil",
        (1, 2, 4, 4),
    ),
}


@pytest.mark.parametrize("case", sorted(RESIZE_CASES))
def test_resize_nearest(case: str) -> None:
    scales, sizes, ctm, nearest, xshape = RESIZE_CASES[case]
    inits = {"roi": np.zeros(0, np.float32)}
    ins = ["x", "roi"]
    if scales is not None:
        inits["scales"] = np.array(scales, np.float32)
        ins.append("scales")
    else:
        inits["sizes"] = np.array(sizes, np.int64)
        ins += ["", "sizes"]
    node = N(
        "Resize",
        ins,
        ["y"],
        mode="nearest",
        coordinate_transformation_mode=ctm,
        nearest_mode=nearest,
    )
    check_model(make_model([node], {"x": xshape}, ["y"], inits))


def test_resize_opset11() -> None:
    inits = {"roi": np.zeros(0, np.float32), "scales": np.array([1, 1, 2, 2], np.float32)}
    node = N("Resize", ["x", "roi", "scales"], ["y"], mode="nearest")
    check_model(make_model([node], {"x": (1, 3, 3, 3)}, ["y"], inits, opset=11))


@pytest.mark.parametrize(
    ("mode", "pads", "value"),
    [
        ("constant", [0, 0, 1, 2, 0, 0, 2, 1], 1.5),
        ("constant", [0, 1, 0, 0, 0, 0, 1, 0], None),
        ("reflect", [0, 0, 2, 1, 0, 0, 1, 2], None),
        ("edge", [0, 0, 1, 3, 0, 0, 2, 0], None),
    ],
)
def test_pad(mode: str, pads: list[int], value: float | None) -> None:
    inits = {"p": np.array(pads, np.int64)}
    ins = ["x", "p"]
    if value is not None:
        inits["v"] = np.array(value, np.float32)
        ins.append("v")
    check_model(make_model([N("Pad", ins, ["y"], mode=mode)], {"x": (1, 2, 4, 5)}, ["y"], inits))


def test_identity_and_dropout_are_removed() -> None:
    model = make_model(
        [
            N("Identity", ["x"], ["a"]),
            N("Relu", ["a"], ["b"]),
            N("Dropout", ["b"], ["c"]),
            N("Sigmoid", ["c"], ["y"]),
        ],
        {"x": (1, 4)},
        ["y"],
    )
    net = check_model(model)
    assert [op.op_type for op in net.ops] == ["Input", "Relu", "Sigmoid", "Output"]


def test_identity_as_output_keeps_the_output_name() -> None:
    model = make_model([N("Relu", ["x"], ["a"]), N("Identity", ["a"], ["y"])], {"x": (1, 4)}, ["y"])
    net = check_model(model)
    assert net.outputs == ("y",)


def test_shape_gather_concat_reshape_is_folded() -> None:
    # What torch.onnx exports for x.view(x.size(0), -1).
    nodes = [
        N("Shape", ["x"], ["s"]),
        N("Gather", ["s", "i0"], ["n"], axis=0),
        N("Unsqueeze", ["n", "ax0"], ["n1"]),
        N("Concat", ["n1", "minus1"], ["shape"], axis=0),
        N("Reshape", ["x", "shape"], ["y"]),
    ]
    inits = {
        "i0": np.array(0, np.int64),
        "ax0": np.array([0], np.int64),
        "minus1": np.array([-1], np.int64),
    }
    net = check_model(make_model(nodes, {"x": (2, 3, 4, 4)}, ["y"], inits))
    assert [op.op_type for op in net.ops] == ["Input", "Reshape", "Output"]


def test_symbolic_batch_becomes_one_or_given() -> None:
    graph = helper.make_graph(
        [N("Relu", ["x"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", 1, ["N", 3, 4, 4])],
        [helper.make_tensor_value_info("y", 1, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    from xrt.network import Network

    assert Network.from_onnx(model).values["x"].shape == (1, 3, 4, 4)
    net = Network.from_onnx(model, {"x": [5, 3, 4, 4]})
    assert net.values["y"].shape == (5, 3, 4, 4)
    x = rand(5, 3, 4, 4)
    (y,) = run_network_reference(net, [x])
    np.testing.assert_array_equal(y, np.maximum(x, 0))


def test_upsample_nearest_is_a_resize() -> None:
    # Upsample is deprecated (onnxruntime no longer runs it); integer scales repeat elements.
    graph = helper.make_graph(
        [N("Upsample", ["x", "s"], ["y"], mode="nearest")],
        "g",
        [helper.make_tensor_value_info("x", 1, [1, 2, 3, 3])],
        [helper.make_tensor_value_info("y", 1, None)],
        initializer=[numpy_helper.from_array(np.array([1, 1, 2, 3], np.float32), "s")],
    )
    from xrt.network import Network

    net = Network.from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)]))
    assert [op.op_type for op in net.ops] == ["Input", "Resize", "Output"]
    x = rand(1, 2, 3, 3)
    (y,) = run_network_reference(net, [x])
    np.testing.assert_array_equal(y, np.repeat(np.repeat(x, 2, axis=2), 3, axis=3))
