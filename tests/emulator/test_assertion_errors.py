"""A failed RTL assertion in a served device is a device error (issue 44): the request
during which it failed fails with 11014 naming the assertion and its cycle, the device is
reset, and it goes on serving.

The client's wait for the DMA's interrupt comes by the register ring, so here it is the ring
service that names the failure (rtl/sim/npu_ring_service.h) and hands the next ring request
to the worker, which resets the device before serving it (npuemu.worker.port; a request by
the pipe gets the same message from the worker itself).

The device runs a deliberately broken RTL (the mutation check's `dma-4k-split`: DMA bursts
may run one beat past a 4 KiB boundary), built from a copy of rtl/ the server is pointed at
(NPU_EMU_RTL_DIR). Only a transfer whose bursts reach a page end is affected, so the same
device serves a transfer within one page right after.
"""

from __future__ import annotations

import re

import pytest

from npuemu.server.launch import ServerProcess
from tools.mutation import apply_mutant, load_mutants
from tools.mutation.__main__ import ROOT
from xrt import Device, ErrorCode, XrtError
from xrt.hw.regs import DMA
from xrt.npu_device import NpuDevice


@pytest.mark.sim
def test_a_failed_assertion_fails_its_request_with_11014_and_the_device_goes_on(tmp_path):
    mutant = next(m for m in load_mutants() if m.id == "dma-4k-split")
    rtl = apply_mutant(mutant, ROOT / "rtl", tmp_path / "rtl")
    srv = ServerProcess.start(target="buyi", env={"NPU_EMU_RTL_DIR": str(rtl)}, timeout_s=3600)
    try:
        dev = Device.open(srv.url)
        assert isinstance(dev, NpuDevice)
        try:
            plddr = dev.get_mem_region("plddr")
            data = bytes(range(256)) * 32  # 8 KiB from mid-page: bursts reach page ends
            with pytest.raises(XrtError) as info:
                plddr.write(plddr.base + 0x800, data)
            err = info.value
            assert err.code == ErrorCode.DEVICE_INTERNAL, err
            assert re.search(r"assertion Axi(Ar|Aw)4K failed at cycle \d+", err.message), err
            assert "crosses a 4 KiB boundary" in err.message
            # The device was reset: the unacknowledged transfer's event is gone.
            dma = dev.get_reg_region("dma")
            assert dma.read(dma.base + DMA.register("INT_STATUS").offset) == 0
            # It goes on: a transfer within one page works.
            plddr.write(plddr.base + 0x100, b"still works")
            out = bytearray(11)
            plddr.read(out, plddr.base + 0x100)
            assert out == b"still works"
        finally:
            dev.close()
    finally:
        srv.stop()
