"""The lockstep checker (`xrt.npu.golden.lockstep`) on traces made here, without a simulator.

A trace is synthesized as a faithful engine would record it (the golden model run with its
per-instruction hook: retirements in program order per unit, each STORE's bytes as W beats,
the memory's first reads). The checker accepts it; each single change an engine bug would
make (retirements swapped within a unit, a written byte changed or missing, another end
code) is reported at the right instruction; launches split across chunks wait for their
end; an engine error stops checking until a wipe.
"""

from __future__ import annotations

import numpy as np
import pytest

from xrt.hw.isa import EngineError
from xrt.npu import golden
from xrt.npu.golden.lockstep import (
    BEAT_DTYPE,
    BEAT_READ,
    BEAT_WRITE,
    EV_END,
    EV_RETIRE,
    EV_START,
    EV_WIPED,
    EVENT_DTYPE,
    LockstepChecker,
    _Retirements,
)

PROG_SLACK = 0x1000  # the program sits this far above the highest region


def synth(seed: int) -> tuple[golden.GeneratedProgram, np.ndarray, np.ndarray, np.ndarray]:
    """A generated program and the trace a correct engine leaves: (gp, events, beats, bases)."""
    gp = golden.generate_program(seed, length=60)
    prog_addr = max(r.addr + r.size for r in gp.regions.values()) + PROG_SLACK
    prog_addr -= prog_addr % 32
    mem = gp.memory()
    mem.write(prog_addr, gp.encode())
    reads = []
    for addr, data in [*gp.init, (prog_addr, gp.encode())]:
        for g in range(addr - addr % 16, addr + len(data), 16):
            reads.append((g, mem.read(g, 16)))
    hook = _Retirements(mem, prog_addr, gp.bases, gp.config.block)
    res = golden.run(None, mem, gp.bases, config=gp.config, machine=golden.Machine(gp.config),
                     prog_addr=prog_addr, prog_insns=len(gp.program), schedule=hook)  # fmt: skip
    assert res.ok, res
    beats = [(a, 0, 0, BEAT_READ, 0, d) for a, d in reads]
    events = [(EV_WIPED, 0, 0, 0, 0, 0, 0), (EV_START, 0, len(gp.program), 0, 0, prog_addr, 0)]
    for pc, unit, _, end in hook:
        if pc in hook.stores:
            eff = hook.stores[pc]
            for g, data, mask in zip(eff.addrs, eff.data, eff.mask, strict=True):
                strb = int(np.packbits(mask, bitorder="little").view("<u2")[0])
                beats.append((int(g), pc, strb, BEAT_WRITE, 0, data))
        events.append((EV_RETIRE, int(unit), pc, 0, end, 0, len(beats)))
    events.append((EV_END, 3, 0, 0, res.cycles.total, 0, len(beats)))
    ev = np.array(events, EVENT_DTYPE)
    bt = np.zeros(len(beats), BEAT_DTYPE)
    for i, (a, pc, strb, kind, resp, data) in enumerate(beats):
        bt[i] = (a, pc, strb, kind, resp, data)
    bases = np.array(gp.bases + [0] * (16 - len(gp.bases)), np.uint64)
    return gp, ev, bt, bases


def checker(gp: golden.GeneratedProgram) -> LockstepChecker:
    return LockstepChecker(gp.windows, gp.config)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_faithful_trace_agrees(seed: int) -> None:
    gp, ev, bt, bases = synth(seed)
    ck = checker(gp)
    assert ck.feed(ev, bt, bases) == []
    assert ck.checked == 1 and ck.stats["retired"] == int(np.sum(ev["kind"] == EV_RETIRE))
    assert ck.stats["store_bytes"] > 0


def test_swapped_retirements_of_one_unit_are_reported_at_the_earlier_instruction() -> None:
    gp, ev, bt, bases = synth(4)
    idx = np.flatnonzero((ev["kind"] == EV_RETIRE) & (ev["unit"] == 1))
    a, b = idx[1], idx[2]
    want_pc = int(min(ev[a]["pc"], ev[b]["pc"]))
    ev["pc"][a], ev["pc"][b] = ev["pc"][b], ev["pc"][a]
    (d,) = checker(gp).feed(ev, bt, bases)
    assert (d.pc, d.unit, d.what) == (want_pc, "COMPUTE", "COMPUTE retirement 1"), str(d)


def test_a_changed_or_missing_store_byte_is_reported_at_its_store() -> None:
    gp, ev, bt, bases = synth(5)
    writes = np.flatnonzero(bt["kind"] == BEAT_WRITE)
    k = writes[len(writes) // 2]
    lane = int(np.flatnonzero(np.unpackbits(np.array([bt["strb"][k]], "<u2").view(np.uint8),
                                            bitorder="little"))[0])  # fmt: skip
    changed = bt.copy()
    changed["data"][k][lane] ^= 1
    (d,) = checker(gp).feed(ev, changed, bases)
    assert (d.pc, d.unit, d.what) == (int(bt["pc"][k]), "STORE", "memory writes"), str(d)
    assert f"byte {int(bt['addr'][k]) + lane:#x}" in d.expected
    missing = bt.copy()
    missing["strb"][k] = 0
    (d,) = checker(gp).feed(ev, missing, bases)
    assert d.pc == int(bt["pc"][k]) and "missing" in d.actual, str(d)


def test_another_end_is_reported() -> None:
    gp, ev, bt, bases = synth(6)
    end = np.flatnonzero(ev["kind"] == EV_END)[0]
    ev["code"][end], ev["pc"][end], ev["unit"][end] = int(EngineError.WATCHDOG), 7, 2
    found = checker(gp).feed(ev, bt, bases)
    assert found and found[0].what == "end" and "WATCHDOG at instruction 7" in found[0].actual


def test_a_launch_split_across_chunks_is_checked_once_it_ends() -> None:
    gp, ev, bt, bases = synth(7)
    ck = checker(gp)
    cut = len(ev) // 2
    mark = int(ev["mark"][cut])
    assert ck.feed(ev[:cut], bt[:mark], bases) == [] and ck.checked == 0
    rest = ev[cut:].copy()
    rest["mark"] -= mark
    assert ck.feed(rest, bt[mark:], np.zeros(0, np.uint64)) == [] and ck.checked == 1


def test_after_an_engine_error_launches_wait_for_a_wipe() -> None:
    gp, ev, bt, bases = synth(8)
    ck = checker(gp)
    failed = ev.copy()
    end = np.flatnonzero(failed["kind"] == EV_END)[0]
    failed["code"][end] = int(EngineError.ABORTED)
    assert ck.feed(failed, bt, bases)  # the golden model finishes: a divergence
    again = ev[1:]  # no wipe before it: not checked
    assert ck.feed(again, bt, bases) == [] and ck.skipped == 1
    assert ck.feed(ev, bt, bases) == [] and ck.checked == 2  # the wipe: checked again
