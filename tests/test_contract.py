"""The hardware contract (`xrt.hw`) is the one source of every value the runtime, the
emulator and the RTL share, and the layers import each other only as the design allows.

- The values the RTL needs too are generated into its packages from the same sources: the
  register statuses (proto), the poll back-off (npu.toml), the counter indices (RDL). These
  tests read the generated and hand-written SystemVerilog and compare them with Python.
- No hand-written module redefines a contract value (a second copy that could drift).
- The runtime never imports the emulator; the emulator, bench/ and tools/ import only the
  runtime's public modules; nobody but `xrt.hw` reaches into its generated halves.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from xrt.hw.regops import RegKind
from xrt.hw.regs import PERF_COUNTERS
from xrt.hw.targets import POLL_FIRST_INTERVAL, POLL_MAX_INTERVAL
from xrt.hw.wire import PROTOCOL_VERSION, RegisterStatus, WaitOutcome, pb

ROOT = Path(__file__).resolve().parent.parent
RTL = ROOT / "rtl"


def sv_localparams(path: Path) -> dict[str, int]:
    """``localparam int unsigned Name = N;`` lines of a package."""
    text = path.read_text()
    return {m[0]: int(m[1]) for m in re.findall(r"localparam int unsigned (\w+) = (\d+);", text)}


def camel(name: str) -> str:
    return "".join(w.capitalize() for w in name.lower().split("_"))


# ---------------------------------------------------------------------------- generated
def test_register_statuses_agree_from_the_rtl_to_the_runtime() -> None:
    wire_pkg = sv_localparams(RTL / "generated" / "npu_wire_pkg.sv")
    assert wire_pkg == {f"RegStatus{camel(s.name)}": int(s) for s in RegisterStatus}
    for status in RegisterStatus:
        assert int(status) == pb.RegisterStatus.Value(f"REGISTER_STATUS_{status.name}")
    for outcome in WaitOutcome:
        assert int(outcome) == pb.WaitOutcome.Value(f"WAIT_OUTCOME_{outcome.name}")


def test_poll_back_off_and_counters_agree() -> None:
    config = sv_localparams(RTL / "generated" / "npu_config_pkg.sv")
    assert config["RegbusPollFirstInterval"] == POLL_FIRST_INTERVAL
    assert config["RegbusPollMaxInterval"] == POLL_MAX_INTERVAL
    assert config["NumPerf"] == len(PERF_COUNTERS)
    for index, name in enumerate(PERF_COUNTERS):
        assert config[f"Perf{camel(name)}"] == index, name


def test_register_op_kinds_agree_with_the_register_bus_master() -> None:
    text = (RTL / "sim" / "npu_regbus_dpi_pkg.sv").read_text()
    kinds = {m[0]: int(m[1]) for m in re.findall(r"Op(\w+)\s*=\s*2'd(\d)", text)}
    assert kinds == {camel(k.name): int(k) for k in RegKind}


# ---------------------------------------------------------------------------- one copy
HAND_WRITTEN_SV = [
    p for p in RTL.rglob("*.sv") if "generated" not in p.parts and p.name != "npu_wire_pkg.sv"
]
PYTHON = [
    p
    for top in ("runtime", "emulator", "bench", "tools")
    for p in (ROOT / top).rglob("*.py")
    if "_generated" not in p.parts and "_proto" not in p.parts
]
# Definitions of contract values, each allowed in its one home only.
PY_DEFINITIONS = {
    r"^\s*PROTOCOL_VERSION\s*=": "runtime/xrt/hw/wire.py",
    r"^\s*(POLL_FIRST_INTERVAL|POLL_MAX_INTERVAL|_POLL_FIRST|_POLL_MAX)\b.*=": "",
    r"^\s*PERF_COUNTERS\s*[:=]": "runtime/xrt/hw/regs.py",
    r"^\s*RETRY_REASON_KEY\s*=": "runtime/xrt/hw/wire.py",
    r"^\s*ADMIN_KEY\s*=": "runtime/xrt/hw/wire.py",
    r"^\s*(MAX_CHUNK|MAX_BATCH_OPS|MAX_WAIT_MS)\s*=": "runtime/xrt/hw/wire.py",
    r"REGISTER_STATUS_\w+": "runtime/xrt/hw/wire.py",
    r"WAIT_OUTCOME_\w+": "runtime/xrt/hw/wire.py",
    r"class (DeviceState|RegisterStatus|WaitOutcome|RegStatus)\b": "runtime/xrt/hw/wire.py",
    r"\{\s*(reg|r)\.name:\s*(reg|r)\.offset": "",
}


@pytest.mark.parametrize("pattern", PY_DEFINITIONS)
def test_no_python_module_redefines_a_contract_value(pattern: str) -> None:
    home = PY_DEFINITIONS[pattern]
    found = [
        f"{p.relative_to(ROOT)}:{n}"
        for p in PYTHON
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if re.search(pattern, line) and str(p.relative_to(ROOT)) != home
    ]
    assert not found, f"{pattern!r} defined outside {home or 'xrt.hw'}: {found}"


def test_no_hand_written_sv_redefines_a_generated_value() -> None:
    patterns = (
        r"localparam\s+int\s+unsigned\s+(Perf\w+|NumPerf)\s*=",
        r"\bStatusPollTimeout\b|RegStatus\w+\s*=",
        r"Poll(First|Max)Interval\s*=\s*\d",
    )
    found = [
        f"{p.relative_to(ROOT)}:{n}: {line.strip()}"
        for p in HAND_WRITTEN_SV
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if any(re.search(pat, line) for pat in patterns)
    ]
    assert not found, f"generated values redefined by hand: {found}"


# ---------------------------------------------------------------------------- imports
def imported_modules(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text())
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.append((node.lineno, node.module))
            out += [(node.lineno, f"{node.module}.{a.name}") for a in node.names]
    return out


def _private(module: str) -> bool:
    return module.startswith("xrt.") and any(part.startswith("_") for part in module.split("."))


def test_the_runtime_never_imports_the_emulator() -> None:
    found = [
        f"{p.relative_to(ROOT)}:{n} {m}"
        for p in (ROOT / "runtime").rglob("*.py")
        for n, m in imported_modules(p)
        if m == "npuemu" or m.startswith("npuemu.")
    ]
    assert not found, f"the runtime imports the emulator: {found}"


def test_emulator_bench_and_tools_import_only_the_public_runtime() -> None:
    found = [
        f"{p.relative_to(ROOT)}:{n} {m}"
        for top in ("emulator", "bench", "tools")
        for p in (ROOT / top).rglob("*.py")
        for n, m in imported_modules(p)
        if _private(m)
    ]
    assert not found, f"private runtime modules imported from outside it: {found}"


def test_only_the_contract_package_reaches_its_generated_halves() -> None:
    found = [
        f"{p.relative_to(ROOT)}:{n} {m}"
        for top in ("runtime", "emulator", "bench", "tools", "tests")
        for p in (ROOT / top).rglob("*.py")
        if "hw" not in p.relative_to(ROOT).parts[:3]
        for n, m in imported_modules(p)
        if m.startswith(("xrt.hw._generated", "xrt.hw._proto"))
    ]
    assert not found, f"imports around xrt.hw: {found}"


def test_the_wire_version_is_the_one_both_sides_speak() -> None:
    from xrt.transport import grpc as grpc_transport

    assert grpc_transport.PROTOCOL_VERSION is PROTOCOL_VERSION
