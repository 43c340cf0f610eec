"""The debugger in a real simulation, on both targets (docs/debugging.md, "Debugger"): each
breakpoint kind stops a running network where it says, steps advance the cycle or the
instruction index as asked, looks at a stopped device do not advance its time, and a
continue finishes the network bit-exact with the host.

The device is the embedded ``sim://`` one; the stop unit is compared inside the
simulator's main loop (rtl/sim/npu_debug.h), so a network started by the runtime in another
thread is stopped as a driver would meet it: its register batch or interrupt wait pending.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from xrt import Device, ErrorCode, Session, XrtError
from xrt.backend import HostBackend
from xrt.hw.debug import BreakKind, StopReason
from xrt.hw.targets import target as target_config
from xrt.npu_device import NpuDevice

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "network"))

from network_run import Run, quantized_small_cnn

pytestmark = pytest.mark.sim

TARGETS = ["buyi", "zg330"]
STOP_S = 120.0  # wall seconds a stop may take to come (a loaded machine)


@pytest.fixture(scope="module", params=TARGETS)
def dev(request: pytest.FixtureRequest) -> Iterator[NpuDevice]:
    d = Device.open(f"sim://{request.param}")
    assert isinstance(d, NpuDevice)
    yield d
    d.close()


@pytest.fixture(scope="module")
def network() -> tuple:
    return quantized_small_cnn()


@pytest.fixture
def session(dev: NpuDevice, network: tuple) -> Iterator[Session]:
    from xrt.backend import BuyiBackend, ZG330Backend

    backend = BuyiBackend if dev.target == "buyi" else ZG330Backend
    with Session.create([backend, HostBackend], network[0], [dev, None]).apply() as sess:
        yield sess
    dev.debugger.clear()


def _kind_args(kind: str, dev: NpuDevice) -> dict[str, Any]:
    return {
        "cycle": {"cycle": dev.debugger.engine_state().cycle + 3000},
        "register": {"register": "CORE_CTRL", "access": "write"},
        "irq": {"irq": True},
        "insn": {"insn": 2},
        "dma": {"dma": 1},
    }[kind]


@pytest.mark.parametrize("kind", ["cycle", "register", "irq", "insn", "dma"])
def test_each_breakpoint_kind_stops_a_running_network_then_continue_is_bit_exact(
    dev: NpuDevice, session: Session, network: tuple, kind: str
) -> None:
    dbg = dev.debugger
    args = _kind_args(kind, dev)
    point = dbg.break_at(**args)
    run = Run(session, network[1])
    state = dbg.wait_stopped(STOP_S)
    assert state.stopped and state.reason == StopReason.BREAKPOINT and state.hit == point.id
    assert run.thread.is_alive()  # the runtime's request waits on the stopped device
    if kind == "cycle":
        assert state.cycle == args["cycle"]
    elif kind == "register":
        # Stopped before the engine's start took effect: nothing in decode yet.
        assert not state.decoding and not state.busy
    elif kind == "irq":
        assert state.irq
    elif kind == "insn":
        assert state.decoding and state.pc == 2
        assert state.insn != bytes(32)
    else:
        assert state.dma_state == 1  # the transfer's checks begin
    assert [b.hits for b in dbg.breakpoints()] == [1]
    dbg.delete(point.id)
    assert dbg.breakpoints() == []
    dbg.continue_()
    run.finish(network[2], STOP_S)
    assert not dbg.stopped


def test_step_advances_the_cycle_and_the_instruction_index_as_asked(
    dev: NpuDevice, session: Session, network: tuple
) -> None:
    dbg = dev.debugger
    dbg.break_at(register="npu.CORE_CTRL", access="write")
    run = Run(session, network[1])
    stop = dbg.wait_stopped(STOP_S)
    dbg.delete()
    state = dbg.step(cycles=1)
    assert state.reason == StopReason.STEP and state.cycle == stop.cycle + 1
    state = dbg.step(instructions=1)
    assert state.reason == StopReason.STEP and state.decoding and state.pc == 0
    for pc in (1, 2, 3):
        assert dbg.step(instructions=1).pc == pc
    assert dbg.step(instructions=2).pc == 5
    before = dbg.engine_state().cycle
    assert dbg.step(cycles=100).cycle == before + 100
    dbg.continue_()
    run.finish(network[2], STOP_S)


def test_looks_at_a_stopped_device_do_not_advance_its_time(
    dev: NpuDevice, session: Session, network: tuple
) -> None:
    dbg = dev.debugger
    dbg.break_at(insn=1)
    run = Run(session, network[1])
    stop = dbg.wait_stopped(STOP_S)
    udma = dev.transport.info.memory("udma")
    for _ in range(3):
        dbg.engine_state()
        dbg.breakpoints()
        dbg.read_memory(udma.base, 256)
    state = dbg.engine_state()
    assert state.stopped and (state.cycle, state.pc) == (stop.cycle, 1)
    dbg.delete()
    dbg.continue_()
    run.finish(network[2], STOP_S)


def test_a_breakpoint_hits_on_every_launch_until_deleted(
    dev: NpuDevice, session: Session, network: tuple
) -> None:
    dbg = dev.debugger
    point = dbg.break_at(insn=0)
    stops = []
    for _ in range(2):  # two forwards, each continued through every stop it makes
        after = dbg.stops
        run = Run(session, network[1])
        count = 0
        while run.thread.is_alive():
            if dbg.wait_stop_after(after, 0.5):
                assert dbg.engine_state().hit == point.id
                count += 1
                after = dbg.stops
                dbg.continue_()
        run.finish(network[2], STOP_S)
        stops.append(count)
    assert min(stops) >= 1
    assert next(b.hits for b in dbg.breakpoints() if b.id == point.id) == sum(stops)
    dbg.delete(point.id)
    after = dbg.stops
    Run(session, network[1]).finish(network[2], STOP_S)
    assert dbg.stops == after  # deleted: no stop


def test_dma_addr_stops_on_a_transfer_from_or_to_the_address(dev: NpuDevice) -> None:
    dbg = dev.debugger
    plddr = dev.get_mem_region("plddr")
    chunk = plddr.malloc(4096)
    data = bytes(range(256)) * 16
    addr = int(chunk.begin.addr)
    point = dbg.break_at(dma_addr=addr)
    writer = threading.Thread(target=chunk.write, args=(data,), daemon=True)
    writer.start()
    state = dbg.wait_stopped(STOP_S)
    assert state.hit == point.id and addr in (state.dma_src, state.dma_dst)
    dbg.clear()
    writer.join(STOP_S)
    assert chunk.tobytes() == data
    chunk.free()


@pytest.mark.parametrize(
    "call, words",
    [
        (lambda d: d.break_at(register="NO_SUCH_REG"), "NO_SUCH_REG"),
        (lambda d: d.break_at(register="CORE_CTRL", access="poke"), "poke"),
        (lambda d: d.break_at(cycle=5, insn=1), "exactly one"),
        (lambda d: d.break_at(insn=-1), "-1"),
        (lambda d: d.step(cycles=0), "a step of 0"),
        (lambda d: d.step(), "exactly one"),
        (lambda d: d.delete(4242), "4242"),
        (lambda d: d.read_memory(0, 16), "outside host-visible memory"),
        (lambda d: d.waves_on(), "without --waves"),
        (lambda d: d.waves(), "without --waves"),
    ],
)
def test_bad_debugger_requests_are_refused_naming_the_value(
    dev: NpuDevice, call: Any, words: str
) -> None:
    with pytest.raises(XrtError) as err:
        call(dev.debugger)
    assert err.value.code == ErrorCode.OUT_OF_RANGE and words in err.value.message
    assert not dev.debugger.stopped


def test_breakpoint_kinds_and_register_addresses_are_the_register_maps() -> None:
    from xrt.hw.regs import NPU
    from xrt.npu_device.debugger import register_address

    cfg = target_config("zg330")
    assert register_address("CORE_CTRL", cfg) == cfg.npu_base + NPU.offset("CORE_CTRL")
    assert register_address("dma.SRC_LO", cfg) != register_address("npu.CORE_CTRL", cfg)
    assert [k.value for k in BreakKind] == [1, 2, 3, 4, 5, 6]  # rtl/sim/npu_debug.h's Kind
