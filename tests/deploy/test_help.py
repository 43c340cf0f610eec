"""Small things a user expects from the commands: help shows defaults, without leaking a
token from the environment; `python -m` works for both packages."""

from __future__ import annotations

from cli_helpers import run_cli


def test_serve_help_shows_defaults_but_not_the_token():
    out = run_cli(["serve", "--help"], env={"NPU_EMU_TOKEN": "s3cret-token"})
    assert out.returncode == 0, out.stderr
    text = " ".join(out.stdout.split())
    for shown in ("(default: 50051)", "(default: 127.0.0.1)", "(default: 30.0)", "(default: INFO)"):
        assert shown in text, text
    assert "s3cret-token" not in out.stdout


def test_xrt_run_help_shows_defaults():
    out = run_cli(["run", "--help"], module="xrt")
    assert out.returncode == 0, out.stderr
    text = " ".join(out.stdout.split())
    assert "(default: 0)" in text  # --seed
    assert "(default: the device's NPU backend and host, or host alone on host:// or a " in text
    assert "(default: $XRT_DEVICE, else sim://buyi, when there is NPU work)" in text
    assert "--require-npu" in text and "--compare {host,onnxruntime}" in text
    assert "--atol ATOL" in text and "--rtol RTOL" in text


def test_xrt_compile_help_names_its_required_options():
    out = run_cli(["compile", "--help"], module="xrt")
    assert out.returncode == 0, out.stderr
    text = " ".join(out.stdout.split())
    assert "--target {buyi,zg330}" in text and "-o FILE, --output FILE" in text
    assert "--quantize" in text and "--calib-dir DIR" in text and "(default: 0)" in text
    top = run_cli(["--help"], module="xrt")
    assert "compile" in top.stdout and "run" in top.stdout
