"""The farm's pieces that need no farm: URL handling, errors, imports, the pytest plugin."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

import xrt
from npuemu.farm.fixtures import parse_tags
from npuemu.farm.resource import NpuEmuDriver
from xrt.errors import XrtError

ROOT = Path(__file__).resolve().parents[2]


def test_import_xrt_registers_labgrid_without_importing_it() -> None:
    code = (
        "import sys, xrt\n"
        "assert 'labgrid://' in xrt.registered_devices()\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('labgrid', 'xrt.farm')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_labgrid_url_needs_a_place() -> None:
    with pytest.raises(XrtError, match=r"needs a place: labgrid://PLACE") as exc:
        xrt.Device.open("labgrid://")
    assert exc.value.code == 11003


def test_labgrid_url_with_no_coordinator_says_where_it_looked() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(XrtError, match=rf"labgrid coordinator 127.0.0.1:{port}: .*running there"):
        xrt.Device.open(f"labgrid://zg330-0?coordinator=127.0.0.1:{port}")


def test_farm_tags_are_key_value_pairs() -> None:
    assert parse_tags("target=zg330, pool=ci") == {"target": "zg330", "pool": "ci"}
    with pytest.raises(XrtError, match="'zg330' is not KEY=VALUE"):
        parse_tags("zg330")


def test_the_driver_refuses_a_token_in_its_parameters() -> None:
    from labgrid import Target

    with pytest.raises(ValueError, match="NPU_EMU_TOKEN"):
        NpuEmuDriver(Target("t"), None, params="token=secret")


def test_the_labgrid_pytest_plugin_stays_off_in_the_projects_runs() -> None:
    """Installing labgrid registers its plugin with every pytest; the project's addopts turn
    it off (its hooks would run in every test session), `-p labgrid` turns it back on."""

    def help_text(*args: str) -> str:
        return subprocess.run(
            [sys.executable, "-m", "pytest", *args, "--help"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout

    assert "--lg-env" not in help_text()
    assert "--lg-env" in help_text("-p", "labgrid")
