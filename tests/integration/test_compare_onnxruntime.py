"""``xrt run --compare onnxruntime``: the run's outputs against onnxruntime's on the same
inputs, within ``--atol``/``--rtol``; exit 4 naming the first element out of tolerance."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "network"))

from netutil import make_model
from onnx_zoo import COMPOSITES

from xrt import exitcodes
from xrt.cli import main

pytestmark = pytest.mark.sim


@pytest.fixture(scope="module")
def cnn(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("models") / "small_cnn.onnx"
    onnx.save(COMPOSITES["small_cnn"](), path)
    return path


def _summary(capsys: pytest.CaptureFixture[str]) -> dict:
    return json.loads(capsys.readouterr().out)


def test_the_host_float_run_matches_onnxruntime(
    cnn: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["run", str(cnn), "--device", "host://", "--compare", "onnxruntime", "--json"]
    assert main(argv) == exitcodes.OK
    compare = _summary(capsys)["compare"]
    assert compare["against"] == "onnxruntime" and compare["within_tolerance"] is True
    assert (compare["atol"], compare["rtol"]) == (1e-4, 1e-3)  # the documented defaults
    (out,) = compare["outputs"].values()
    assert out["mismatched"] == 0 and out["max_abs_error"] < 1e-4


def test_a_quantized_npu_run_is_out_of_a_float_tolerance_and_within_a_loose_one(
    cnn: Path, buyi_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["run", str(cnn), "--device", buyi_url, "--quantize", "--calib", "2"]
    argv += ["--compare", "onnxruntime"]
    assert main(argv) == exitcodes.MISMATCH
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if ln.startswith("compare onnxruntime: output"))
    assert "outside atol 0.0001 + rtol 0.001; first at [" in line
    # The quantization error is bounded: a tolerance above it passes, and the JSON says by how much.
    assert main([*argv, "--atol", "0.5", "--rtol", "0", "--json"]) == exitcodes.OK
    compare = _summary(capsys)["compare"]
    (o,) = compare["outputs"].values()
    assert compare["within_tolerance"] is True and 0 < o["max_abs_error"] <= 0.5
    # The same run just below its own largest error fails on exactly that element.
    tight = f"{o['max_abs_error'] * 0.999:.9g}"
    assert main([*argv, "--atol", tight, "--rtol", "0", "--json"]) == exitcodes.MISMATCH
    (o2,) = _summary(capsys)["compare"]["outputs"].values()
    assert o2["mismatched"] >= 1 and abs(o2["got"] - o2["expected"]) > float(tight)


def test_a_nan_against_a_number_is_a_mismatch(tmp_path: Path, capsys) -> None:
    """Sqrt of a negative input: NaN in both onnxruntime and the host, so it matches; a
    NaN only one side has would not (numpy's isclose with equal_nan)."""
    model = make_model([helper.make_node("Sqrt", ["x"], ["y"])], {"x": [1, 4]}, ["y"], {})
    path = tmp_path / "sqrt.onnx"
    onnx.save(model, path)
    x = tmp_path / "x.npy"
    np.save(x, np.array([[-1.0, 0.0, 4.0, 9.0]], dtype=np.float32))
    argv = ["run", str(path), "--device", "host://", "--input", str(x), "--compare", "onnxruntime"]
    assert main([*argv, "--json"]) == exitcodes.OK
    (o,) = _summary(capsys)["compare"]["outputs"].values()
    assert o["mismatched"] == 0 and o["max_abs_error"] == 0


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--atol", "0.1"], "--atol 0.1 applies to --compare onnxruntime only"),
        (["--compare", "host", "--rtol", "1"], "--rtol 1.0 applies to --compare onnxruntime only"),
        (["--compare", "onnxruntime", "--rtol", "-1"], "--rtol must be >= 0, got -1.0"),
        (["--compare", "onnxruntime", "--atol", "nan"], "--atol must be >= 0, got nan"),
    ],
)
def test_bad_tolerances_are_refused_naming_the_value(
    cnn: Path, extra: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", str(cnn), "--device", "host://", *extra]) == exitcodes.BAD_INPUT
    assert message in capsys.readouterr().err


def test_a_network_file_is_refused_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    net_file = tmp_path / "net.json"
    net_file.write_text("{}")  # never read: the refusal comes first
    argv = ["run", str(net_file), "--device", "grpc://127.0.0.1:1", "--compare", "onnxruntime"]
    assert main(argv) == exitcodes.BAD_INPUT
    err = capsys.readouterr().err
    assert f"{net_file} is an xrt network file" in err and "--compare host" in err
