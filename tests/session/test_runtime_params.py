"""Run-time operator parameters on the host (issue 25, item 5).

A weight, shape, pad, scale or bound that is a graph input without an initializer is fed at
each forward: the operator's role is bound to that value (``Operator.fed``), output shapes
that depend on it are resolved at forward, and the host computes with whatever is fed.
Checked against onnxruntime over several fed values, including ones that change an output
shape; plus the contradictions (11003), the file format and snapshots, the NPU refusal, and
that constant parameters stay constants.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from netutil import ort_run
from onnx import TensorProto, helper, numpy_helper
from tinynpu import TinyNpuBackend

from xrt import ErrorCode, XrtError
from xrt.backend import BindContext, HostBackend
from xrt.backend.npu import BuyiBackend, ZG330Backend
from xrt.dtypes import TensorType
from xrt.network import (
    ONNX_FED_INPUTS,
    SUPPORTED_ONNX_OPS,
    Network,
    NetworkBuilder,
    run_network_reference,
)
from xrt.session import Session

RNG = np.random.default_rng(25)
F, I64 = TensorProto.FLOAT, TensorProto.INT64
N = helper.make_node


def _model(
    nodes: list[onnx.NodeProto],
    inputs: dict[str, tuple[int, list[int]]],
    outputs: dict[str, tuple[int, list[int | str] | None]],
    inits: dict[str, np.ndarray] | None = None,
    opset: int = 18,
) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(n, t, s) for n, (t, s) in inputs.items()],
        [helper.make_tensor_value_info(n, t, s) for n, (t, s) in outputs.items()],
        initializer=[numpy_helper.from_array(a, n) for n, a in (inits or {}).items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = min(model.ir_version, 10)
    model = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    onnx.checker.check_model(model)
    return model


def _conv_reshape_clip(out_shape: list[int | str] | None = None) -> onnx.ModelProto:
    """x -> Conv (weight W fed) -> Reshape (shape fed) -> Clip (min fed) -> y."""
    return _model(
        [
            N("Conv", ["x", "W"], ["c"], pads=[1, 1, 1, 1]),
            N("Reshape", ["c", "shape"], ["r"]),
            N("Clip", ["r", "lo"], ["y"]),
        ],
        {"x": (F, [1, 2, 4, 4]), "W": (F, [3, 2, 3, 3]), "shape": (I64, [2]), "lo": (F, [])},
        {"y": (F, out_shape if out_shape is not None else ["a", "b"])},
    )


def _feeds(shape: list[int], lo: float, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "x": rng.standard_normal((1, 2, 4, 4)).astype(np.float32),
        "W": rng.standard_normal((3, 2, 3, 3)).astype(np.float32),
        "shape": np.array(shape, np.int64),
        "lo": np.array(lo, np.float32),
    }


def _run(sess: Session, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    return [t.numpy() for t in sess.forward({n: feeds[n] for n in sess.inputs})]


def _err(fn, *args, **kw) -> XrtError:  # type: ignore[no-untyped-def]
    with pytest.raises(XrtError) as e:
        fn(*args, **kw)
    return e.value


# -- the network of the brief: a fed Conv weight, a fed Reshape shape, a fed Clip bound -----


def test_fed_weight_shape_and_bound_match_onnxruntime_as_the_fed_values_change() -> None:
    model = _conv_reshape_clip()
    net = Network.from_onnx(model)
    by_type = {op.op_type: op for op in net.ops}
    assert by_type["Conv2d"].fed == {"weight": "W"} and "weight" not in by_type["Conv2d"].params
    assert by_type["Reshape"].fed == {"shape": "shape"}
    assert by_type["Clip"].fed == {"min": "lo"}
    assert list(net.inputs) == ["x", "W", "shape", "lo"]
    assert net.values["y"].shape == (-1, -1) and net.values["c"].shape == (1, 3, 4, 4)
    with Session.create([HostBackend], net) as sess:
        sess.apply()
        planned = set(sess.memory_plan.placements)
        assert {"x", "W", "shape", "lo", "c"} <= planned and not {"r", "y"} & planned
        # Several fed values; the shape changes the output's shape (48 elements).
        for k, (shape, lo) in enumerate(
            [([3, 16], -0.5), ([6, -1], 0.0), ([-1, 4], 0.25), ([48, 1], -9.0), ([3, 16], 1.0)]
        ):
            feeds = _feeds(shape, lo, k)
            (got,) = _run(sess, feeds)
            (want,) = ort_run(model, feeds)
            assert got.shape == want.shape
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
            (ref,) = run_network_reference(net, feeds)
            np.testing.assert_array_equal(ref, got)


def test_a_fed_shape_that_contradicts_the_network_is_11003_naming_value_and_contradiction() -> None:
    model = _conv_reshape_clip([4, 12])  # the model declares y as [4, 12]
    net = Network.from_onnx(model)
    assert net.values["y"].shape == (4, 12)
    with Session.create([HostBackend], net) as sess:
        sess.apply()
        ok = _feeds([4, 12], 0.0, 1)
        np.testing.assert_allclose(_run(sess, ok)[0], ort_run(model, ok)[0], rtol=1e-5, atol=1e-5)
        e = _err(_run, sess, _feeds([12, 4], 0.0, 2))
        assert e.code == ErrorCode.OUT_OF_RANGE
        assert "value 'y'" in e.message and "[12, 4]" in e.message and "[4, 12]" in e.message
        assert "its shape follows ['shape'], fed at run time" in e.message
        e = _err(_run, sess, _feeds([5, -1], 0.0, 3))  # 48 elements do not make 5 rows
        assert e.code == ErrorCode.OUT_OF_RANGE and "shape = [5, -1] fed by 'shape'" in e.message
        # The session is still usable afterwards.
        np.testing.assert_allclose(_run(sess, ok)[0], ort_run(model, ok)[0], rtol=1e-5, atol=1e-5)


def test_network_file_and_snapshot_round_trips_keep_the_fed_roles(tmp_path: Path) -> None:
    model = _conv_reshape_clip()
    net = Network.from_onnx(model)
    net.save(tmp_path / "n.json")
    doc = json.loads((tmp_path / "n.json").read_text())
    assert doc["version"] == 3  # the run-time parameters of version 2, and Input / Output
    assert {"weight": "W"} in [op.get("fed") for op in doc["ops"]]
    back = Network.load(tmp_path / "n.json")
    assert [op.fed for op in back.ops] == [op.fed for op in net.ops]
    assert dict(back.values) == dict(net.values)
    with Session.create([HostBackend], back) as sess:
        sess.apply()
        sess.dump_snapshot(tmp_path / "s.snap")
        for k, shape in enumerate(([6, 8], [2, -1])):
            feeds = _feeds(shape, 0.1, k)
            np.testing.assert_array_equal(
                _run(sess, feeds)[0], run_network_reference(net, feeds)[0]
            )
    with Session.create_with_snapshot(tmp_path / "s.snap", [HostBackend]) as snap:
        for k, shape in enumerate(([16, 3], [1, -1])):
            feeds = _feeds(shape, -0.1, k)
            (got,) = _run(snap, feeds)
            np.testing.assert_allclose(got, ort_run(model, feeds)[0], rtol=1e-5, atol=1e-5)


def test_constant_parameters_stay_constants() -> None:
    """With initializers (or input_values) nothing is fed: the network is static as before."""
    feeds = _feeds([6, 8], 0.0, 4)
    consts = {k: feeds[k] for k in ("W", "shape", "lo")}
    model = _conv_reshape_clip()
    for net in (
        Network.from_onnx(model, input_values=consts),
        Network.from_onnx(
            _model(
                list(model.graph.node),
                {"x": (F, [1, 2, 4, 4])},
                {"y": (F, ["a", "b"])},
                consts,
            )
        ),
    ):
        assert not any(op.fed for op in net.ops)
        assert all(t.is_static for t in net.values.values())
        assert list(net.inputs) == ["x"] and net.values["y"].shape == (6, 8)
        (got,) = run_network_reference(net, {"x": feeds["x"]})
        np.testing.assert_allclose(got, ort_run(model, feeds)[0], rtol=1e-5, atol=1e-5)


def test_step_to_runs_a_dynamic_network_op_by_op() -> None:
    net = Network.from_onnx(_conv_reshape_clip())
    feeds = _feeds([12, 4], 0.0, 5)
    with Session.create([HostBackend], net) as sess:
        sess.apply()
        ids = net.op_ids  # Input, Conv2d, Reshape, Clip, Output
        (r,) = sess.step_to(ids[2], feeds)
        assert r.shape == (12, 4)
        (y,) = sess.step_to(ids[3])
        np.testing.assert_array_equal(y.numpy(), run_network_reference(net, feeds)[0])


# -- more operators, each over fed values that change the output shape ---------------------


def _one(op: str, x: list[int], fed: dict[str, tuple[int, list[int]]], rank: int, **attrs: object):  # type: ignore[no-untyped-def]
    names = ["x", *fed]
    order = {
        "Resize": ["x", "", "scales", "sizes"],
        "Pad": ["x", "pads", "", "axes"],
    }.get(op, names)
    ins = [n if (n in fed or n in ("x", "")) else "" for n in order]
    while ins and not ins[-1]:
        ins.pop()
    return _model(
        [N(op, ins, ["y"], **attrs)],
        {"x": (F, x), **fed},
        {"y": (F, [f"d{i}" for i in range(rank)])},
        opset=18,
    )


CASES = {
    "Resize scales": (
        _one("Resize", [1, 1, 2, 3], {"scales": (F, [2])}, 4, axes=[2, 3], mode="linear"),
        [{"scales": np.array(v, np.float32)} for v in ([2.0, 2.0], [3.0, 0.5], [1.5, 1.0])],
    ),
    "Resize sizes": (
        _one("Resize", [1, 1, 2, 3], {"sizes": (I64, [4])}, 4, mode="nearest"),
        [{"sizes": np.array(v, np.int64)} for v in ([1, 1, 4, 6], [1, 1, 3, 2])],
    ),
    "Pad pads and axes": (
        _one("Pad", [1, 2, 3], {"pads": (I64, [4]), "axes": (I64, [2])}, 3),
        [
            {"pads": np.array(p, np.int64), "axes": np.array(a, np.int64)}
            for p, a in (([1, 0, 0, 2], [1, 2]), ([0, 1, 2, 0], [-1, 0]))
        ],
    ),
    "Slice": (
        _one("Slice", [5, 6], {"starts": (I64, [1]), "ends": (I64, [1]), "axes": (I64, [1])}, 2),
        [
            {"starts": np.array([s]), "ends": np.array([e]), "axes": np.array([a])}
            for s, e, a in ((1, 4, 0), (-3, 2**63 - 1, 1), (0, 1, 1))
        ],
    ),
    "Tile": (
        _one("Tile", [2, 3], {"repeats": (I64, [2])}, 2),
        [{"repeats": np.array(v, np.int64)} for v in ([1, 2], [3, 1])],
    ),
    "Expand": (
        _one("Expand", [3, 1], {"shape": (I64, [3])}, 3),
        [{"shape": np.array(v, np.int64)} for v in ([2, 1, 4], [1, 3, 2])],
    ),
    "Unsqueeze": (
        _one("Unsqueeze", [3, 4], {"axes": (I64, [2])}, 4),
        [{"axes": np.array(v, np.int64)} for v in ([0, 3], [-1, 1])],
    ),
    "ReduceSum": (
        _one("ReduceSum", [2, 3, 4], {"axes": (I64, [1])}, 2, keepdims=0),
        [{"axes": np.array([v], np.int64)} for v in (0, 2, -2)],
    ),
    "LayerNormalization": (
        _model(
            [N("LayerNormalization", ["x", "s", "b"], ["y"], axis=-1)],
            {"x": (F, [2, 3, 4]), "s": (F, [4]), "b": (F, [4])},
            {"y": (F, None)},
        ),
        [
            {"s": RNG.standard_normal(4).astype(np.float32), "b": np.full(4, v, np.float32)}
            for v in (0.0, 1.5)
        ],
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_fed_operator_inputs_match_onnxruntime(case: str) -> None:
    model, fed_values = CASES[case]
    net = Network.from_onnx(model)
    assert any(op.fed for op in net.ops)
    x_shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    shapes = set()
    with Session.create([HostBackend], net) as sess:
        sess.apply()
        for k, values in enumerate(fed_values):
            feeds = {"x": np.random.default_rng(k).standard_normal(x_shape).astype(np.float32)}
            feeds.update(values)
            (got,) = _run(sess, feeds)
            (want,) = ort_run(model, feeds)
            assert got.shape == want.shape, values
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
            shapes.add(got.shape)
    assert len(shapes) > 1 or case == "LayerNormalization"


# -- NPU backends keep requiring constants -------------------------------------------------


def test_npu_backends_refuse_fed_parameters_and_say_why() -> None:
    net = Network.from_onnx(_conv_reshape_clip())
    ctx = BindContext(net, {})
    conv, reshape, clip = net.ops[1], net.ops[2], net.ops[3]
    for backend in (ZG330Backend(), BuyiBackend()):
        assert not backend.is_op_supported(conv, ctx)
        name = type(backend).__name__
        assert (
            backend.refusal(conv, ctx) == f"weight 'W' is fed at run time; {name} needs constants"
        )
        assert "shape 'shape' is fed at run time" in (backend.refusal(reshape, ctx) or "")
    assert HostBackend().refusal(conv, ctx) is None and HostBackend().refusal(clip, ctx) is None


def test_a_value_of_run_time_shape_stays_on_the_host() -> None:
    """TinyNpu runs int8 Relu; not one whose input's shape is known only at run time."""
    b = NetworkBuilder("dyn")
    x = b.input("x", TensorType("SInt8", [2, 6]))
    s = b.input("s", TensorType("SInt64", [2]))
    (r,) = b.add("Reshape", [x], fed={"shape": s}, types=[TensorType("SInt8", [-1, -1])])
    (y,) = b.add("Relu", [r])
    (z,) = b.add("Relu", [x])
    net = b.build([y, z])
    with Session.create([TinyNpuBackend, HostBackend], net) as sess:
        bound = {op_id: type(be).__name__ for op_id, be in sess.backend_bindings().items()}
        assert bound == {
            0: "HostBackend",  # Input
            1: "HostBackend",  # Reshape
            2: "HostBackend",  # Relu of its run-time shape
            3: "TinyNpuBackend",  # Relu
            4: "HostBackend",  # Output
        }
        report = str(sess.placement())
        assert "input 'reshape1' has a shape known only at run time" in report
        sess.apply()
        xs = np.arange(-6, 6, dtype=np.int8).reshape(2, 6)
        got, _ = _run(sess, {"x": xs, "s": np.array([3, -1])})
        np.testing.assert_array_equal(got, np.maximum(xs, 0).reshape(3, 4))


# -- the builder's rules -------------------------------------------------------------------


def test_builder_rules_for_fed_roles() -> None:
    b = NetworkBuilder("rules")
    x = b.input("x", TensorType("FP32", [2, 6]))
    s = b.input("s", TensorType("SInt64", [2]))
    e = _err(b.add, "Reshape", [x], None, None, fed={"shape": s})
    assert e.code == ErrorCode.OUT_OF_RANGE and "declare its output types" in e.message
    e = _err(b.add, "Transpose", [x], None, None, fed={"perm": s})
    assert "cannot take ['perm'] fed at run time" in e.message
    e = _err(b.add, "Reshape", [x], {"shape": [3, 4]}, None, fed={"shape": s})
    assert "fed at run time and also given" in e.message
    lo = b.input("lo", TensorType("FP32", []))
    (y,) = b.add("Clip", [x], fed={"min": lo})  # a bound decides no shape: inferred
    assert b.values[y].shape == (2, 6)
    net = b.build([y])
    assert net.ops[1].inputs == ("x", "lo") and net.ops[1].data_inputs == ("x",)
    feeds = {"x": np.full((2, 6), -3, np.float32), "s": np.array([1, 1]), "lo": np.float32(-1)}
    got = run_network_reference(net, {k: np.asarray(v) for k, v in feeds.items()})
    np.testing.assert_array_equal(got[0], np.full((2, 6), -1, np.float32))


def test_the_fed_inputs_table_names_onnx_schema_inputs() -> None:
    """docs/onnx-operators.md's column comes from ONNX_FED_INPUTS: every name listed is an
    input of the operator's ONNX schema, and the operator is supported."""
    for op, names in ONNX_FED_INPUTS.items():
        assert op in SUPPORTED_ONNX_OPS
        assert set(names) <= {i.name for i in onnx.defs.get_schema(op).inputs}, op


def test_xrt_run_feeds_parameters_from_files_and_refuses_to_quantize_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from xrt.cli import main

    model = _conv_reshape_clip()
    onnx.save(model, tmp_path / "m.onnx")
    feeds = _feeds([12, 4], 0.0, 6)
    args = ["run", str(tmp_path / "m.onnx"), "--device", "host://"]
    for name, arr in feeds.items():
        np.save(tmp_path / f"{name}.npy", arr)
        args += ["--input", f"{name}={tmp_path / name}.npy"]
    assert main(args) == 0
    assert "FP32[12, 4]" in capsys.readouterr().out
    assert main([*args, "--quantize"]) != 0
    assert "fed at run time" in capsys.readouterr().err
