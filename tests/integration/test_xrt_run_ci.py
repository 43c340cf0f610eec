"""``xrt run`` as a CI job uses it, against a real server: placement never silent,
``--require-npu``, ``--compare host``, ``--output``, ``--runs``, ``--json``, early and clear
connection errors, and Ctrl-C (real subprocesses where the process matters)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "network"))

from netutil import make_model
from onnx_zoo import COMPOSITES

from npuemu.server.launch import ServerProcess
from xrt import exitcodes
from xrt.backend import HostBackend
from xrt.backend._registry import BackendOp
from xrt.cli import main
from xrt.hw.wire import pb, pb_grpc

pytestmark = pytest.mark.sim

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cnn(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small CNN whose quantized operators all run on the NPU (Softmax stays float)."""
    path = tmp_path_factory.mktemp("models") / "small_cnn.onnx"
    onnx.save(COMPOSITES["small_cnn"](), path)
    return path


@pytest.fixture(scope="module")
def with_sub(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two convolutions and a Sub: quantized, the Sub (QSub) has no NPU lowering."""
    rng = np.random.default_rng(0)
    w1, w2 = (rng.standard_normal((8, 3, 3, 3)).astype(np.float32) * 0.3 for _ in range(2))
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["a"], pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["x", "w2"], ["b"], pads=[1, 1, 1, 1]),
        helper.make_node("Sub", ["a", "b"], ["y"]),
    ]
    model = make_model(nodes, {"x": [1, 3, 16, 16]}, ["y"], {"w1": w1, "w2": w2})
    path = tmp_path_factory.mktemp("models") / "with_sub.onnx"
    onnx.save(model, path)
    return path


def _device_state(server: ServerProcess, name: str = "npu0") -> str:
    import grpc

    with grpc.insecure_channel(f"{server.host}:{server.port}") as channel:
        listing = pb_grpc.DeviceServiceStub(channel).ListDevices(
            pb.ListDevicesRequest(), timeout=10
        )
    (d,) = [d for d in listing.devices if d.name == name]
    return pb.DeviceState.Name(d.state)


def test_device_url_picks_its_npu_backend_and_reports_placement(
    cnn: Path, buyi_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", str(cnn), "--device", buyi_url, "--quantize", "--calib", "2"]) == 0
    out = capsys.readouterr().out
    assert "backends buyi, host" in out
    assert "on BuyiBackend" in out.split("placement:")[1]
    assert "quantized operators on an accelerator: 20 of 20" in out
    assert "main program" in out and "MAC array busy" in out


def test_require_npu_fails_listing_each_host_operator_with_its_reason(
    with_sub: Path, cnn: Path, buyi_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--device", buyi_url, "--quantize", "--calib", "2", "--require-npu"]
    assert main(["run", str(with_sub), *argv]) == exitcodes.PLACEMENT
    captured = capsys.readouterr()
    assert "on the host: op 4 (QSub): BuyiBackend: the NPU compiler has no lowering for QSub" in (
        captured.err
    )
    assert "--require-npu: 1 quantized operator(s) stay on the host" in captured.err
    assert "forward:" not in captured.out  # refused before running
    assert main(["run", str(cnn), *argv]) == exitcodes.OK  # a network the NPU runs whole


def test_an_npu_backend_without_quantize_is_refused_with_the_reason(
    cnn: Path, buyi_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", str(cnn), "--device", buyi_url, "--backends", "buyi,host"]) == 2
    err = capsys.readouterr().err
    assert "runs quantized (int8) networks only" in err and "add --quantize" in err


def test_compare_output_runs_and_json(
    cnn: Path, buyi_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_file = tmp_path / "out.npz"
    argv = ["run", str(cnn), "--device", buyi_url, "--quantize", "--calib", "2"]
    argv += ["--compare", "host", "--output", str(out_file), "--runs", "3", "--json"]
    assert main(argv) == exitcodes.OK
    summary = json.loads(capsys.readouterr().out)
    assert summary["compare"] == {"against": "host", "bit_exact": True}
    assert summary["forward_ms"]["runs"] == 3
    assert summary["forward_ms"]["p50"] <= summary["forward_ms"]["p99"]
    assert summary["npu"]["main_program"]["cycles"] > 0
    assert summary["placement"]["host_quantized"] == []
    saved = np.load(out_file)
    (name,) = summary["outputs"]
    assert saved[name].shape == tuple(summary["outputs"][name]["shape"])
    assert np.isclose(float(saved[name].max()), summary["outputs"][name]["max"])


def test_compare_reports_a_difference(
    cnn: Path, buyi_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A host QConv2d kernel that is off by one in one element: only the comparison's
    host-only session runs QConv2d on the host, so the NPU run and it must differ."""
    entry = HostBackend.lookup("QConv2d")
    assert entry is not None

    def off_by_one(op, inputs, outputs, backend):  # type: ignore[no-untyped-def]
        (arr,) = entry.forward(op, inputs, outputs, backend)
        arr = np.array(arr, copy=True)
        arr.reshape(-1)[0] ^= 1
        return [arr]

    monkeypatch.setitem(
        HostBackend.__dict__["_own_ops"],
        "QConv2d",
        BackendOp("QConv2d", off_by_one, entry.init, entry.constraint),
    )
    argv = ["run", str(cnn), "--device", buyi_url, "--quantize", "--calib", "2"]
    assert main([*argv, "--compare", "host"]) == exitcodes.MISMATCH
    out = capsys.readouterr().out
    assert "compare host: output" in out and "differs" in out and "first at" in out


def _sigint_as_at_a_terminal() -> None:
    # A suite started as a shell's background job (`make test &`, nohup) has SIGINT
    # ignored, and a child inherits that: its Ctrl-C would never arrive.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _xrt(*args: str, **env_extra: str) -> subprocess.Popen[str]:
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", **env_extra)
    return subprocess.Popen(
        [sys.executable, "-m", "xrt.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env=env,
        preexec_fn=_sigint_as_at_a_terminal,  # one signal call: safe beside threads
    )


def test_a_wrong_device_fails_before_the_model_is_touched(tmp_path: Path) -> None:
    """The device is opened first: with a model file that does not exist, the error is the
    connection's, said plainly, and no gRPC C-core line reaches stderr."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = _xrt("run", str(tmp_path / "missing.onnx"), "--device", f"grpc://127.0.0.1:{port}")
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == exitcodes.FAILED, err
    assert "connection refused" in err and "npu-emu serve" in err and "missing.onnx" not in err
    assert err.count("\n") == 1 and out == ""  # one line: no traceback, no C-core log


def test_ctrl_c_prints_one_line_exits_130_and_releases_the_lease(
    cnn: Path, zg330_server: ServerProcess
) -> None:
    proc = _xrt(
        "run", str(cnn), "--device", zg330_server.url, "--quantize", "--calib", "2",
        "--runs", "100000", PYTHONFAULTHANDLER="1",
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while _device_state(zg330_server) != "DEVICE_STATE_LEASED":
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the run never took the device"
            time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        try:
            _, err = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            # Where it hangs: faulthandler prints every thread's stack on SIGABRT.
            proc.send_signal(signal.SIGABRT)
            _, stacks = proc.communicate(timeout=60)
            pytest.fail(f"xrt run did not end within 120 s of SIGINT:\n{stacks[-6000:]}")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    assert proc.returncode == exitcodes.INTERRUPTED, err
    assert err.strip() == "xrt run: interrupted"
    deadline = time.monotonic() + 60
    while _device_state(zg330_server) != "DEVICE_STATE_FREE":
        assert time.monotonic() < deadline, "the lease was not released"
        time.sleep(0.1)


def test_a_closed_pipe_ends_quietly(zg330_server: ServerProcess) -> None:
    """``npu-emu mem read ... | head -1``: 4 MB of hex dump, far more than a pipe holds, so
    the command is still writing when the reader goes away."""
    server = f"127.0.0.1:{zg330_server.port}"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "npuemu",
            "mem",
            "read",
            "udma",
            "1048576",
            "--device",
            f"grpc://{server}/npu0",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    proc.stdout.close()  # what `| head -1` does
    err = proc.stderr.read()
    assert proc.wait(120) == exitcodes.BROKEN_PIPE
    assert first and err == ""


def test_the_timeline_shows_layers_units_and_simulated_time(
    cnn: Path, buyi_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--trace``: inside the merged program's launch, one span per layer and the load,
    compute and store units' busy spans, on the wall-time track and on a simulated-time
    track where the launch lasts exactly the engine's RUN_CYCLES."""
    trace = tmp_path / "trace.json"
    argv = ["run", str(cnn), "--device", buyi_url, "--quantize", "--calib", "2"]
    assert main([*argv, "--trace", str(trace), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    events = json.loads(trace.read_text())["traceEvents"]
    lanes = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["name"] == "thread_name"}
    spans: dict[tuple[int, str], list[dict]] = {}
    for e in events:
        if e["ph"] == "X":
            spans.setdefault((e["pid"], lanes[(e["pid"], e["tid"])]), []).append(e)
    for pid in (1, 2):  # wall time, simulated time
        (launch,) = spans[(pid, "npu.engine")]
        layers = spans[(pid, "npu.layers")]
        assert len(layers) == 19  # every layer of small_cnn with instructions
        assert {e["name"].split()[0] for e in layers} >= {"QConv2d", "QAdd", "MaxPool2d", "QGemm"}
        for lane in ("npu.load", "npu.compute", "npu.store"):
            assert spans[(pid, lane)]
        inside = ("npu.layers", "npu.load", "npu.compute", "npu.store")
        lo, hi = launch["ts"] - 0.01, launch["ts"] + launch["dur"] + 0.01
        for e in (e for lane in inside for e in spans[(pid, lane)]):
            assert lo <= e["ts"] <= e["ts"] + e["dur"] <= hi, (pid, e)
    (sim_launch,) = spans[(2, "npu.engine")]
    assert sim_launch["args"]["cycles"] == summary["npu"]["main_program"]["cycles"]
    assert sim_launch["dur"] == pytest.approx(sim_launch["args"]["cycles"] * 0.01)  # 100 MHz
