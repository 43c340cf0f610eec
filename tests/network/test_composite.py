"""Whole float networks against onnxruntime: residual, depthwise-separable, inception,
classifier head, feature pyramid, plus a few blocks at real ImageNet-model shapes."""

from __future__ import annotations

import pytest
from netutil import check_model
from onnx_zoo import COMPOSITES, Graph, basic_block, bottleneck, inverted_residual, squeeze_excite

from xrt.network import Network


@pytest.mark.parametrize("name", sorted(COMPOSITES))
def test_composite_matches_onnxruntime(name: str) -> None:
    net = check_model(COMPOSITES[name]())
    assert "BatchNorm" not in {op.op_type for op in net.ops}  # all folded into convolutions


def test_realistic_resnet50_stage2_bottleneck() -> None:
    # ResNet-50's first bottleneck at 56x56: 64 -> (64, 64, 256) with a projection shortcut.
    g = Graph(1)
    y = bottleneck(g, "x", 64, 64)
    y = bottleneck(g, y, 256, 64)
    check_model(g.model({"x": (1, 64, 56, 56)}, [y]))


def test_realistic_resnet_downsampling_block() -> None:
    # ResNet-18 layer2 entry: 64x56x56 -> 128x28x28, stride 2 with 1x1 projection.
    g = Graph(2)
    y = basic_block(g, "x", 64, 128, stride=2)
    check_model(g.model({"x": (1, 64, 56, 56)}, [y]))


def test_realistic_mobilenet_v2_and_v3_blocks() -> None:
    # MobileNetV2 at 112x112 (16 -> 24, expand 6, stride 2), then a V3-style block with SE.
    g = Graph(3)
    y = g.conv("x", 3, 16, 3, 2, act="hswish")
    y = inverted_residual(g, y, 16, 24, 6, stride=2)
    y = inverted_residual(g, y, 24, 24, 6, act="hswish")
    y = squeeze_excite(g, y, 24)
    net = check_model(g.model({"x": (1, 3, 224, 224)}, [y]))
    groups = [op.attrs["groups"] for op in net.ops if op.op_type == "Conv2d"]
    assert 144 in groups  # the depthwise convolutions really are depthwise


def test_ids_are_topological_and_stable_after_import() -> None:
    net = Network.from_onnx(COMPOSITES["small_cnn"]())
    assert net.op_ids == list(range(len(net.ops)))
    seen = set(net.inputs)
    for op in net.ops:
        assert all(v in seen for v in op.inputs)
        seen.update(op.outputs)
