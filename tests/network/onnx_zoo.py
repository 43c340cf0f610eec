"""Composite CNN building blocks as ONNX graphs (onnx.helper), with random weights."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx
from netutil import make_model
from onnx import helper


class Graph:
    """Appends ONNX nodes and initializers with generated names."""

    def __init__(self, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: dict[str, np.ndarray] = {}
        self.n = 0

    def name(self, base: str) -> str:
        self.n += 1
        return f"{base}{self.n}"

    def const(self, base: str, arr: np.ndarray) -> str:
        name = self.name(base)
        self.inits[name] = np.asarray(arr)
        return name

    def node(self, op: str, inputs: Sequence[str], **attrs: object) -> str:
        out = self.name(op.lower())
        self.nodes.append(helper.make_node(op, list(inputs), [out], name=out + "_node", **attrs))
        return out

    def conv(
        self,
        x: str,
        cin: int,
        cout: int,
        k: int,
        stride: int = 1,
        groups: int = 1,
        bn: bool = True,
        act: str | None = "relu",
        bias: bool = False,
        pad: int | None = None,
    ) -> str:
        fan_in = cin // groups * k * k
        w = self.rng.standard_normal((cout, cin // groups, k, k)) * np.sqrt(2.0 / fan_in)
        ins = [x, self.const("w", w.astype(np.float32))]
        if bias:
            ins.append(self.const("b", (self.rng.standard_normal(cout) * 0.1).astype(np.float32)))
        p = k // 2 if pad is None else pad
        y = self.node(
            "Conv", ins, kernel_shape=[k, k], strides=[stride, stride], pads=[p] * 4, group=groups
        )
        if bn:
            y = self.bn(y, cout)
        return self.act(y, act)

    def bn(self, x: str, c: int) -> str:
        r = self.rng
        params = [
            r.uniform(0.5, 1.5, c),
            r.standard_normal(c) * 0.1,
            r.standard_normal(c) * 0.1,
            r.uniform(0.5, 1.5, c),
        ]
        names = [
            self.const(b, p.astype(np.float32))
            for b, p in zip(("g", "be", "m", "v"), params, strict=True)
        ]
        return self.node("BatchNormalization", [x, *names], epsilon=1e-5)

    def act(self, x: str, act: str | None) -> str:
        if act is None:
            return x
        if act == "relu":
            return self.node("Relu", [x])
        if act == "relu6":
            lo = self.const("lo", np.array(0.0, np.float32))
            hi = self.const("hi", np.array(6.0, np.float32))
            return self.node("Clip", [x, lo, hi])
        if act == "hswish":
            return self.node("HardSwish", [x])
        if act == "leaky":
            return self.node("LeakyRelu", [x], alpha=0.1)
        if act == "sigmoid":
            return self.node("Sigmoid", [x])
        raise ValueError(act)

    def gemm(self, x: str, cin: int, cout: int) -> str:
        w = (self.rng.standard_normal((cout, cin)) * np.sqrt(1.0 / cin)).astype(np.float32)
        b = (self.rng.standard_normal(cout) * 0.1).astype(np.float32)
        return self.node("Gemm", [x, self.const("fc_w", w), self.const("fc_b", b)], transB=1)

    def model(
        self, inputs: dict[str, Sequence[int]], outputs: Sequence[str], opset: int = 17
    ) -> onnx.ModelProto:
        return make_model(self.nodes, inputs, outputs, self.inits, opset=opset)


def basic_block(g: Graph, x: str, cin: int, cout: int, stride: int = 1) -> str:
    """ResNet basic block: conv-bn-relu, conv-bn, shortcut (projection when needed), add, relu."""
    y = g.conv(x, cin, cout, 3, stride)
    y = g.conv(y, cout, cout, 3, act=None)
    short = x if stride == 1 and cin == cout else g.conv(x, cin, cout, 1, stride, act=None)
    return g.node("Relu", [g.node("Add", [y, short])])


def bottleneck(g: Graph, x: str, cin: int, width: int, stride: int = 1) -> str:
    """ResNet-50 bottleneck: 1x1, 3x3 (stride), 1x1 (x4), projection shortcut when needed."""
    cout = width * 4
    y = g.conv(x, cin, width, 1)
    y = g.conv(y, width, width, 3, stride)
    y = g.conv(y, width, cout, 1, act=None)
    short = x if stride == 1 and cin == cout else g.conv(x, cin, cout, 1, stride, act=None)
    return g.node("Relu", [g.node("Add", [y, short])])


def inverted_residual(
    g: Graph, x: str, cin: int, cout: int, expand: int, stride: int = 1, act: str = "relu6"
) -> str:
    """MobileNetV2 block: 1x1 expand, 3x3 depthwise, 1x1 project (+ residual when shapes allow)."""
    hidden = cin * expand
    y = g.conv(x, cin, hidden, 1, act=act)
    y = g.conv(y, hidden, hidden, 3, stride, groups=hidden, act=act)
    y = g.conv(y, hidden, cout, 1, act=None)
    if stride == 1 and cin == cout:
        y = g.node("Add", [y, x])
    return y


def squeeze_excite(g: Graph, x: str, c: int, r: int = 4) -> str:
    """MobileNetV3 squeeze-and-excitation: GAP, 1x1 reduce, ReLU, 1x1 expand, HardSigmoid, Mul."""
    s = g.node("GlobalAveragePool", [x])
    s = g.conv(s, c, c // r, 1, bn=False, bias=True, act="relu")
    s = g.conv(s, c // r, c, 1, bn=False, bias=True, act=None)
    s = g.node("HardSigmoid", [s], alpha=1.0 / 6, beta=0.5)
    return g.node("Mul", [x, s])


def inception(g: Graph, x: str, cin: int) -> tuple[str, int]:
    """Inception-v1 style module: 1x1 | 1x1-3x3 | 1x1-5x5 | maxpool-1x1, concatenated."""
    b1 = g.conv(x, cin, 8, 1)
    b2 = g.conv(g.conv(x, cin, 6, 1), 6, 12, 3)
    b3 = g.conv(g.conv(x, cin, 4, 1), 4, 6, 5)
    p = g.node("MaxPool", [x], kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1])
    b4 = g.conv(p, cin, 6, 1)
    return g.node("Concat", [b1, b2, b3, b4], axis=1), 8 + 12 + 6 + 6


def classifier_head(g: Graph, x: str, c: int, classes: int, softmax: bool = True) -> str:
    y = g.node("GlobalAveragePool", [x])
    y = g.node("Flatten", [y], axis=1)
    y = g.gemm(y, c, classes)
    return g.node("Softmax", [y], axis=1) if softmax else y


# -- whole test models -----------------------------------------------------------------


def residual_model(c: int = 16, hw: int = 12, seed: int = 0) -> onnx.ModelProto:
    g = Graph(seed)
    y = basic_block(g, "x", c, c)
    y = basic_block(g, y, c, 2 * c, stride=2)
    return g.model({"x": (1, c, hw, hw)}, [y])


def mobilenet_model(seed: int = 0) -> onnx.ModelProto:
    g = Graph(seed)
    y = g.conv("x", 3, 16, 3, 2, act="hswish")
    y = inverted_residual(g, y, 16, 16, 4)
    y = inverted_residual(g, y, 16, 24, 3, stride=2)
    y = squeeze_excite(g, y, 24)
    y = inverted_residual(g, y, 24, 24, 3, act="hswish")
    return g.model({"x": (1, 3, 24, 24)}, [classifier_head(g, y, 24, 10)])


def inception_model(seed: int = 0) -> onnx.ModelProto:
    g = Graph(seed)
    y = g.conv("x", 3, 16, 3)
    y, c = inception(g, y, 16)
    y = g.node("MaxPool", [y], kernel_shape=[2, 2], strides=[2, 2])
    y, c = inception(g, y, c)
    return g.model({"x": (1, 3, 16, 16)}, [y])


def head_model(seed: int = 0) -> onnx.ModelProto:
    g = Graph(seed)
    return g.model({"x": (2, 32, 5, 5)}, [classifier_head(g, "x", 32, 10)])


def fpn_model(seed: int = 0) -> onnx.ModelProto:
    """Top-down feature pyramid with Resize, Pad, AvgPool, LeakyRelu, Sigmoid and two outputs."""
    g = Graph(seed)
    c1 = g.conv("x", 3, 8, 3, act="leaky")
    c2 = g.conv(c1, 8, 16, 3, 2, act="leaky")
    c3 = g.conv(c2, 16, 16, 3, 2, act="leaky")
    up = g.node(
        "Resize",
        [
            c3,
            g.const("roi", np.zeros(0, np.float32)),
            g.const("sc", np.array([1, 1, 2, 2], np.float32)),
        ],
        mode="nearest",
        coordinate_transformation_mode="asymmetric",
        nearest_mode="floor",
    )
    p2 = g.node("Add", [up, c2])
    p2 = g.node(
        "Pad", [p2, g.const("pads", np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64))], mode="constant"
    )
    p2 = g.node("AveragePool", [p2], kernel_shape=[3, 3], strides=[1, 1])
    out1 = g.act(g.conv(p2, 16, 4, 1, bn=False, bias=True, act=None), "sigmoid")
    out2 = g.node(
        "Transpose", [g.conv(c3, 16, 6, 1, bn=False, bias=True, act=None)], perm=[0, 2, 3, 1]
    )
    return g.model({"x": (1, 3, 16, 16)}, [out1, out2])


def small_cnn_model(seed: int = 0) -> onnx.ModelProto:
    """Stem, residual, depthwise-separable and inception blocks, then a classifier head."""
    g = Graph(seed)
    y = g.conv("x", 3, 16, 3, 2)
    y = g.node("MaxPool", [y], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    y = basic_block(g, y, 16, 16)
    y = inverted_residual(g, y, 16, 16, 2)
    y, c = inception(g, y, 16)
    return g.model({"x": (1, 3, 32, 32)}, [classifier_head(g, y, c, 10)])


COMPOSITES = {
    "residual": residual_model,
    "mobilenet": mobilenet_model,
    "inception": inception_model,
    "head": head_model,
    "fpn": fpn_model,
    "small_cnn": small_cnn_model,
}


# -- full-size architectures (shapes as torchvision's; small inputs in tests) -----------


def fire(g: Graph, x: str, cin: int, squeeze: int, expand: int) -> str:
    """SqueezeNet fire module: 1x1 squeeze, then 1x1 and 3x3 expands concatenated."""
    s = g.conv(x, cin, squeeze, 1, bn=False, bias=True)
    e1 = g.conv(s, squeeze, expand, 1, bn=False, bias=True)
    e3 = g.conv(s, squeeze, expand, 3, bn=False, bias=True)
    return g.node("Concat", [e1, e3], axis=1)


def squeezenet11_model(hw: int = 224, classes: int = 1000, seed: int = 0) -> onnx.ModelProto:
    """SqueezeNet 1.1 (torchvision layout: ceil-mode max pools, conv10 + global average)."""
    g = Graph(seed)
    y = g.conv("x", 3, 64, 3, 2, bn=False, bias=True, pad=0)
    pool = {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}
    y = g.node("MaxPool", [y], **pool)
    y = fire(g, y, 64, 16, 64)
    y = fire(g, y, 128, 16, 64)
    y = g.node("MaxPool", [y], **pool)
    y = fire(g, y, 128, 32, 128)
    y = fire(g, y, 256, 32, 128)
    y = g.node("MaxPool", [y], **pool)
    y = fire(g, y, 256, 48, 192)
    y = fire(g, y, 384, 48, 192)
    y = fire(g, y, 384, 64, 256)
    y = fire(g, y, 512, 64, 256)
    y = g.conv(y, 512, classes, 1, bn=False, bias=True)
    y = g.node("GlobalAveragePool", [y])
    return g.model({"x": (1, 3, hw, hw)}, [g.node("Flatten", [y], axis=1)])


def resnet18_model(hw: int = 224, classes: int = 1000, seed: int = 0) -> onnx.ModelProto:
    """ResNet-18: 7x7/2 stem, 3x3/2 max pool, four stages of two basic blocks, FC."""
    g = Graph(seed)
    y = g.conv("x", 3, 64, 7, 2)
    y = g.node("MaxPool", [y], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    c = 64
    for width, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        y = basic_block(g, y, c, width, stride)
        y = basic_block(g, y, width, width)
        c = width
    return g.model({"x": (1, 3, hw, hw)}, [classifier_head(g, y, c, classes, softmax=False)])
