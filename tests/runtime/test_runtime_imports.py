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


def test_renamed_modules_and_classes_keep_their_old_import_paths() -> None:
    """Code written against the old names keeps working: each old name is the same object."""
    import xrt.backend.npu
    import xrt.npu_device
    import xrt.ops.hardop_placeholder
    from xrt.backend.npu.hardop import to_hardop as old_to_hardop
    from xrt.devices import BuyiDevice as OldBuyiDevice
    from xrt.devices import Zg330Device
    from xrt.devices.dma_region import DmaEngine as OldDmaEngine
    from xrt.ops.hardop import output_type_to_json as old_output_type_to_json

    assert OldBuyiDevice is xrt.npu_device.BuyiDevice is xrt.BuyiDevice
    assert Zg330Device is xrt.ZG330Device
    assert OldDmaEngine is xrt.npu_device.DmaEngine
    assert old_to_hardop is xrt.backend.npu.to_hardop
    assert old_output_type_to_json is xrt.ops.hardop_placeholder.output_type_to_json
    assert xrt.devices is xrt.npu_device  # type: ignore[attr-defined]
