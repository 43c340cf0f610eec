"""Program containers without any device or simulator: `compile_container` and ``xrt
compile`` write them, `xrt.aic.Qpc` reads them from files or bytes (buffer mappings, info,
placement), corrupt or malformed bytes are 11011, snapshots written before containers
are read too, and ``xrt run`` recognises a container by its content.
(tests/integration/test_program_containers.py runs them on real devices.)"""

from __future__ import annotations

import hashlib
import json
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import pytest
from netutil import make_model
from onnx import helper
from onnx_zoo import COMPOSITES

from xrt import ErrorCode, XrtError
from xrt.aic import BufferMapping, Qpc, QpcInfo
from xrt.backend import HostBackend
from xrt.cli import main
from xrt.network import Network
from xrt.quant import quantize_network
from xrt.session import Session
from xrt.session.container import compile_container, compile_session

# -- networks ---------------------------------------------------------------------------------


def _two_in_two_out() -> onnx.ModelProto:
    """Inputs x, z; outputs y1 = relu(conv(x)) and y2 = conv(x) + conv(z)."""
    rng = np.random.default_rng(0)
    w1, w2 = (rng.standard_normal((8, 3, 3, 3)).astype(np.float32) * 0.3 for _ in range(2))
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["a"], pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["z", "w2"], ["b"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["a"], ["y1"]),
        helper.make_node("Add", ["a", "b"], ["y2"]),
    ]
    shapes = {"x": [1, 3, 16, 16], "z": [1, 3, 16, 16]}
    return make_model(nodes, shapes, ["y1", "y2"], {"w1": w1, "w2": w2})


def _feeds(net: Network, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {n: rng.standard_normal(net.values[n].shape).astype(np.float32) for n in net.inputs}


@pytest.fixture(scope="module")
def two_io() -> Network:
    net = Network.from_onnx(_two_in_two_out())
    return quantize_network(net, [_feeds(net, s) for s in range(2)])


@pytest.fixture(scope="module")
def cnn() -> Network:
    model = COMPOSITES["small_cnn"]()
    net = Network.from_onnx(model)
    return quantize_network(net, [_feeds(net, s) for s in range(2)])


@pytest.fixture
def container(two_io: Network, tmp_path: Path) -> Path:
    path = tmp_path / "two_io.xrtc"
    compile_container(two_io, "zg330", path)
    return path


def _reseal(path: Path, edit: Callable[[dict], None]) -> None:
    """Edit the manifest and recompute its checksum (what anyone can do)."""
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


# -- the API ----------------------------------------------------------------------------------


def test_buffer_mappings_are_inputs_then_outputs_with_their_sizes_and_types(
    container: Path,
) -> None:
    maps = Qpc.from_file(container).buffer_mappings()
    assert maps == [
        BufferMapping("x", 0, "in", 1 * 3 * 16 * 16 * 4, "FP32", (1, 3, 16, 16)),
        BufferMapping("z", 1, "in", 1 * 3 * 16 * 16 * 4, "FP32", (1, 3, 16, 16)),
        BufferMapping("y1", 2, "out", 1 * 8 * 16 * 16 * 4, "FP32", (1, 8, 16, 16)),
        BufferMapping("y2", 3, "out", 1 * 8 * 16 * 16 * 4, "FP32", (1, 8, 16, 16)),
    ]
    with pytest.raises(AttributeError):
        maps[0].size = 1  # type: ignore[misc]  # frozen


def test_from_buffer_is_from_file_and_info_says_what_it_holds(
    container: Path, two_io: Network
) -> None:
    data = container.read_bytes()
    by_file, by_bytes = Qpc.from_file(container), Qpc.from_buffer(data)
    assert by_file == by_bytes and by_bytes.size == len(data) and by_bytes.buffer() == data
    assert by_file.info() == by_bytes.info()
    assert by_file.buffer_mappings() == by_bytes.buffer_mappings()
    assert Qpc.from_buffer(bytearray(data)) == by_file
    info = by_bytes.info()
    assert isinstance(info, QpcInfo)
    assert (info.target, info.hw_version, info.ocm_bytes) == ("zg330", "0.1.0", 1 << 20)
    assert info.hw_config is not None and info.hw_config["block"] == 16
    assert info.network == two_io.name and info.ops == len(two_io.ops)
    assert sum(info.op_counts.values()) == info.ops and next(iter(info.op_counts)) == "ZG330Backend"
    assert info.npu_programs >= 1 and by_bytes.target == "zg330"
    # The placement is the session's: the same report a compile-only session gives.
    with compile_session(two_io, "zg330") as sess:
        assert info.placement == sess.placement().to_dict()
        assert info.placement_lines() == sess.placement().summary_lines()
    net = by_bytes.network()
    assert net.op_ids == two_io.op_ids and list(net.inputs) == ["x", "z"]


def test_corrupt_bytes_are_11011_never_a_crash(container: Path) -> None:
    good = container.read_bytes()
    bad_inputs = [b"", b"PK\x03\x04", good[: len(good) // 2], good[:-30], b"x" * 4096]
    for pos in range(0, len(good), max(1, len(good) // 97)):
        flipped = bytearray(good)
        flipped[pos] ^= 0x5A
        bad_inputs.append(bytes(flipped))
    want = Qpc.from_buffer(good).info()
    refused = 0
    for data in bad_inputs:
        try:
            q = Qpc.from_buffer(data)
        except XrtError as exc:
            assert exc.code == ErrorCode.LOAD_FAILED, exc
            refused += 1
            continue
        # Accepted only when the flip hit zip metadata nothing reads (a local header's
        # timestamp): then it holds exactly what the good file holds.
        assert q.info() == want and q.network().op_ids == Qpc.from_buffer(good).network().op_ids
    assert refused >= len(bad_inputs) - 5, f"only {refused} of {len(bad_inputs)} refused"
    with pytest.raises(XrtError) as err:
        Qpc.from_buffer("not bytes")  # type: ignore[arg-type]
    assert err.value.code == ErrorCode.WRONG_TYPE
    with pytest.raises(XrtError) as err:
        Qpc.from_file(container.with_name("missing.xrtc"))
    assert err.value.code == ErrorCode.FILE_NOT_FOUND


def test_malformed_manifest_fields_are_11011(container: Path) -> None:
    good = container.read_bytes()
    edits: list[Callable[[dict], None]] = [
        lambda d: d.__setitem__("buffers", {"x": 1}),
        lambda d: d["buffers"][0].__setitem__("size", "big"),
        lambda d: d["buffers"][0].__setitem__("direction", "sideways"),
        lambda d: d.__setitem__("placement", [1, 2]),
        lambda d: d["placement"].__setitem__("host_quantized", [{"reasons": [1]}]),
        lambda d: d["placement"].__setitem__("left_out", ["BuyiBackend"]),
        lambda d: d["placement"].__setitem__("left_out", {"BuyiBackend": 7}),
        lambda d: d.__setitem__("hardware", "fast"),
        lambda d: d["hardware"].__setitem__("ocm_bytes", "1 MiB"),
        lambda d: d.__setitem__("target", 7),
        lambda d: d["backends"][0].__setitem__("class", "os.system"),
    ]
    for i, edit in enumerate(edits):
        container.write_bytes(good)
        _reseal(container, edit)
        with pytest.raises(XrtError) as err:
            q = Qpc.from_file(container)
            q.info()
            q.backend_types()
        assert err.value.code == ErrorCode.LOAD_FAILED, (i, err.value)


def test_a_snapshot_without_the_container_fields_is_read_too(container: Path) -> None:
    """A manifest without the container's optional fields (as ``dump_snapshot`` wrote
    before containers): Qpc derives them."""
    new = Qpc.from_file(container).info()

    def strip(doc: dict) -> None:
        for key in ("target", "hardware", "buffers", "placement"):
            del doc[key]
        for entry in doc["backends"]:
            entry["options"].pop("hw_version", None)
            entry["options"].pop("ocm_bytes", None)

    _reseal(container, strip)
    old = Qpc.from_file(container).info()
    assert old.buffer_mappings == new.buffer_mappings
    assert old.placement == new.placement
    assert (old.target, old.hw_config, old.npu_programs) == (
        new.target,
        new.hw_config,
        new.npu_programs,
    )
    assert old.hw_version is None and old.ocm_bytes is None


def test_a_compile_only_session_refuses_to_run(two_io: Network) -> None:
    with compile_session(two_io, "buyi") as sess:
        assert sess.applied and sess.backends[0].device is None
        with pytest.raises(XrtError) as err:
            sess.forward(_feeds(two_io, 1))
    assert err.value.code == ErrorCode.WRONG_ORDER
    assert "without a device" in err.value.message and "buyi device" in err.value.message
    with pytest.raises(XrtError) as err:
        compile_session(two_io, "tpu")
    assert err.value.code == ErrorCode.WRONG_TYPE and "buyi, zg330" in err.value.message


def test_dump_snapshot_carries_the_container_fields_and_loads_as_before(
    cnn: Network, tmp_path: Path
) -> None:
    path = tmp_path / "host.snapshot"
    feeds = _feeds(cnn, 2)
    with Session.create([HostBackend], cnn).apply() as sess:
        want = [t.numpy() for t in sess.forward(feeds)]
        sess.dump_snapshot(path)
    info = Qpc.from_file(path).info()
    assert info.target is None and info.npu_programs == 0
    assert info.op_counts == {"HostBackend": len(cnn.ops)}
    assert [b.name for b in info.buffer_mappings] == [*cnn.inputs, *cnn.outputs]
    for source in (path, path.read_bytes()):
        with Session.create_with_snapshot(source, [HostBackend]) as again:
            for g, w in zip(again.forward(feeds), want, strict=True):
                assert g.numpy().tobytes() == w.tobytes()
    with Qpc.from_buffer(path.read_bytes()).create_session() as sess:
        for g, w in zip(sess.forward(feeds), want, strict=True):
            assert g.numpy().tobytes() == w.tobytes()


# -- the commands -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def onnx_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("models")
    rng = np.random.default_rng(1)
    w1, w2 = (rng.standard_normal((8, 3, 3, 3)).astype(np.float32) * 0.3 for _ in range(2))
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["a"], pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["x", "w2"], ["b"], pads=[1, 1, 1, 1]),
        helper.make_node("Sub", ["a", "b"], ["y"]),  # QSub: no NPU lowering
    ]
    files = {"cnn": folder / "small_cnn.onnx", "with_sub": folder / "with_sub.onnx"}
    onnx.save(COMPOSITES["small_cnn"](), files["cnn"])
    onnx.save(
        make_model(nodes, {"x": [1, 3, 16, 16]}, ["y"], {"w1": w1, "w2": w2}), files["with_sub"]
    )
    return files


def test_xrt_compile_prints_placement_programs_and_buffers(
    onnx_files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "cnn.xrtc"
    argv = ["compile", str(onnx_files["cnn"]), "--quantize", "--calib", "2", "--target", "buyi"]
    assert main([*argv, "-o", str(out)]) == 0
    text = capsys.readouterr().out
    qpc = Qpc.from_file(out)
    info = qpc.info()
    assert f"target buyi (hardware 0.1.0); {info.npu_programs} NPU program(s)" in text
    assert "placement: " in text and "on BuyiBackend" in text
    for b in info.buffer_mappings:
        assert f"[{b.index}] {b.direction:<3} {b.name!r}: {b.dtype}{list(b.shape)}" in text

    assert main([*argv, "-o", str(out), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["output"] == str(out) and doc["bytes"] == out.stat().st_size
    assert doc["quantizer"] == {"bias_clamped": 0, "scale_raised": 0, "layers_clamped": [],
                                "layers_raised": []}  # fmt: skip
    skip = ("model", "output", "bytes", "quantizer")
    assert {k: v for k, v in doc.items() if k not in skip} == info.to_dict()


def test_xrt_compile_refusals_and_exit_codes(
    onnx_files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "x.xrtc"
    base = ["--target", "zg330", "-o", str(out)]
    # --require-npu: the QSub stays on the host, with the compiler's reason; nothing written.
    argv = ["compile", str(onnx_files["with_sub"]), "--quantize", "--calib", "2", *base]
    assert main([*argv, "--require-npu"]) == 3
    err = capsys.readouterr().err
    assert "on the host: op 4 (QSub): ZG330Backend: the NPU compiler has no lowering" in err
    assert not out.exists()
    assert main(argv) == 0  # without it the container is written, the host op reported
    assert "on the host: op 4 (QSub)" in capsys.readouterr().out
    assert Qpc.from_file(out).info().placement["host_quantized"][0]["op_id"] == 4
    # A container is not a model; a float network for an NPU target; a missing model.
    assert main(["compile", str(out), *base]) == 2
    assert "is a program container already" in capsys.readouterr().err
    assert main(["compile", str(onnx_files["cnn"]), *base]) == 2
    assert "add --quantize" in capsys.readouterr().err
    assert main(["compile", str(tmp_path / "none.onnx"), *base]) == 2
    assert main(["compile", str(onnx_files["cnn"]), "--target", "tpu", "-o", str(out)]) == 2


def test_xrt_run_knows_a_container_by_content(
    cnn: Network,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    host_only = tmp_path / "cnn.bin"  # any name
    with Session.create([HostBackend], cnn).apply() as sess:
        sess.dump_snapshot(host_only)
    assert main(["run", str(host_only), "--json", "--compare", "host"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["compare"]["bit_exact"] and doc["container"]["target"] is None
    assert doc["backends"] == ["host"]
    # Cut short (a copy interrupted), it is still known as a container, and said to be one
    # cut short, not a bad ONNX file (issue 43).
    cut = tmp_path / "cut.xrtc"
    cut.write_bytes(host_only.read_bytes()[: host_only.stat().st_size // 2])
    assert main(["run", str(cut), "--json"]) == 2
    err = json.loads(capsys.readouterr().out)["error"]
    assert err["xrt_error"] == 11011 and str(cut) in err["message"]
    assert "truncated or damaged program container" in err["message"]
    assert "onnx" not in err["message"].lower()

    npu = tmp_path / "cnn.zg330"
    compile_container(cnn, "zg330", npu)
    # No --device: the default device (here $XRT_DEVICE; unset, sim://zg330:
    # tests/emulator/test_sim_device.py); a device of no NPU is refused.
    monkeypatch.setenv("XRT_DEVICE", "nosuch://board")
    assert main(["run", str(npu)]) == 2
    assert "nosuch://board" in capsys.readouterr().err
    assert main(["run", str(npu), "--device", "host://"]) == 2
    assert "ZG330Backend needs a zg330 device" in capsys.readouterr().err
    assert main(["run", str(npu), "--quantize"]) == 2
    assert "program container" in capsys.readouterr().err


def test_npu_options_that_do_not_fit_are_refused_naming_both_sides() -> None:
    """The check a restore makes (the device's side here: this runtime's config, the
    target's on-chip memory, the runtime's hardware version)."""
    from xrt.backend import ZG330Backend
    from xrt.backend.npu._offline import check_options

    backend = ZG330Backend()
    options = backend.snapshot_options()
    here = (backend.config, backend.ocm_capacity())
    check_options(backend, options, *here)  # its own options fit
    acc = options["config"]["acc_rows"]
    cases = [
        ({"target": "buyi"}, ["target 'buyi'", "target 'zg330'", "--target zg330"]),
        ({"config": {**options["config"], "acc_rows": 7}}, [f"acc_rows 7 vs {acc}"]),
        ({"hw_version": "9.0.0"}, ["version '9.0.0'", "version '0.1.0'"]),
        ({"ocm_bytes": 4096}, ["4096 bytes", f"this device has {1 << 20}"]),
    ]
    for edit, words in cases:
        with pytest.raises(XrtError) as err:
            check_options(backend, {**options, **edit}, *here)
        assert err.value.code == ErrorCode.LOAD_FAILED
        assert all(w in err.value.message for w in words), err.value.message
