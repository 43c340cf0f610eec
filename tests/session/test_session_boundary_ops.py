"""Sessions with the manual's ids: the Input op 0 and the Output op 7 of its example network
are bound (to the host, or to the first backend), profiled and stepped to like any op, and
never part of an accelerator's program; snapshots and containers of before them are refused
naming their version."""

from __future__ import annotations

import hashlib
import json
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from tinynpu import TinyNpuBackend, manual_network, reference_twin

from xrt import HostDevice, TensorType
from xrt.aic import Qpc
from xrt.backend import HostBackend, Subgraph
from xrt.dtypes import QuantParams
from xrt.errors import ErrorCode, XrtError
from xrt.network import Network, NetworkBuilder, run_network_reference
from xrt.session import Session
from xrt.session.container import compile_container
from xrt.session.snapshot import SNAPSHOT_VERSION

MANUAL_TYPES = ["Input", "Conv2d", "Cast", "HardOp", "Cast", "Relu", "MaxPool2d", "Output"]


def _x(seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((1, 3, 8, 8)).astype(np.float32)


def _int8_chain() -> Network:
    """Input -> Relu -> MaxPool2d -> Output, int8: TinyNpu runs both real ops."""
    b = NetworkBuilder("int8")
    x = b.input("x", TensorType("SInt8", [1, 4, 4, 4], quant=QuantParams(0.1)))
    (r,) = b.add("Relu", [x])
    (m,) = b.add("MaxPool2d", [r], {"kernel": [2, 2], "strides": [2, 2]})
    return b.build([m])


def test_the_manual_network_has_ids_0_to_7() -> None:
    network = manual_network()
    assert network.op_ids == list(range(8))
    assert [op.op_type for op in network.ops] == MANUAL_TYPES
    assert network.input_op().op_id == 0 and network.output_op().op_id == 7
    # network.inputOp()[0].dtype(): what the manual builds its input tensor with.
    assert network.values[network.input_op().outputs[0]].dtype.manual_name == "FP32"
    assert network.output_op().inputs == network.outputs


def test_the_manual_views_bind_input_and_output_to_the_host() -> None:
    """1.1.2 as written: ``view([0, 1, 2, 5, 6, 7])`` to the host, ``view([3, 4])`` to the
    NPU, the session on ``view(0)``."""
    network = manual_network()
    host = HostBackend.create(network.view([0, 1, 2, 5, 6, 7]), HostDevice.default())
    npu = TinyNpuBackend.create(network.view([3, 4]), HostDevice.default())
    assert host.network_view is not None and host.network_view.inputs[0] == "x"
    sess = Session.create_with_backends(network.view(0), [host, npu]).apply()
    bindings = sess.backend_bindings()
    assert sorted(bindings) == list(range(8))
    assert {i for i, b in bindings.items() if b is host} == {0, 1, 2, 5, 6, 7}
    assert {i for i, b in bindings.items() if b is npu} == {3, 4}
    sess.enable_time_profile(True)
    (out,) = sess.forward([_x()])
    (want,) = run_network_reference(reference_twin(network), [_x()])
    np.testing.assert_array_equal(out.numpy(), want)
    results = sess.time_profile_results()
    assert list(results) == [0, 1, 2, 3, 5, 6, 7]  # the subgraph [3, 4] under op 3
    for op_id, op_type in ((0, "Input"), (7, "Output")):
        t = results[op_id]
        assert t.op_ids == (op_id,) and t.op_type == op_type and t.backend == "HostBackend"
        assert t.hardware == 0 and t.wall >= 0
    assert "Input" in sess.profile_table() and "Output" in sess.profile_summary()
    # The placement report is about work: it leaves the two ends out.
    assert [p.op_id for p in sess.placement().ops] == [1, 2, 3, 4, 5, 6]


def test_views_without_them_get_them_bound_to_the_host() -> None:
    network = manual_network()
    host = HostBackend.create(network.view([1, 2, 5, 6]), HostDevice.default())
    npu = TinyNpuBackend.create(network.view([3, 4]), HostDevice.default())
    sess = Session.create_with_backends(network, [npu, host]).apply()
    assert sess.backend_bindings()[0] is host and sess.backend_bindings()[7] is host
    (out,) = sess.forward([_x(2)])
    (want,) = run_network_reference(reference_twin(network), [_x(2)])
    np.testing.assert_array_equal(out.numpy(), want)


def test_create_binds_them_to_the_host_whatever_the_priority() -> None:
    network = manual_network()
    sess = Session.create([TinyNpuBackend, HostBackend], network.view(0))
    assert sess.backend_bindings()[0].is_type(HostBackend)
    assert sess.backend_bindings()[7].is_type(HostBackend)


def test_without_a_host_backend_the_first_backend_passes_them_through() -> None:
    net = _int8_chain()
    sess = Session.create([TinyNpuBackend], net, [HostDevice.default()]).apply()
    npu = sess.backends[0]
    assert isinstance(npu, TinyNpuBackend)
    assert all(b is npu for b in sess.backend_bindings().values())
    # Units of their own, never merged into the program.
    units = sess.execution_units()
    kinds = [u.op_ids if isinstance(u, Subgraph) else u.op_id for u in units]
    assert kinds == [0, [1, 2], 3]
    x = np.random.default_rng(0).integers(-128, 128, (1, 4, 4, 4)).astype(np.int8)
    (out,) = sess.forward([x])
    np.testing.assert_array_equal(out.numpy(), run_network_reference(net, [x])[0])
    assert npu.launches == [(1, 2)]
    (fed,) = sess.step_to(0, [x])
    np.testing.assert_array_equal(fed.numpy(), x)
    (last,) = sess.step_to(3)
    np.testing.assert_array_equal(last.numpy(), out.numpy())


def test_dumps_name_the_input_ops_outputs(tmp_path: Path) -> None:
    sess = Session.create([HostBackend], _int8_chain()).apply()
    sess.set_dump_outputs(True, tmp_path, "SQB")
    x = np.random.default_rng(1).integers(-128, 128, (1, 4, 4, 4)).astype(np.int8)
    sess.forward([x])
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "0_x.sqb",  # the Input op's output: the input as fed
        "1_relu1.sqb",
        "2_maxpool2d2.sqb",
    ]  # nothing for the Output op: its values were dumped by their makers
    np.testing.assert_array_equal(np.fromfile(tmp_path / "0_x.sqb", np.int8), x.ravel())


# -- files that hold op ids -----------------------------------------------------------------


def _reseal(path: Path, edit: Callable[[dict], None]) -> None:
    """Edit the manifest and recompute its checksum (what an old writer's file looks like
    as far as the version goes)."""
    with zipfile.ZipFile(path) as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    doc = json.loads(members["snapshot.json"])
    edit(doc)
    body = {k: v for k, v in doc.items() if k != "checksum"}
    canon = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
    doc["checksum"] = "sha256:" + hashlib.sha256(canon).hexdigest()
    members["snapshot.json"] = json.dumps(doc).encode()
    with zipfile.ZipFile(path, "w") as zf:
        for n, blob in members.items():
            zf.writestr(n, blob)


def test_a_snapshot_keeps_the_manual_bindings(tmp_path: Path) -> None:
    network = manual_network()
    with Session.create([TinyNpuBackend, HostBackend], network).apply() as sess:
        sess.dump_snapshot(tmp_path / "s.snap")
    manifest = json.loads(zipfile.ZipFile(tmp_path / "s.snap").read("snapshot.json"))
    assert manifest["version"] == SNAPSHOT_VERSION == 2
    assert manifest["view"] == list(range(8))
    assert [e["ops"] for e in manifest["backends"]] == [[3, 4], [0, 1, 2, 5, 6, 7]]
    with Session.create_with_snapshot(
        tmp_path / "s.snap", [TinyNpuBackend, HostBackend], [HostDevice.default(), None]
    ) as back:
        bound = {i: type(b).__name__ for i, b in back.backend_bindings().items()}
        assert bound[0] == bound[7] == "HostBackend" and bound[3] == "TinyNpuBackend"
        (out,) = back.forward([_x(3)])
        np.testing.assert_array_equal(
            out.numpy(), run_network_reference(reference_twin(network), [_x(3)])[0]
        )


def test_a_version_1_snapshot_is_refused_naming_both_versions(tmp_path: Path) -> None:
    path = tmp_path / "old.snap"
    with Session.create([HostBackend], _int8_chain()).apply() as sess:
        sess.dump_snapshot(path)
    _reseal(path, lambda doc: doc.update(version=1))
    with pytest.raises(XrtError) as e:
        Session.create_with_snapshot(path, [HostBackend])
    msg = e.value.message
    assert e.value.code == ErrorCode.LOAD_FAILED and str(path) in msg
    assert "format version 1" in msg and "reads format version 2" in msg
    assert "Session.dump_snapshot" in msg and "xrt compile" in msg
    _reseal(path, lambda doc: doc.update(version=3))
    with pytest.raises(XrtError) as e:
        Session.create_with_snapshot(path, [HostBackend])
    assert "format version 3" in e.value.message and "upgrade xrt" in e.value.message


def test_a_version_1_container_is_refused_naming_both_versions(tmp_path: Path) -> None:
    path = tmp_path / "old.xrtc"
    compile_container(_int8_chain(), "buyi", path)
    assert Qpc.from_file(path).info().format_version == SNAPSHOT_VERSION
    _reseal(path, lambda doc: doc.update(version=1))
    with pytest.raises(XrtError) as e:
        Qpc.from_file(path)
    msg = e.value.message
    assert e.value.code == ErrorCode.LOAD_FAILED
    assert "format version 1" in msg and "reads format version 2" in msg
    assert "xrt compile MODEL --target TARGET" in msg
