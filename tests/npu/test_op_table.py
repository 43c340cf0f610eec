"""The op table is the one place that says which operators the NPU runs and how.

`NPU_OP_TYPES`, `refusal`, the driver's lowering and `is_alias` all read
`xrt.npu.compiler._op_table.NPU_OP_RULES`: a row added there is legal and lowered, a row
taken away is refused, and no second list decides either. A stem convolution's column fold
is planned once per operator and compile.
"""

from __future__ import annotations

import sys
from collections import Counter
from types import MappingProxyType

import numpy as np
import pytest
from npu_util import i8, npu_outputs, single

from xrt.backend import BuyiBackend, ZG330Backend
from xrt.dtypes import TensorType
from xrt.errors import XrtError
from xrt.hw.targets import NPU
from xrt.network import NetworkBuilder
from xrt.npu import compiler
from xrt.npu.compiler import _op_table, _stem_fold, compile_run, is_alias, refusal
from xrt.npu.compiler._lowering import lower_relu
from xrt.npu.compiler._op_table import NPU_OP_RULES, NpuOpRule


def _with_rules(monkeypatch: pytest.MonkeyPatch, rules: dict[str, NpuOpRule]) -> None:
    monkeypatch.setattr(_op_table, "NPU_OP_RULES", MappingProxyType(rules))


def test_npu_op_types_are_the_tables_keys() -> None:
    assert frozenset(NPU_OP_RULES) == compiler.NPU_OP_TYPES
    assert compiler.NPU_OP_TYPES is _op_table.NPU_OP_TYPES
    # The NPU backends bind exactly the table's op types, plus their own HardOp and the
    # dequantizing Cast of a program's outputs.
    for backend in (BuyiBackend, ZG330Backend):
        assert set(backend.op_registry()) == set(NPU_OP_RULES) | {"HardOp", "Cast"}


def test_every_row_names_its_op_type_and_has_a_lowering() -> None:
    for op_type, rule in NPU_OP_RULES.items():
        assert rule.op_type == op_type
        assert callable(rule.lower), op_type
        assert rule.check is None or callable(rule.check), op_type
    assert {"Reshape", "Flatten", "Identity"} == _op_table.RELABELLING_OP_TYPES


def test_the_table_is_read_only_and_has_one_row_per_op_type() -> None:
    with pytest.raises(TypeError):
        NPU_OP_RULES["Abs"] = NPU_OP_RULES["Relu"]  # type: ignore[index]
    relu = NPU_OP_RULES["Relu"]
    with pytest.raises(ValueError, match="two NPU rules for op type Relu"):
        _op_table._by_op_type([relu, relu])


def test_a_row_added_to_the_table_is_legal_and_lowered(monkeypatch: pytest.MonkeyPatch) -> None:
    x = i8(np.random.default_rng(0), 1, 20, 3, 5)
    net, feeds = single("Abs", [x], {})
    (op,) = net.ops[1:-1]  # between the Input and Output ops
    assert refusal(op, net.values, {}, NPU) == "op type Abs has no NPU lowering"
    with pytest.raises(XrtError, match="has no NPU lowering"):
        compile_run(net)

    # Abs lowered as Relu: nothing but the row tells the compiler how.
    _with_rules(monkeypatch, {**NPU_OP_RULES, "Abs": NpuOpRule("Abs", None, lower_relu)})
    assert refusal(op, net.values, {}, NPU) is None
    outs, prog, _ = npu_outputs(net, feeds)
    np.testing.assert_array_equal(outs[net.outputs[0]], np.maximum(x, 0))
    (layer,) = prog.layers
    assert (layer.op_type, layer.detail) == ("Abs", "VEC MOV + STORE clamp [0, 127]")

    # The row's check refuses after the operand checks every operator gets.
    refuse = NpuOpRule("Abs", lambda *args: "not today", lower_relu)
    _with_rules(monkeypatch, {**NPU_OP_RULES, "Abs": refuse})
    assert refusal(op, net.values, {}, NPU) == "not today"
    rank3, _ = single("Abs", [x[0]], {})
    assert refusal(rank3.ops[1], rank3.values, {}, NPU) == (
        "rank 3 tensors have no channel-tiled layout for Abs"
    )


def test_a_row_taken_away_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    relu, _ = single("Relu", [np.zeros((1, 4, 2, 2), np.int8)], {})
    reshape, _ = single("Reshape", [np.zeros((1, 4, 1, 1), np.int8)], {"shape": [1, 4]})
    (relu_op,), (reshape_op,) = relu.ops[1:-1], reshape.ops[1:-1]
    assert refusal(relu_op, relu.values, {}, NPU) is None
    assert is_alias(reshape_op, reshape.values)

    rules = {t: r for t, r in NPU_OP_RULES.items() if t not in ("Relu", "Reshape")}
    _with_rules(monkeypatch, rules)
    assert refusal(relu_op, relu.values, {}, NPU) == "op type Relu has no NPU lowering"
    assert not is_alias(reshape_op, reshape.values)


def test_a_stem_fold_is_planned_once_per_operator_and_compile(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rng = np.random.default_rng(1)
    params = {
        "weight": rng.integers(-20, 20, size=(16, 3, 3, 3), dtype=np.int8),
        "bias": rng.integers(-500, 500, 16).astype(np.int32),
        "multiplier": np.full(16, 1 << 14, np.int32),
        "shift": np.full(16, 20, np.int32),
    }
    attrs = {"strides": [1, 1], "pads": [1, 1, 1, 1], "dilations": [1, 1], "groups": 1,
             "lo": -128, "hi": 127, "out_scale": 1.0}  # fmt: skip
    net, _ = single("QConv2d", [i8(rng, 1, 3, 12, 12)], attrs, params)
    seen: Counter[int] = Counter()
    plan = _stem_fold.plan_stem_fold

    def counted(op, *args):  # type: ignore[no-untyped-def]
        seen[op.op_id] += 1
        return plan(op, *args)

    # Wherever a compiler module holds the planner, it holds the counting one.
    for name, module in list(sys.modules.items()):
        if name.startswith("xrt.npu.compiler") and getattr(module, "plan_stem_fold", 0) is plan:
            monkeypatch.setattr(module, "plan_stem_fold", counted)
    prog = compile_run(net)
    assert seen == {op.op_id: 1 for op in net.ops[1:-1]}  # the compiler skips Input, Output
    assert prog.layers[0].detail.startswith("columns folded into 9 channels")
    assert [p.name for p in prog.intermediates] == [net.outputs[0] + "#fold"]


@pytest.mark.parametrize("name", ["FP64", "UInt64"])
def test_host_only_element_types_are_refused_by_name(name: str) -> None:
    # FP64 and UInt64 (ONNX DOUBLE and UINT64) run on the host only: the legalizer names
    # the type, so a placement report says why the operator stays on the host.
    b = NetworkBuilder("host_only")
    (y,) = b.add(
        "Transpose", [b.input("x", TensorType(name, (1, 4, 2, 2)))], {"perm": [0, 1, 3, 2]}
    )
    net = b.build([y])
    (op,) = net.ops[1:-1]
    assert refusal(op, net.values, {}, NPU) == f"operates on {name}, the NPU only on int8"
    with pytest.raises(XrtError, match=f"operates on {name}"):
        compile_run(net)
