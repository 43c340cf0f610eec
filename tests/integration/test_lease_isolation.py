"""Nothing a lease leaves in the compute engine reaches the next holder of the device.

Holder A runs `secret_program` (random rows at both ends of every engine buffer) and closes
the device; holder B, on the same device, runs `reader_program`, which reads those rows
out without loading them (tests/rtl/isolation_programs.py). B's outputs must equal those of
the golden model on a fresh engine (all buffers zero); the golden model on the engine as A
left it gives other outputs for every probe, so each would see a leak.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from npuemu.server.launch import ServerProcess
from xrt import Device
from xrt.backend.npu._driver import EngineDriver
from xrt.hw import isa
from xrt.hw.targets import NPU
from xrt.npu import golden
from xrt.npu_device import NpuDevice

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "rtl"))
from isolation_programs import reader_program, secret_program

pytestmark = pytest.mark.sim

PROG, DATA, OUT = 0x0, 0x10_0000, 0x20_0000  # offsets in plddr


def run_on_device(dev: NpuDevice, prog: list[isa.Instruction], data: bytes, out: int) -> bytes:
    """Place the program and its data in plddr, launch it as a driver does, read `out`
    bytes of its output."""
    plddr = dev.get_mem_region("plddr")
    plddr.write(plddr.base + PROG, isa.encode_program(prog))
    plddr.write(plddr.base + DATA, data)
    EngineDriver(dev).launch(
        plddr.base + PROG, len(prog), {0: plddr.base + DATA, 1: plddr.base + OUT},
        what="lease isolation probe", timeout_s=120,
    )  # fmt: skip
    got = bytearray(out)
    if out:
        plddr.read(got, plddr.base + OUT)
    return bytes(got)


def run_on_golden(
    target: str, prog: list[isa.Instruction], data: bytes, out: int, machine: golden.Machine
) -> bytes:
    """The same on the golden model, starting from (and updating) `machine`."""
    memory = golden.Memory.for_target(target, sizes={"plddr": 4 * DATA})
    plddr = next(w.base for w in memory.windows if w.name == "plddr")
    memory.write(plddr + DATA, data)
    res = golden.run(prog, memory, {0: plddr + DATA, 1: plddr + OUT}, machine=machine)
    assert res.ok, str(res)
    return memory.read(plddr + OUT, out).tobytes()


@pytest.mark.parametrize("target", ["buyi", "zg330"])
def test_engine_buffers_never_reach_the_next_holder(
    target: str, request: pytest.FixtureRequest
) -> None:
    server: ServerProcess = request.getfixturevalue(f"{target}_server")
    url = f"{server.url}/npu0"
    secret, secret_data = secret_program(NPU)
    reader, reader_data, probes = reader_program(NPU)
    out = probes[-1].offset + probes[-1].nbytes

    with Device.open(url) as a:
        run_on_device(a, secret, secret_data, 0)
    with Device.open(url) as b:
        got = run_on_device(b, reader, reader_data, out)

    fresh = run_on_golden(target, reader, reader_data, out, golden.Machine(NPU))
    left_by_a = golden.Machine(NPU)
    run_on_golden(target, secret, secret_data, 0, left_by_a)
    leaky = run_on_golden(target, reader, reader_data, out, left_by_a)
    leaks = []
    for p in probes:
        span = slice(p.offset, p.offset + p.nbytes)
        assert leaky[span] != fresh[span], f"{p.what}: this probe could not see a leak"
        if got[span] != fresh[span]:
            leaks.append(p.what + (" (its data, exactly)" if got[span] == leaky[span] else ""))
    assert not leaks, f"{target}: the previous holder's data reached the next one: {leaks}"
