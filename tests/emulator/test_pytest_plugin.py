"""The pytest plugin as a new user meets it: docs/testing.md's example, written into a fresh
project and run by ``python -m pytest`` in a real subprocess, on the embedded device, against
a real server, under pytest-xdist; and a failing test whose recording is kept and replays.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest

from npuemu.pytest_plugin.choice import NpuMark, device_url, recording_name
from npuemu.server.launch import ServerProcess
from xrt.errors import XrtError

pytestmark = pytest.mark.sim

DOC = Path(__file__).resolve().parents[2] / "docs" / "testing.md"


def doc_example() -> str:
    """The fenced block after ``<!-- example: test_npu.py -->`` in docs/testing.md."""
    text = DOC.read_text()
    m = re.search(r"<!-- example: test_npu\.py -->\n```python\n(.*?)```", text, re.S)
    assert m, "docs/testing.md lost its example"
    return m.group(1)


def run_pytest(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("XRT_DEVICE", "PYTEST_ADDOPTS")}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


def properties(junit: Path) -> dict[str, dict[str, str]]:
    """{test name: {property: value}} of a JUnit XML file."""
    out = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        props = {p.get("name", ""): p.get("value", "") for p in case.iter("property")}
        out[case.get("name", "")] = props
    return out


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "test_npu.py").write_text(doc_example())
    return tmp_path


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    with ServerProcess.start(target="buyi", devices=1) as srv:
        yield srv


def test_the_doc_example_passes_on_embedded_devices(project: Path) -> None:
    run = run_pytest(project, "test_npu.py", "--junitxml=results/junit.xml")
    assert run.returncode == 0 and "3 passed" in run.stdout, run.stdout + run.stderr
    props = properties(project / "results" / "junit.xml")
    assert props["test_scratch_register"]["npu_device"] == "sim://buyi"
    assert props["test_zg330_has_on_chip_memory"]["npu_device"] == "sim://zg330"
    dma = props["test_data_through_the_dma"]
    assert int(dma["npu_cycles"]) > 100  # the DMA ran: hundreds of simulated cycles
    assert float(dma["npu_time_us"]) == pytest.approx(int(dma["npu_cycles"]) * 0.01)
    # Passing tests keep no recording, and leave no empty folder behind.
    assert not (project / "results" / "npu-recordings").exists()


def test_the_doc_example_runs_against_a_server_and_under_xdist(
    project: Path, server: ServerProcess
) -> None:
    run = run_pytest(project, "test_npu.py", "--npu-device", server.url, "--junitxml=a.xml")
    assert run.returncode == 0 and "2 passed, 1 skipped" in run.stdout, run.stdout + run.stderr
    props = properties(project / "a.xml")
    assert props["test_scratch_register"]["npu_device"] == server.url
    assert int(props["test_data_through_the_dma"]["npu_cycles"]) > 100
    # Two workers, one device: one worker waits for the other's lease to end.
    run = run_pytest(
        project, "test_npu.py", "-n", "2", "--npu-device", server.url, "--junitxml=b.xml"
    )
    assert run.returncode == 0 and "2 passed, 1 skipped" in run.stdout, run.stdout + run.stderr
    props = properties(project / "b.xml")
    assert int(props["test_data_through_the_dma"]["npu_cycles"]) > 100
    assert props["test_scratch_register"]["npu_device"] == server.url


def test_xdist_workers_get_embedded_devices_of_their_own(project: Path) -> None:
    run = run_pytest(project, "test_npu.py", "-n", "2", "--junitxml=j.xml")
    assert run.returncode == 0 and "3 passed" in run.stdout, run.stdout + run.stderr
    assert int(properties(project / "j.xml")["test_data_through_the_dma"]["npu_cycles"]) > 100


FAILING = """\
import pytest


def test_wrong_value(npu_device):
    dma = npu_device.get_reg_region("dma")
    dma.write(dma.regs.SCRATCH.address, 5)
    assert dma.read(dma.regs.SCRATCH.address) == 6


@pytest.mark.npu(target="zg3")
def test_unknown_target(npu_device):
    pass


@pytest.mark.npu(fidelity="functional")
def test_unknown_tier(npu_device):
    pass
"""


def test_a_failing_test_keeps_a_recording_that_replays(project: Path) -> None:
    (project / "test_fail.py").write_text(FAILING)
    run = run_pytest(project, "test_fail.py", "--junitxml=out/junit.xml")
    text = run.stdout + run.stderr
    assert run.returncode == 1 and "1 failed, 2 errors" in run.stdout, text
    assert "no such NPU target (known: buyi, zg330)" in text and "'zg3'" in text
    assert "fidelity='functional'): no such simulation tier (known: cycle" in text
    kept = project / "out" / "npu-recordings" / recording_name("test_fail.py::test_wrong_value")
    assert f"test_fail.py::test_wrong_value: kept {kept}" in run.stdout
    assert sorted(p.name for p in kept.parent.iterdir()) == [kept.name]
    # The recording is the failing session: a replay answers as the device did.
    replay = subprocess.run(
        [sys.executable, "-m", "npuemu.cli", "replay", str(kept), "--check"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert replay.returncode == 0 and "bit-exact" in replay.stdout, replay.stdout + replay.stderr
    # --npu-keep-recordings keeps the passing tests' too.
    run = run_pytest(project, "test_npu.py", "--npu-keep-recordings", "--npu-recordings=all")
    assert run.returncode == 0, run.stdout + run.stderr
    assert len(list((project / "all").glob("*.npurec"))) == 3


SESSION = """\
import numpy as np
from onnx import TensorProto, helper

from xrt.backend import HostBackend
from xrt.network import Network
from xrt.quant import quantize_network
from xrt.session import Session


def test_conv_runs_on_the_npu_bit_exact(npu_session):
    w = np.random.default_rng(0).standard_normal((16, 16, 1, 1)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["c"]), helper.make_node("Relu", ["c"], ["y"])],
        "conv_relu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 4, 4])],
        [helper.make_tensor("w", TensorProto.FLOAT, list(w.shape), w.ravel())],
    )
    x = np.random.default_rng(1).standard_normal((1, 16, 4, 4)).astype(np.float32)
    net = quantize_network(Network.from_onnx(helper.make_model(graph)), [{"x": x}])
    npu = npu_session(net)
    assert not npu.placement().host_quantized  # the convolution ran on the NPU
    host = Session.create([HostBackend], net).apply()
    got, want = npu.forward({"x": x}), host.forward({"x": x})
    assert [t.numpy().tobytes() for t in got] == [t.numpy().tobytes() for t in want]
"""


def test_npu_session_runs_a_network_on_the_tests_device(tmp_path: Path) -> None:
    (tmp_path / "test_session.py").write_text(SESSION)
    run = run_pytest(tmp_path, "test_session.py", "--junitxml=s.xml")
    assert run.returncode == 0 and "1 passed" in run.stdout, run.stdout + run.stderr
    cycles = int(
        properties(tmp_path / "s.xml")["test_conv_runs_on_the_npu_bit_exact"]["npu_cycles"]
    )
    assert cycles > 200  # the compute engine ran the program


SERVER = """\
import os

import xrt


def test_a_server_of_the_session(npu_server):
    with open("server.pid", "w") as f:
        f.write(str(npu_server.proc.pid))
    with xrt.Device.open(npu_server.url) as dev:
        assert dev.name == "npu0" and dev.target == "zg330"
"""


def test_npu_server_serves_the_session_and_is_stopped_after_it(tmp_path: Path) -> None:
    (tmp_path / "test_server.py").write_text(SERVER)
    run = run_pytest(tmp_path, "test_server.py", "--npu-server-target", "zg330")
    assert run.returncode == 0 and "1 passed" in run.stdout, run.stdout + run.stderr
    pid = int((tmp_path / "server.pid").read_text())
    with pytest.raises(ProcessLookupError):  # stopped and reaped: no such process any more
        os.kill(pid, 0)
    bad = run_pytest(tmp_path, "test_server.py", "--npu-server-target", "zg3")
    assert bad.returncode != 0 and "--npu-server-target 'zg3': no such NPU target" in (
        bad.stdout + bad.stderr
    )


def test_a_run_without_npu_fixtures_does_not_import_the_runtime(tmp_path: Path) -> None:
    (tmp_path / "test_plain.py").write_text(
        "import sys\n\ndef test_plain():\n    assert 'xrt' not in sys.modules\n"
    )
    run = run_pytest(tmp_path, "test_plain.py")
    assert run.returncode == 0 and "1 passed" in run.stdout, run.stdout + run.stderr


def test_device_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    """The URL each configuration gives (no device opened)."""
    monkeypatch.delenv("XRT_DEVICE", raising=False)
    assert device_url(None, NpuMark()) == "sim://buyi"
    assert device_url(None, NpuMark(target="zg330")) == "sim://zg330"
    assert device_url("sim://buyi?lockstep=1", NpuMark("zg330")) == "sim://zg330?lockstep=1"
    assert device_url("grpc://h:1", NpuMark("zg330")) == "grpc://h:1"  # checked once open
    with pytest.raises(XrtError, match="unknown keyword"):
        NpuMark.from_kwargs((), {"targte": "buyi"})
    with pytest.raises(XrtError, match="keywords only"):
        NpuMark.from_kwargs(("buyi",), {})
    name = recording_name("tests/test_a.py::test_b[x/y z]")
    assert "/" not in name and " " not in name and name.endswith(".npurec")
    assert name != recording_name("tests/test_a.py::test_b[x/y_z]")


FAULTED = """\
import pytest


@pytest.mark.npu(target="buyi", faults=["reg-value:SCRATCH:0xdead", "dma-error"])
def test_faults_are_armed_before_the_test(npu_device):
    npu = npu_device.get_reg_region("npu")
    assert npu.read(npu.regs.SCRATCH.address) == 0xDEAD
    assert sorted(f.fault.kind for f in npu_device.faults()) == ["dma-error", "reg-value"]


def test_an_unmarked_test_gets_a_device_without_faults(npu_device):
    assert npu_device.faults() == []


@pytest.mark.npu(faults=["no-such-fault"])
def test_a_bad_fault(npu_device):
    pass
"""


def test_the_npu_mark_arms_faults_in_the_fault_spelling(project: Path) -> None:
    (project / "test_faulted.py").write_text(FAULTED)
    run = run_pytest(project, "test_faulted.py", "--npu-no-recordings")
    text = run.stdout + run.stderr
    assert run.returncode == 1 and "2 passed, 1 error" in run.stdout, text
    assert "fault 'no-such-fault': unknown kind" in text, text
