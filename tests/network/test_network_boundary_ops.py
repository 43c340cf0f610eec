"""The Input and Output ops: every network starts and ends with them (the manual's ids),
nothing else makes one, and network files of before them load migrated."""

from __future__ import annotations

import hashlib
import json
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from netutil import rand

from xrt.backend import Backend
from xrt.backend.npu import to_hardop
from xrt.dtypes import QuantParams, TensorType
from xrt.errors import ErrorCode, XrtError
from xrt.network import (
    FORMAT_VERSION,
    Network,
    NetworkBuilder,
    Operator,
    is_float_op,
    is_quantized_op,
    run_network_reference,
)


def _err(fn, *args, **kw) -> XrtError:  # type: ignore[no-untyped-def]
    with pytest.raises(XrtError) as e:
        fn(*args, **kw)
    return e.value


def _relu_net() -> Network:
    b = NetworkBuilder("r")
    x = b.input("x", TensorType("FP32", [2, 3]))
    (y,) = b.add("Relu", [x])
    return b.build([y])


# -- the ops a network has -------------------------------------------------------------------


def test_the_builder_starts_with_input_and_ends_with_output() -> None:
    b = NetworkBuilder("two")
    assert [op.op_type for op in b.ops] == ["Input"] and b.ops[0].op_id == 0
    x = b.input("x", TensorType("FP32", [2, 3]))
    z = b.input("z", TensorType("FP32", [2, 3]))
    assert b.ops[0].outputs == ("x", "z")  # it yields every input declared so far
    (s,) = b.add("Add", [x, z])
    (r,) = b.add("Relu", [s])
    net = b.build([r, s])
    assert net.op_ids == [0, 1, 2, 3]
    assert [op.op_type for op in net.ops] == ["Input", "Add", "Relu", "Output"]
    first, last = net.input_op(), net.output_op()
    assert first is net.ops[0] and first.inputs == () and first.outputs == net.inputs
    assert last is net.ops[-1] and last.inputs == net.outputs == (r, s) and last.outputs == ()
    # The manual's network.inputOp()[0].dtype(): the type of the Input op's first value.
    assert net.values[net.input_op().outputs[0]].dtype.manual_name == "FP32"
    assert net.producer("x") is first and net.consumers(r) == [last]
    # They do no arithmetic: neither float nor quantized work (placement, --require-npu).
    assert not any(is_float_op(op, net.values) or is_quantized_op(op, net.values)
                   for op in (first, last))  # fmt: skip
    # They compute nothing: the reference passes the feeds and outputs through.
    a, c = rand(2, 3), rand(2, 3)
    got = run_network_reference(net, [a, c])
    np.testing.assert_array_equal(got[0], np.maximum(a + c, 0))
    np.testing.assert_array_equal(got[1], a + c)
    seen: list[tuple[str, int]] = []
    run_network_reference(
        net, [a, c], observer=lambda op, outs: seen.append((op.op_type, len(outs)))
    )
    assert seen == [("Input", 2), ("Add", 1), ("Relu", 1), ("Output", 0)]


def test_first_id_leaves_room_for_the_input_op() -> None:
    b = NetworkBuilder("later", first_id=10)
    x = b.input("x", TensorType("FP32", [3]))
    (y,) = b.add("Relu", [x])
    assert b.build([y]).op_ids == [0, 10, 11]
    for bad in (0, -1, True, 1.0):
        assert _err(NetworkBuilder, "n", bad).code == ErrorCode.OUT_OF_RANGE  # type: ignore[arg-type]


@pytest.mark.parametrize("op_type", ["Input", "Output"])
def test_nothing_else_makes_a_boundary_op(op_type: str) -> None:
    b = NetworkBuilder("n")
    x = b.input("x", TensorType("FP32", [3]))
    e = _err(b.add, op_type, [x])
    assert e.code == ErrorCode.OUT_OF_RANGE and f"'{op_type}'" in e.message
    assert "NetworkBuilder.add" in e.message
    (y,) = b.add("Relu", [x])
    e = _err(b.rewrite, 1, op_type=op_type)
    assert e.code == ErrorCode.OUT_OF_RANGE and f"'{op_type}'" in e.message
    e = _err(b.rewrite, 0, name="renamed")  # the Input op itself
    assert "'Input'" in e.message and "op 0" in e.message

    class Mine(Backend):
        pass

    e = _err(Mine.add_op, op_type, lambda op, ins, outs, backend: None)
    assert e.code == ErrorCode.OUT_OF_RANGE and "Mine.add_op" in e.message

    net = b.build([y])
    ops, values = list(net.ops), dict(net.values)
    # Another one in the middle, naming the op and where it may be.
    extra = Operator(1, op_type, (x,) if op_type == "Output" else (), ())
    moved = [ops[0], extra, ops[1].replace(op_id=2), ops[2].replace(op_id=3)]
    e = _err(Network, moved, values, net.inputs, net.outputs)
    assert e.code == ErrorCode.OUT_OF_RANGE
    assert f"op 1 ({op_type})" in e.message and "middle" in e.message


def test_a_network_must_have_both_ends() -> None:
    net = _relu_net()
    ops, values = list(net.ops), dict(net.values)

    def make(ops: list[Operator], inputs: Any = net.inputs, outputs: Any = net.outputs) -> XrtError:
        return _err(Network, ops, values, inputs, outputs)

    assert "Input" in make(ops[1:]).message  # no Input op
    assert "Output" in make(ops[:-1]).message  # no Output op
    assert "at least its Input and Output" in make([]).message
    assert "id 0, not 3" in make([ops[0].replace(op_id=3), *ops[1:]]).message
    e = make([ops[0].replace(outputs=()), *ops[1:]])
    assert "yields the network inputs ['x']" in e.message
    e = make([*ops[:-1], ops[-1].replace(op_id=1)])
    assert "increase" in e.message
    e = make([ops[0].replace(attrs={"k": 1}), *ops[1:]])
    assert "takes no attributes or parameters" in e.message


def test_to_hardop_refuses_the_input_and_output_ops() -> None:
    b = NetworkBuilder("q")
    x = b.input("x", TensorType("SInt8", [1, 16, 4, 4], quant=QuantParams(0.05)))
    (y,) = b.add("Relu", [x])
    net = b.build([y])
    for ids in ([0, 1], [1, 2]):
        e = _err(to_hardop, net, ids, "buyi")
        assert e.code == ErrorCode.OUT_OF_RANGE and "to_hardop" in e.message
    hard = to_hardop(net, [1], "buyi")
    assert [op.op_type for op in hard.ops] == ["Input", "HardOp", "Output"]


# -- network files written before the Input and Output ops ----------------------------------


def _old_file(
    tmp: Path, version: int, ops: list[dict[str, Any]], values: dict[str, Any], params: Any
) -> Path:
    """A network file in the layout of format versions 1 and 2 (no Input or Output op),
    written here byte by byte from docs/network-format.md: raw parameters at 64-byte
    offsets with their CRC-32, the checksum over the canonical JSON."""
    raw = bytearray()
    records = {}
    for name, arr in params.items():
        raw.extend(b"\0" * ((-len(raw)) % 64))
        data = np.ascontiguousarray(arr).tobytes()
        records[name] = {
            "dtype": {"float32": "FP32", "int64": "SInt64", "uint8": "UInt8"}[str(arr.dtype)],
            "shape": list(arr.shape),
            "offset": len(raw),
            "nbytes": len(data),
            "crc32": zlib.crc32(data),
        }
        raw.extend(data)
    doc: dict[str, Any] = {
        "format": "xrt-network",
        "version": version,
        "name": "old",
        "raw": {"file": "old.raw", "nbytes": len(raw), "alignment": 64},
        "inputs": ["x"],
        "outputs": [ops[-1]["outputs"][0]],
        "values": values,
        "params": records,
        "ops": ops,
    }
    canonical = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    doc["checksum"] = "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()
    (tmp / "old.raw").write_bytes(bytes(raw))
    (tmp / "old.json").write_text(json.dumps(doc))
    return tmp / "old.json"


def _value(shape: list[int], dtype: str = "FP32") -> dict[str, Any]:
    return {"dtype": dtype, "shape": shape, "layout": "*", "quant": None}


def _op(op_id: int, op_type: str, ins: list[str], outs: list[str], **extra: Any) -> dict[str, Any]:
    attrs, params = extra.pop("attrs", {}), extra.pop("params", {})
    return {"id": op_id, "type": op_type, "name": "", "inputs": ins, "outputs": outs,
            "attrs": attrs, "params": params, **extra}  # fmt: skip


@pytest.mark.parametrize("version", [1, 2])
def test_an_old_file_numbered_from_0_shifts_its_ids(tmp_path: Path, version: int) -> None:
    """ONNX imports numbered their first op 0: every id moves up by one for the Input op."""
    w = rand(4, 3, 3, 3)
    path = _old_file(
        tmp_path,
        version,
        [
            _op(0, "Conv2d", ["x"], ["c"], attrs={"pads": [1, 1, 1, 1]}, params={"weight": "w"}),
            _op(1, "Relu", ["c"], ["y"]),
        ],
        {"x": _value([1, 3, 5, 5]), "c": _value([1, 4, 5, 5]), "y": _value([1, 4, 5, 5])},
        {"w": w},
    )
    net = Network.load(path)
    assert net.op_ids == [0, 1, 2, 3]
    assert [op.op_type for op in net.ops] == ["Input", "Conv2d", "Relu", "Output"]
    assert net.input_op().outputs == ("x",) and net.output_op().inputs == ("y",)
    x = rand(1, 3, 5, 5)
    (got,) = run_network_reference(net, [x])
    (conv,) = run_network_reference(net.view([1]), [x])
    np.testing.assert_array_equal(got, np.maximum(conv, 0))
    # Saved again, it is a version 3 file that loads as it is.
    net.save(tmp_path / "new.json")
    doc = json.loads((tmp_path / "new.json").read_text())
    assert doc["version"] == FORMAT_VERSION == 3 and [o["id"] for o in doc["ops"]] == [0, 1, 2, 3]
    assert Network.load(tmp_path / "new.json").op_ids == [0, 1, 2, 3]


def test_an_old_file_numbered_from_1_keeps_its_ids(tmp_path: Path) -> None:
    """Networks built with ``first_id=1`` (the manual's numbering before the Input op) keep
    their ids; a version-2 file's fed roles load as they were."""
    path = _old_file(
        tmp_path,
        2,
        [
            _op(1, "Reshape", ["x", "s"], ["r"], fed={"shape": "s"}),
            _op(2, "Relu", ["r"], ["y"]),
        ],
        {
            "x": _value([2, 6]),
            "s": _value([2], "SInt64"),
            "r": _value([-1, -1]),
            "y": _value([-1, -1]),
        },
        {},
    )
    raw = json.loads(path.read_text())
    raw["inputs"] = ["x", "s"]
    canonical = json.dumps(
        {k: v for k, v in raw.items() if k != "checksum"},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=True,
    )
    raw["checksum"] = "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()
    path.write_text(json.dumps(raw))
    net = Network.load(path)
    assert net.op_ids == [0, 1, 2, 3] and net.input_op().outputs == ("x", "s")
    assert net.op(1).fed == {"shape": "s"}
    x = np.arange(-6, 6, dtype=np.float32).reshape(2, 6)
    (got,) = run_network_reference(net, {"x": x, "s": np.array([3, 4])})
    np.testing.assert_array_equal(got, np.maximum(x, 0).reshape(3, 4))


def test_a_hardop_of_an_old_file_names_its_ops_in_the_new_numbering(tmp_path: Path) -> None:
    types = [{"dtype": "FP32", "shape": [2, 3]}]
    path = _old_file(
        tmp_path,
        1,
        [
            _op(0, "Relu", ["x"], ["r"]),
            _op(
                1,
                "HardOp",
                ["r"],
                ["y"],
                attrs={"target": "buyi", "output_types": types, "op_ids": [1, 2]},
            ),
        ],
        {"x": _value([2, 3]), "r": _value([2, 3]), "y": _value([2, 3])},
        {},
    )
    net = Network.load(path)
    hard = net.op(2)
    assert hard.op_type == "HardOp" and hard.attrs["op_ids"] == [2, 3]


def test_an_old_file_cannot_hold_a_boundary_op(tmp_path: Path) -> None:
    path = _old_file(
        tmp_path,
        2,
        [_op(1, "Input", [], ["x"]), _op(2, "Relu", ["x"], ["y"])],
        {"x": _value([3]), "y": _value([3])},
        {},
    )
    e = _err(Network.load, path)
    assert e.code == ErrorCode.LOAD_FAILED
    assert "ops[0] is an Input op, which a version 2 file cannot hold" in e.message
