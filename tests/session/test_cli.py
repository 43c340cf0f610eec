"""The ``xrt run`` command: as a real subprocess, and in-process through ``xrt.cli.main``."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from netutil import make_model, ort_run
from onnx import helper
from onnx_zoo import COMPOSITES

from xrt.cli import main
from xrt.network import Network

REPO = Path(__file__).resolve().parents[2]


def _xrt(*args: str) -> subprocess.CompletedProcess[str]:
    """``python -m xrt.cli ...`` in a fresh interpreter (what the console script runs)."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    return subprocess.run(
        [sys.executable, "-m", "xrt.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env=env,
        check=False,
    )


@pytest.fixture(scope="module")
def classifier(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("model") / "small_cnn.onnx"
    onnx.save(COMPOSITES["small_cnn"](), path)
    return path


def _top5(text: str) -> list[int]:
    match = re.search(r"top-5: (.*)", text)
    assert match, text
    return [int(item.split(" ")[0]) for item in match.group(1).split(", ")]


def test_run_prints_outputs_top5_and_profile(classifier: Path, tmp_path: Path) -> None:
    x = np.random.default_rng(3).standard_normal((1, 3, 32, 32)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    proc = _xrt("run", str(classifier), "--input", str(tmp_path / "x.npy"), "--profile")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    (ref,) = ort_run(onnx.load(classifier), {"x": x})
    assert f"from {tmp_path / 'x.npy'}" in out
    assert re.search(r"output '\w+': FP32\[1, 10\]", out)
    assert _top5(out) == list(np.argsort(-ref[0], kind="stable")[:5])
    assert "time profile of network" in out and "Conv2d" in out and "HostBackend" in out
    assert re.search(r"memory plan: \d+ tensors, arena", out)


def test_run_reports_a_missing_model(tmp_path: Path) -> None:
    proc = _xrt("run", str(tmp_path / "missing.onnx"))
    assert proc.returncode == 2
    assert "[11002]" in proc.stderr and "missing.onnx" in proc.stderr
    assert proc.stdout == ""


def test_a_float_model_without_device_stays_on_the_host_and_opens_none(
    classifier: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Nothing for an NPU (no --quantize, no quantized operator): no default device opens,
    even one that would not open at all."""
    monkeypatch.setenv("XRT_DEVICE", "nosuch://board")
    assert main(["run", str(classifier), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["device"] is None and summary["backends"] == ["host"]
    # With work for an NPU the default device is opened first, and its error says so.
    assert main(["run", str(classifier), "--quantize"]) == 2
    assert "nosuch://board" in capsys.readouterr().err


def test_run_in_process_random_inputs_are_seeded(
    classifier: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", str(classifier), "--seed", "7"]) == 0
    first = capsys.readouterr().out
    assert main(["run", str(classifier), "--seed", "7"]) == 0
    assert capsys.readouterr().out.split("forward:")[0] == first.split("forward:")[0]
    assert "random (seed 7)" in first
    x = np.random.default_rng(7).standard_normal((1, 3, 32, 32)).astype(np.float32)
    (ref,) = ort_run(onnx.load(classifier), {"x": x})
    assert _top5(first) == list(np.argsort(-ref[0], kind="stable")[:5])


def test_run_quantized_and_network_files(
    classifier: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # host:// keeps the quantized network on the host (the default device is an NPU).
    assert main(["run", str(classifier), "--quantize", "--calib", "2", "--device", "host://"]) == 0
    out = capsys.readouterr().out
    assert "network 'test_int8'" in out and "top-5" in out and "backends host" in out
    net = Network.from_onnx(classifier)
    net.save(tmp_path / "net.json")
    assert main(["run", str(tmp_path / "net.json"), "--values", "3"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"values: \[[^,\]]+, [^,\]]+, [^,\]]+ \.\.\. \(10 values\)\]", out)


def test_run_named_inputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = make_model(
        [helper.make_node("Concat", ["a", "b"], ["y"], axis=0)], {"a": [2, 2], "b": [2, 2]}, ["y"]
    )
    onnx.save(model, tmp_path / "cat.onnx")
    np.save(tmp_path / "a.npy", np.full((2, 2), 5, np.float32))
    np.save(tmp_path / "b.npy", np.full((2, 2), 2, np.float32))
    b_arg, a_arg = f"b={tmp_path / 'b.npy'}", f"a={tmp_path / 'a.npy'}"
    assert main(["run", str(tmp_path / "cat.onnx"), "--input", b_arg, "--input", a_arg]) == 0
    out = capsys.readouterr().out
    assert "output 'y': FP32[4, 2]" in out
    assert "values: [5, 5, 5, 5, 2, 2, 2, 2]" in out and "top-5" not in out


@pytest.mark.parametrize(
    ("make_args", "code"),
    [
        (lambda d, m: ["run", str(m), "--input", str(d / "nope.npy")], "[11002]"),
        (lambda d, m: ["run", str(m), "--input", str(d / "bad.npy")], "[11011]"),
        (lambda d, m: ["run", str(d / "bad.onnx")], "[11011]"),
        (lambda d, m: ["run", str(d / "bad.json")], "[11011]"),
        (lambda d, m: ["run", str(m), "--input", str(d / "f64.npy")], "[11010]"),
        (lambda d, m: ["run", str(m), "--input", str(d / "shape.npy")], "[11003]"),
        (
            lambda d, m: ["run", str(m), "--input", str(d / "x.npy"), "--input", str(d / "x.npy")],
            "[11003]",
        ),
        (lambda d, m: ["run", str(m), "--input", f"y={d / 'x.npy'}"], "[11003]"),
        (lambda d, m: ["run", str(m), "--backends", "gpu"], "[11010]"),
        (lambda d, m: ["run", str(m), "--backends", ","], "[11003]"),
        (lambda d, m: ["run", str(m), "--device", "nosuch://x"], "[11010]"),
        (lambda d, m: ["run", str(m), "--quantize", "--calib", "0"], "[11003]"),
    ],
)
def test_run_bad_input_exits_2_with_the_error_code(
    make_args,  # type: ignore[no-untyped-def]
    code: str,
    classifier: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    np.save(tmp_path / "x.npy", np.zeros((1, 3, 32, 32), np.float32))
    np.save(tmp_path / "f64.npy", np.zeros((1, 3, 32, 32)))
    np.save(tmp_path / "shape.npy", np.zeros((1, 3, 16, 16), np.float32))
    (tmp_path / "bad.npy").write_bytes(b"\x93NUMPY garbage")
    (tmp_path / "bad.onnx").write_bytes(b"\x08\x07not a model at all\xff\xff")
    (tmp_path / "bad.json").write_text('{"format": "xrt-network", "version": 1}')
    assert main(make_args(tmp_path, classifier)) == 2
    captured = capsys.readouterr()
    assert code in captured.err and captured.err.startswith("xrt run: error")
    assert captured.out == ""


def test_usage_errors_and_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert main(["run"]) == 2
    assert main(["frobnicate"]) == 2
    assert main(["--help"]) == 0
    assert "run" in capsys.readouterr().out


def test_runtime_packages_do_not_import_onnx() -> None:
    code = (
        "import sys, xrt.backend, xrt.session, xrt.cli, xrt.aic, xrt.session.container; "
        "import xrt._run_command, xrt._compile_command; "
        "assert 'onnx' not in sys.modules and 'onnxruntime' not in sys.modules"
    )
    assert subprocess.run([sys.executable, "-c", code], cwd=REPO, check=False).returncode == 0


def test_run_tunes_host_kernels_records_them_and_prints_the_op_type_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = tmp_path / "cnn.onnx"
    onnx.save(COMPOSITES["small_cnn"](), model)
    records = tmp_path / "records.json"
    args = ["run", str(model), "--quantize", "--calib", "1", "--tuning-records", str(records)]
    args += ["--device", "host://"]  # the host's kernels, not the default NPU's
    assert main([*args, "--tune", "--profile"]) == 0
    out = capsys.readouterr().out
    assert "time per op type" in out and re.search(r"QConv2d\s+\d+\s+[\d.]+\s+[\d.]+", out)
    assert f"tuning records {records}" in out and "saved" in out
    from xrt.tuning import TuningRecords

    saved = TuningRecords.load(records)
    convs = [r for r in saved if r.key.op_type == "QConv2d"]
    assert convs and all(r.measured_on == "host-timer" for r in convs) and not saved.notes
    # A second run reads them and neither measures nor rewrites the file.
    before = records.read_bytes()
    assert main([*args, "--compare", "host"]) == 0
    assert "bit-exact" in capsys.readouterr().out and records.read_bytes() == before
    assert main(["run", str(model), "--tune"]) == 2  # --tune needs the file to keep records
    assert "--tune needs --tuning-records" in capsys.readouterr().err


def test_op_type_summary_counts_totals_shares_and_means() -> None:
    from xrt.session import OpTime, op_type_summary

    times = {
        1: OpTime((1,), "QConv2d", "a", "HostBackend", 3.0, 0.0, 0.0),
        2: OpTime((2,), "Relu", "b", "HostBackend", 1.0, 0.0, 0.0),
        3: OpTime((3,), "QConv2d", "c", "HostBackend", 5.0, 0.0, 0.0),
        4: OpTime((4, 5), "Subgraph", "4..5", "BuyiBackend", 1.0, 0.5, 0.5),
    }
    rows = {r.op_type: r for r in op_type_summary(times)}
    conv = rows["QConv2d"]
    assert (conv.count, conv.total, conv.share, conv.mean) == (2, 8.0, 80.0, 4.0)
    assert op_type_summary(times)[0].op_type == "QConv2d"
    assert rows["Subgraph"].count == 1 and rows["Relu"].share == 10.0


def test_run_records_a_board_session(
    classifier: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--record FILE`` records the axi:// device's session (here a file standing in for
    /dev/mem: the host backend runs the model, the device is probed and closed); any other
    device is refused before anything runs."""
    from xrt.hw.regs import DMA, NPU
    from xrt.hw.targets import target
    from xrt.recording import Kind, read_recording

    cfg = target("buyi")
    board = tmp_path / "mem.bin"
    with board.open("wb") as f:
        f.truncate(cfg.dma_base + 0x1000)
    fd = os.open(board, os.O_RDWR)
    for addr, value in (
        (cfg.npu_base + NPU.offset("MAGIC"), NPU.register("MAGIC").reset),
        (cfg.npu_base + NPU.offset("TARGET"), cfg.id),
        (cfg.dma_base + DMA.offset("MAGIC"), DMA.register("MAGIC").reset),
    ):
        os.pwrite(fd, value.to_bytes(4, "little"), addr)
    os.close(fd)
    rec = tmp_path / "run dir" / "board.npurec"  # a space survives the URL
    rec.parent.mkdir()
    url = f"axi://b?file={board}"
    assert (
        main(["run", str(classifier), "--device", url, "--backends", "host", "--record", str(rec)])
        == 0
    )
    recording = read_recording(rec)
    assert recording.wall_clock and recording.end is not None
    assert [r.kind for r in recording.records][:2] == [Kind.REQUEST, Kind.REQUEST]  # the probe
    capsys.readouterr()
    assert main(["run", str(classifier), "--device", "grpc://127.0.0.1:1", "--record", "x"]) == 2
    assert "npu-emu serve --record" in capsys.readouterr().err
    assert main(["run", str(classifier), "--record", str(tmp_path / "y")]) == 2
    assert not (tmp_path / "y").exists()
