"""``npu-emu serve --lockstep``: every launch checked against the golden model, end to end.

On a lockstep server of each target, a correct program (LOAD, requantizing STORE) launched
by the runtime's driver runs as usual (on ZG330 its output goes to the OCM, then to plddr),
and the server's log says the launches were checked. A program that overwrites one of its
own later instructions (illegal, docs/isa.md: the engine runs what it fetched ahead, the
golden model what is in memory when it gets there) is caught: the launch fails with
XrtError 11014 naming "lockstep", the instruction index and the unit; the device stays
usable. The server refuses a register ring (every request must reach the worker's check).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from npuemu.server.launch import ServerProcess
from xrt import Device
from xrt.backend.npu._driver import EngineDriver
from xrt.errors import XrtError
from xrt.hw import isa
from xrt.hw.isa import Buffer, StoreMode
from xrt.hw.targets import NPU
from xrt.npu_device import NpuDevice

pytestmark = pytest.mark.sim

B = NPU.block
PROG, SRC, DST = 0x0, 0x1000, 0x2000  # offsets in plddr


@pytest.fixture(scope="module", params=["buyi", "zg330"])
def lockstep_server(request: pytest.FixtureRequest) -> Iterator[ServerProcess]:
    srv = ServerProcess.start(target=request.param, devices=1, extra_args=("--lockstep",))
    try:
        yield srv
    finally:
        srv.stop()


def copy_program(dst_base: int = 1) -> list[isa.Instruction]:
    """Four ACC rows in, requantized (x1/2, rounded) out as int8 rows at BASE[dst_base]."""
    return [
        isa.Load(buffer=Buffer.ACC, base=0, x_size=4, y_size=1, z_size=1, x_stride=4 * B,
                 push_next=True),
        isa.Sync(unit=isa.Unit.COMPUTE, pop_prev=True, push_next=True),
        isa.Store(mode=StoreMode.INT8, base=dst_base, x_size=4, y_size=1, z_size=1, x_stride=B,
                  sram_x_stride=1, m_or_prm=1, shift=1, lo=-128, hi=127, pop_prev=True),
        isa.Finish(),
    ]  # fmt: skip


def launch(dev: NpuDevice, prog: list[isa.Instruction] | bytes, bases: dict[int, int]) -> None:
    plddr = dev.get_mem_region("plddr")
    blob = prog if isinstance(prog, bytes) else isa.encode_program(prog)
    plddr.write(plddr.base + PROG, blob)
    EngineDriver(dev).launch(plddr.base + PROG, len(blob) // isa.INSN_BYTES, bases, timeout_s=120)


def test_lockstep_server_checks_launches_and_reports_a_divergence(
    lockstep_server: ServerProcess,
) -> None:
    url = f"{lockstep_server.url}/npu0"
    vals = np.arange(-32, 32, dtype=np.int32).reshape(4, B) * 3
    want = np.clip((vals + 1) >> 1, -128, 127).astype(np.int8)
    with Device.open(url) as dev:
        plddr = dev.get_mem_region("plddr")
        ring = dev.transport.ring  # type: ignore[attr-defined]
        # The ring's requests pass the worker's lockstep tap like the pipe's: the launches
        # below (register writes through the ring) are checked all the same.
        assert ring is not None, "a local holder of a lockstep server gets a register ring"
        plddr.write(plddr.base + SRC, vals.tobytes())
        bases = {0: plddr.base + SRC, 1: plddr.base + DST}
        launch(dev, copy_program(), bases)
        got = bytearray(want.nbytes)
        plddr.read(got, plddr.base + DST)
        assert np.array_equal(np.frombuffer(bytes(got), np.int8).reshape(4, B), want)
        if dev.target == "zg330":  # the same into the on-chip memory
            ocm = dev.get_mem_region("ocm")
            launch(dev, copy_program(), {0: plddr.base + SRC, 1: ocm.base + 0x4000})

        # Instruction 2 writes 64 bytes over instructions 3 and 4: a SYNC of the load unit
        # and FINISH. The engine fetched the old ones ahead (a STORE, FINISH); the golden
        # model executes the new ones: the load unit retires instruction 3.
        prog = [*copy_program()[:2], copy_program()[2], copy_program()[2], isa.Finish()]
        prog[2] = isa.Store(mode=StoreMode.INT32, base=2, x_size=1, y_size=1, z_size=1,
                            sram_x_stride=1, pop_prev=True)  # fmt: skip
        prog[3] = isa.Store(mode=StoreMode.INT8, base=1, x_size=1, y_size=1, z_size=1,
                            sram_x_stride=1, m_or_prm=1, lo=-128, hi=127)  # fmt: skip
        row = isa.encode_program([isa.Sync(unit=isa.Unit.LOAD), isa.Finish()])
        plddr.write(plddr.base + SRC, row)  # ACC row 0 = the two new instructions
        bases[2] = plddr.base + PROG + 3 * isa.INSN_BYTES
        with pytest.raises(XrtError) as err:
            launch(dev, prog, bases)
        assert err.value.code == 11014, err.value
        text = str(err.value)
        assert "lockstep" in text and "instruction 3" in text, text
        assert "LOAD" in text and "STORE" in text, text

        # The device is still usable, and checked again after a wipe (a reset).
        dev.reset()
        plddr.write(plddr.base + SRC, vals.tobytes())
        launch(dev, copy_program(), {0: plddr.base + SRC, 1: plddr.base + DST})
    log = lockstep_server.log
    assert "every launch is checked against the golden model" in log, log[-2000:]
