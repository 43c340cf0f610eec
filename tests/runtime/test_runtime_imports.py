"""The runtime stands alone: it never imports the emulator (a runtime installed on a board
carries no simulator), and ``import xrt`` registers the NPU URL schemes without pulling in
grpc, which only a ``grpc://`` URL needs."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import xrt

RUNTIME = Path(xrt.__file__).parent


def _imports_in_subprocess(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", code + "\nimport sys\nprint(' '.join(sorted(sys.modules)))"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return set(out.split())


def test_import_xrt_registers_schemes_without_grpc_or_emulator() -> None:
    mods = _imports_in_subprocess(
        "import xrt\nassert {'grpc://', 'axi://'} <= set(xrt.registered_devices())"
    )
    assert "xrt.npu_device" in mods and "xrt.transport.mmap" not in mods
    assert "grpc" not in mods and "xrt.transport.grpc" not in mods
    assert not {m for m in mods if m.split(".")[0] == "npuemu"}


def test_transports_never_import_the_emulator() -> None:
    mods = _imports_in_subprocess(
        "import xrt, xrt.transport.grpc, xrt.transport.mmap, xrt.npu_device, xrt.testing.contracts"
    )
    assert "grpc" in mods
    assert not {m for m in mods if m.split(".")[0] == "npuemu"}


def test_no_runtime_source_names_the_emulator_package() -> None:
    offenders = []
    for path in RUNTIME.rglob("*.py"):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            offenders += [f"{path}: {n}" for n in names if n.split(".")[0] == "npuemu"]
    assert not offenders, offenders
