"""The manual's device behaviours on a simulated NPU (runtime -> gRPC -> server -> RTL).

- 2.5: a device's ``init`` prints ``version()``, the protocol, the device's name and its
  parameters, then ``reset(0)``;
- 2.3: ``RegRegion::read``/``write`` take and give ``uint64_t``: the NPU's 64-bit
  quantities are LO/HI register pairs, read and written LO then HI;
- 1.5: ``plddr.malloc(MemPtr(8192), 1024)``: the manual's board sees PL DDR from address 0,
  this NPU from ``plddr.base``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest

from xrt import Device, ErrorCode, MemPtr, XrtError
from xrt._version import runtime_version
from xrt.hw.regs import NPU
from xrt.hw.targets import HW_VERSION
from xrt.npu_device import NpuDevice


def raises(code: ErrorCode, match: str | None = None) -> pytest.RaisesExc:  # type: ignore[type-arg]
    return pytest.raises(XrtError, match=match, check=lambda e: e.code == code)


# -- 2.5: version() and the device's init ----------------------------------------------------


def test_version_names_target_hardware_rtl_emulator_and_runtime(buyi: NpuDevice) -> None:
    v = buyi.version()
    assert list(v) == ["target", "hardware", "rtl", "emulator", "runtime"]
    assert v["target"] == "buyi"
    assert v["hardware"] == ".".join(map(str, HW_VERSION))
    npu = buyi.get_reg_region("npu")
    fields = npu.regs.HW_VERSION.read_fields()
    assert v["rtl"] == f"{fields['MAJOR']}.{fields['MINOR']}.{fields['PATCH']}"
    assert v["emulator"].startswith("npu-emu ") and v["runtime"] == runtime_version()


def test_opening_logs_what_the_manuals_init_prints_and_resets(
    buyi_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="xrt.device")
    with Device.open(buyi_url + "/npu1?bounce=65536") as dev:
        assert isinstance(dev, NpuDevice)
        lines = [r.getMessage() for r in caplog.records if r.name == "xrt.device"]
        version = dev.version()
    i = lines.index("device opened, versions:")
    assert lines[i + 1 : i + 1 + len(version)] == [f"\t{k}: {v}" for k, v in version.items()]
    assert "protocol: grpc" in lines and "device: npu1" in lines
    assert lines[lines.index("params:") + 1] == "\tbounce: 65536"
    assert lines[-1] == "npu1: reset"

    caplog.clear()
    with Device.open(buyi_url + "/npu1?reset=0"):
        lines = [r.getMessage() for r in caplog.records if r.name == "xrt.device"]
    assert lines[-1] == "npu1: not reset (reset=0)"


def test_a_token_in_the_url_is_not_logged(buyi_url: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="xrt.device")
    with Device.open(buyi_url + "/npu1?token=s3cret-value"):
        text = "\n".join(r.getMessage() for r in caplog.records)
    assert "\ttoken: (hidden)" in text and "s3cret" not in text


def test_reset_flag_is_checked(buyi_url: str) -> None:
    with raises(ErrorCode.WRONG_TYPE, "reset=2 must be 0 or 1"):
        Device.open(buyi_url + "/npu1?reset=2")


# -- 2.3: 64-bit register values -------------------------------------------------------------


def test_64_bit_reads_and_writes_are_lo_hi_pairs(buyi: NpuDevice) -> None:
    npu, dma = buyi.get_reg_region("npu"), buyi.get_reg_region("dma")
    prog = npu.regs.PROG_ADDR_LO.address
    npu.write(prog, 0x1_2345_6780, width=64)
    assert npu.read(prog) == 0x2345_6780 and npu.read(prog + 4) == 0x1
    assert npu.read(prog, width=64) == 0x1_2345_6780
    assert npu.regs.pair("PROG_ADDR").read() == 0x1_2345_6780
    npu.regs.pair("BASE3").write(0xFFFF_FFFF_0000_0040)
    assert npu.read(NPU.register("BASE3_HI").offset, relative=True) == 0xFFFF_FFFF
    assert buyi.read_reg(npu.regs.BASE3_LO.address, width=64) == 0xFFFF_FFFF_0000_0040
    dma.write(0x40, 0x1_0000_1000, relative=True, width=64)  # DMA.SRC
    assert dma.regs.pair("SRC").read() == 0x1_0000_1000
    # The cycle counter latches HI when LO is read: LO then HI is one consistent value,
    # and it counts on.
    first = npu.regs.pair("CYCLES").read()
    assert 0 < first < npu.read(npu.regs.CYCLES_LO.address, width=64)


def test_a_value_wider_than_its_register_is_refused_naming_it(buyi: NpuDevice) -> None:
    npu = buyi.get_reg_region("npu")
    npu.regs.SCRATCH.write(7)
    with raises(ErrorCode.OUT_OF_RANGE, r"0x100000000 does not fit npu\.SCRATCH \(32 bits\)"):
        npu.write(npu.regs.SCRATCH.address, 1 << 32)
    with raises(ErrorCode.OUT_OF_RANGE, r"npu\.SCRATCH is a 32-bit register"):
        npu.write(npu.regs.SCRATCH.address, 1, width=64)
    with raises(ErrorCode.OUT_OF_RANGE, r"does not fit npu\.PROG_ADDR_LO \(64 bits\)"):
        npu.write(npu.regs.PROG_ADDR_LO.address, 1 << 64, width=64)
    with raises(ErrorCode.OUT_OF_RANGE, "does not fit register pair BASE0"):
        npu.regs.pair("BASE0").write(-1)
    with raises(ErrorCode.OUT_OF_RANGE, "width must be 32 or 64"):
        npu.read(npu.regs.SCRATCH.address, width=16)
    with raises(ErrorCode.WRONG_TYPE, r"regs\.pair\('CYCLES'\)"):
        npu.regs.CYCLES.read()
    assert npu.regs.SCRATCH.read() == 7  # nothing was written


# -- 1.5: memory at the manual's addresses ---------------------------------------------------


def test_manual_1_5_allocation_info_on_a_simulated_buyi(
    open_buyi: Callable[..., NpuDevice],
) -> None:
    """The manual's 1.5 on this NPU: its plddr starts at ``plddr.base``, not 0, so the
    manual's ``MemPtr(8192)`` is refused naming the window and the address meant."""
    dev = open_buyi()
    plddr = dev.get_mem_region("plddr")
    with raises(
        ErrorCode.OUT_OF_RANGE, rf"begins at {plddr.base:#x} .*MemPtr\({plddr.base + 8192:#x}\)"
    ):
        plddr.malloc(MemPtr(8192), 1024)
    chunk1 = plddr.malloc(1024)
    chunk2 = plddr.malloc(MemPtr(plddr.base + 8192), 1024)
    chunks = plddr.mem_manager.all_chunks()
    assert chunk1 in chunks and chunk2 in chunks
    assert plddr.mem_manager.get_chunk(MemPtr(plddr.base + 4096), 1024) is None
    assert plddr.mem_manager.get_chunk(MemPtr(8192), 1024) is None
    assert plddr.mem_manager.get_chunk(chunk2.begin, 1024) is chunk2
