"""Program containers compiled without a device (``xrt compile``, `compile_container`) run
on a real server of their target, bit-exact against the host on the same quantized
network, with the very programs a session on the device compiles; a container for the
other target or other hardware is refused naming both. Real server, real engine."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "network"))

from light_models import random_feeds, with_random_weights
from onnx_zoo import COMPOSITES
from test_npu_backends import _host, _quantized

from npuemu.server.launch import ServerProcess
from xrt import Device, ErrorCode, XrtError
from xrt.aic import Qpc
from xrt.backend import BuyiBackend, HostBackend, ZG330Backend
from xrt.backend.npu import PROGRAM_CACHE, NpuBackend
from xrt.cli import main
from xrt.hw.targets import NPU
from xrt.network import Network
from xrt.npu_device import NpuDevice
from xrt.session import Session
from xrt.session.container import compile_container

pytestmark = pytest.mark.sim

REPO = Path(__file__).resolve().parents[2]
NPU_TYPES: dict[str, type[NpuBackend]] = {"buyi": BuyiBackend, "zg330": ZG330Backend}


@pytest.fixture(scope="module")
def squeezenet(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Network, dict]:
    """The light SqueezeNet with random weights: its ONNX file, the network quantized, and
    an input."""
    model = with_random_weights("squeezenet", 0)
    path = tmp_path_factory.mktemp("models") / "squeezenet.onnx"
    onnx.save(model, path)
    return path, _quantized(model), random_feeds(model, seed=5)


@pytest.fixture(scope="module")
def small() -> Network:
    return _quantized(COMPOSITES["small_cnn"]())


@pytest.fixture
def open_device(request: pytest.FixtureRequest) -> Callable[[str], NpuDevice]:
    """``open_device(target)``: a device of the session's server of that target, closed
    after the test."""
    opened: list[Device] = []

    def open_(target: str) -> NpuDevice:
        server: ServerProcess = request.getfixturevalue(f"{target}_server")
        dev = Device.open(server.url)
        assert isinstance(dev, NpuDevice) and dev.target == target
        opened.append(dev)
        return dev

    yield open_
    for dev in opened:
        dev.close()


def _programs(path: Path) -> dict[str, bytes]:
    """The NPU programs a container holds, by artefact name."""
    with zipfile.ZipFile(path) as zf:
        doc = json.loads(zf.read("snapshot.json"))
        return {
            key: zf.read(member)
            for entry in doc["backends"]
            for key, member in entry["state"].items()
        }


def _xrt(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    return subprocess.run(
        [sys.executable, "-m", "xrt.cli", *args],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
        env=env,
        check=False,
    )


@pytest.mark.parametrize("target", ["buyi", "zg330"])
def test_a_container_compiled_by_the_cli_runs_on_its_target_bit_exact(
    target: str,
    squeezenet: tuple[Path, Network, dict],
    open_device: Callable[[str], NpuDevice],
    request: pytest.FixtureRequest,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    model, _, feeds = squeezenet
    out = tmp_path / f"squeezenet.{target}"  # no .zip: `xrt run` knows it by content
    done = _xrt("compile", str(model), "--quantize", "--calib", "2", "--target", target)
    assert done.returncode == 2 and "-o/--output" in done.stderr  # required
    done = _xrt(
        "compile", str(model), "--quantize", "--calib", "2", "--target", target,
        "-o", str(out), "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["target"] == target and doc["hardware"]["version"] == "0.1.0"
    assert doc["npu_programs"] >= 1 and doc["placement"]["host_quantized"] == []
    assert [(b["name"], b["direction"]) for b in doc["buffers"]] == [
        ("data_0", "in"),
        ("softmaxout_1", "out"),
    ]

    # Run as a CI job would: bit-exact against HostBackend on the container's own network.
    url = request.getfixturevalue(f"{target}_server").url
    assert main(["run", str(out), "--device", url, "--compare", "host", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["compare"] == {"against": "host", "bit_exact": True}
    assert summary["container"]["target"] == target
    assert summary["npu"]["launches"] == doc["npu_programs"]

    # The programs are what this runtime compiles on the device: verify compiles them
    # again (nothing cached from the compiling process, which was another one) and compares.
    PROGRAM_CACHE.clear()
    dev = open_device(target)
    types = [NPU_TYPES[target], HostBackend]
    with Session.create_with_snapshot(out, types, [dev, None], verify=True) as sess:
        got = [t.numpy() for t in sess.forward(feeds)]
    want = _host(Qpc.from_file(out).network(), feeds)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("target", ["buyi", "zg330"])
def test_the_api_compiles_without_a_device_what_a_device_session_compiles(
    target: str,
    squeezenet: tuple[Path, Network, dict],
    open_device: Callable[[str], NpuDevice],
    tmp_path: Path,
) -> None:
    _, qnet, feeds = squeezenet
    path = tmp_path / "squeezenet.xrtc"
    PROGRAM_CACHE.clear()
    compile_container(qnet, target, path)
    offline = _programs(path)
    assert offline

    PROGRAM_CACHE.clear()  # the device session compiles on its own
    dev = open_device(target)
    with Session.create([NPU_TYPES[target], HostBackend], qnet, [dev, None]).apply() as online:
        assert online.backends[0].snapshot_state() == offline  # byte-identical programs

    qpc = Qpc.from_file(path)
    assert qpc.target == target
    with qpc.create_session(dev) as sess:
        assert [type(b) for b in sess.backends] == [NPU_TYPES[target], HostBackend]
        got = [t.numpy() for t in sess.forward(feeds)]
        assert len(sess.backends[0].launches) == len(offline)  # ran on the NPU
    for g, w in zip(got, _host(qnet, feeds), strict=True):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize(("compiled", "device"), [("zg330", "buyi"), ("buyi", "zg330")])
def test_a_container_for_the_other_target_is_refused_naming_both(
    compiled: str,
    device: str,
    small: Network,
    open_device: Callable[[str], NpuDevice],
    request: pytest.FixtureRequest,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = tmp_path / "small.xrtc"
    compile_container(small, compiled, path)
    url = request.getfixturevalue(f"{device}_server").url
    assert main(["run", str(path), "--device", url]) == 2  # before the test holds the device
    err_text = capsys.readouterr().err
    assert f"compiled for target {compiled!r}" in err_text and f"a {device!r} device" in err_text
    dev = open_device(device)
    attempts = [
        lambda: Qpc.from_file(path).create_session(dev),
        lambda: Session.create_with_snapshot(path, [NPU_TYPES[compiled], HostBackend], [dev, None]),
        lambda: Session.create_with_snapshot(path, [NPU_TYPES[device], HostBackend], [dev, None]),
    ]
    for attempt in attempts:
        with pytest.raises(XrtError) as err:
            attempt()
        assert err.value.code == ErrorCode.LOAD_FAILED
        assert f"compiled for target {compiled!r}" in err.value.message, err.value.message
        assert repr(device) in err.value.message, err.value.message


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


def test_a_container_for_other_hardware_is_refused_naming_both(
    small: Network, open_device: Callable[[str], NpuDevice], tmp_path: Path
) -> None:
    buyi = open_device("buyi")
    # Another compute-engine configuration (half the input buffer).
    other = dataclasses.replace(NPU, inp_rows=NPU.inp_rows // 2)
    path = tmp_path / "other_config.xrtc"
    compile_container(small, "buyi", path, config=other)
    assert Qpc.from_file(path).info().hw_config["inp_rows"] == NPU.inp_rows // 2
    with pytest.raises(XrtError) as err:
        Qpc.from_file(path).create_session(buyi)
    assert err.value.code == ErrorCode.LOAD_FAILED
    assert f"inp_rows {NPU.inp_rows // 2} vs {NPU.inp_rows}" in err.value.message

    # Another hardware version (said by the manifest, resealed).
    path = tmp_path / "other_version.xrtc"
    compile_container(small, "buyi", path)

    def version(doc: dict) -> None:
        doc["backends"][0]["options"]["hw_version"] = "0.2.0"

    _reseal(path, version)
    with pytest.raises(XrtError) as err:
        Qpc.from_file(path).create_session(buyi)
    assert "hardware version '0.2.0'" in err.value.message
    assert "this device is version '0.1.0'" in err.value.message
