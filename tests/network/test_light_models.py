"""The light networks of the onnx wheel import and run as shipped (opset 9, upgraded by
onnx.version_converter): stored outputs, random weights against onnxruntime, `xrt run`."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from light_models import LIGHT_MODELS, light_path, random_feeds, stored_output, with_random_weights
from netutil import ort_run

from xrt.backend import HostBackend
from xrt.cli import main
from xrt.network import Network
from xrt.session import Session


def _forward(net: Network, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    with Session.create([HostBackend], net) as sess:
        sess.apply()
        return [t.numpy() for t in sess.forward(feeds)]


def test_all_nine_are_found() -> None:
    assert len(LIGHT_MODELS) >= 9 and "resnet50" in LIGHT_MODELS


@pytest.mark.parametrize("name", LIGHT_MODELS)
def test_xrt_run_gives_the_stored_output(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`xrt run` on the file as shipped (HostBackend), its output saved and compared."""
    model = onnx.load(str(light_path(name)))
    feeds = random_feeds(model, 0)
    args = []
    for k, (n, arr) in enumerate(feeds.items()):
        np.save(tmp_path / f"in{k}.npy", arr)
        args.append(f"{n}={tmp_path / f'in{k}.npy'}")
    argv = ["run", str(light_path(name)), "--values", "1000"]
    for a in args:
        argv += ["--input", a]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "forward:" in out
    printed = out.split("values: [", 1)[1].split("]", 1)[0].split(" ...")[0]
    values = np.array([float(v) for v in printed.split(", ")])
    expected = stored_output(name).reshape(-1)
    assert values.size == expected.size
    np.testing.assert_allclose(values, expected, rtol=2e-5, atol=1e-9)  # 6 printed digits


# VGG-19 and the AlexNet family are mostly huge dense layers; bench/bench_light_models.py
# runs every light network with random weights against onnxruntime.
RANDOM_WEIGHT_MODELS = ["resnet50", "squeezenet", "inception_v1", "shufflenet"]


@pytest.mark.parametrize("name", RANDOM_WEIGHT_MODELS)
def test_random_weights_match_onnxruntime(name: str) -> None:
    model = with_random_weights(name, seed=1)
    feeds = random_feeds(model, 2)
    (ours,) = _forward(Network.from_onnx(model), feeds)
    (ref,) = ort_run(model, feeds)
    assert ours.shape == ref.shape
    assert float(ref.max() - ref.min()) > 1e-3, "random weights should give a non-flat output"
    np.testing.assert_allclose(ours, ref, rtol=1e-3, atol=1e-5 * float(np.abs(ref).max()))
    assert int(np.argmax(ours)) == int(np.argmax(ref))
