"""The shell commands of docs/deploy.md run as written, where they can run here: the
secrets file of the systemd section (in a scratch root instead of /etc), and the wheel
install's argument, which must expand to the wheel that `pip wheel` wrote."""

from __future__ import annotations

import re
import stat
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = (ROOT / "docs" / "deploy.md").read_text()


def _shell_lines() -> list[str]:
    fences = re.findall(r"^```([^\n`]*)\n(.*?)^```[ \t]*$", DOCS, re.S | re.M)
    blocks = [body for label, body in fences if label == "sh"]
    return [line.split("  #")[0].strip() for b in blocks for line in b.splitlines() if line]


def test_the_secrets_file_commands_work_on_a_machine_without_the_folder(tmp_path: Path) -> None:
    lines = [ln for ln in _shell_lines() if "/etc/npu-emu" in ln]
    assert any(ln.startswith("install -d") for ln in lines), lines
    script = "set -e\n" + "\n".join(ln.replace("/etc/", f"{tmp_path}/etc/") for ln in lines)
    subprocess.run(["bash", "-c", script], check=True, timeout=30)
    env = tmp_path / "etc" / "npu-emu" / "env"
    assert stat.S_IMODE(env.stat().st_mode) == 0o600
    assert stat.S_IMODE(env.parent.stat().st_mode) == 0o700
    assert env.read_text() == "NPU_EMU_TOKEN=s3cret\n"


def test_the_wheel_install_argument_expands_to_the_built_wheel(tmp_path: Path) -> None:
    (line,) = [ln for ln in _shell_lines() if ln.startswith("/opt/npu-emu/bin/pip install")]
    argument = line.split("pip install ", 1)[1]
    dist = tmp_path / "dist"
    dist.mkdir()
    (dist / "npu_emu-0.1.0-py3-none-any.whl").touch()  # what `pip wheel -w dist .` writes
    out = subprocess.run(
        ["bash", "-c", f"printf '%s\\n' {argument}"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert out == ["dist/npu_emu-0.1.0-py3-none-any.whl[emulator]"]
