"""The fault spelling (`xrt.npu_device.faults.parse_fault`): ``KIND[:ARG...][@TRIGGER]``,
one grammar for `NpuDevice.inject_fault`, ``xrt run --fault`` and ``npu-emu attach
--fault``. No simulator: what each text means, and that bad text is refused naming what is
wrong in it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from xrt import ErrorCode, XrtError
from xrt.npu_device.faults import FAULT_KINDS, parse_fault


@pytest.mark.parametrize(
    "text, want",
    [
        ("dma-error", dict(family="mem", mode="error", unit="dma", resp="slverr", nth=1)),
        ("bus-error:decerr@3", dict(family="mem", unit="engine", resp="decerr", nth=3)),
        ("bus-error:plddr@2+", dict(memory="plddr", nth=2, every=True)),
        ("bus-error:0x100000000+4096", dict(base=0x1_0000_0000, size=4096)),
        ("dma-error@cycle=500", dict(arm_cycles=500, nth=1, every=False)),
        ("drop-irq", dict(family="irq", mode="drop", source="engine")),
        ("delay-irq:250", dict(mode="delay", cycles=250, source="engine")),
        ("spurious-irq", dict(mode="spurious", cycles=16, source="any")),
        ("stuck-busy", dict(mode="stall", unit="dma")),
        ("stuck-busy:engine", dict(mode="stall", unit="engine")),
        ("bitflip", dict(mode="flip", unit="dma", memory="udma", writes=False, bit=7)),
        ("bitflip:plddr:0x100000010:7", dict(base=0x1_0000_0010, size=1, bit=7)),
        ("reg-value:CORE_STATUS:0x2", dict(family="reg", register="CORE_STATUS", value=2)),
    ],
)
def test_each_kind_parses_to_what_it_says(text: str, want: dict) -> None:
    fault = parse_fault(text)
    assert fault.spec == text
    assert {k: getattr(fault, k) for k in want} == want


@pytest.mark.parametrize(
    "text, named",
    [
        ("dma-eror", "unknown kind 'dma-eror'"),
        ("drop-irq@0", "events count from 1"),
        ("drop-irq@soon", "trigger 'soon'"),
        ("delay-irq", "delay-irq takes the delay"),
        ("delay-irq:ten", "the cycles 'ten' is not a number"),
        ("bitflip:plddr:0x10:9", "the bit 9 is out of range"),
        ("bitflip:plddr", "bitflip takes no argument or MEMORY:ADDR:BIT"),
        ("reg-value:CORE_STATUS", "reg-value takes a register and a value"),
        ("reg-value:CORE_STATUS:0x100000000", "out of range"),
        ("bus-error:0x1000+0", "a range of 0 bytes"),
    ],
)
def test_bad_text_is_11003_naming_what_is_wrong(text: str, named: str) -> None:
    with pytest.raises(XrtError) as err:
        parse_fault(text)
    assert err.value.code == ErrorCode.OUT_OF_RANGE
    assert named in err.value.message and repr(text) in err.value.message


def test_every_kind_is_documented_with_its_outcome() -> None:
    from pathlib import Path

    doc = (Path(__file__).parents[2] / "docs" / "debugging.md").read_text()
    section = doc.split("## Faults on cue", 1)[1].split("\n## ", 1)[0]
    for kind in FAULT_KINDS:
        assert f"| `{kind}` |" in section, kind


def test_xrt_run_refuses_a_bad_fault_before_any_work() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "xrt", "run", "missing.onnx", "--fault", "drop-irq@x"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert "fault 'drop-irq@x': trigger 'x'" in proc.stderr
    assert "missing.onnx" not in proc.stderr  # refused before the model is looked at
