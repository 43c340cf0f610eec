"""The checker against an independent happens-before oracle (transitive closure over the
token graph, pairwise footprint overlap), on mutated random programs; token balance,
order, overflow; checker performance on long programs is in bench/bench_golden.py."""

from __future__ import annotations

import numpy as np
import pytest

from xrt.hw.config import MemoryWindow
from xrt.hw.isa import Buffer, Finish, Gemm, GemmInit, Load, Store, Sync, Unit
from xrt.npu.golden import Memory, run
from xrt.npu.golden.access import accesses
from xrt.npu.golden.checker import check
from xrt.npu.golden.generator import generate_program
from xrt.npu.golden.tokens import FLAG_QUEUE, QUEUE_ENDS, token_ops, unit_of

MEM = MemoryWindow("mem", 0x1000_0000, 1 << 16)


def oracle_races(program, bases, config) -> set[tuple[int, int]]:
    """(earlier pc, later pc) of every racing pair, by brute force."""
    insns = [i for i in program if not isinstance(i, Finish)]
    reach: list[int] = []  # bitset of instructions that complete before pc starts
    last_of_unit: dict[Unit, int] = {}
    pushes: dict = {q: [] for q in QUEUE_ENDS}
    pops_seen: dict = {q: 0 for q in QUEUE_ENDS}
    for pc, insn in enumerate(insns):
        unit = unit_of(insn)
        pops, push_q, _ = token_ops(insn)
        before = 0
        if unit in last_of_unit:
            j = last_of_unit[unit]
            before |= reach[j] | (1 << j)
        for q in pops:
            k = pops_seen[q]
            pops_seen[q] += 1
            if k < len(pushes[q]):
                j = pushes[q][k]
                before |= reach[j] | (1 << j)
        reach.append(before)
        last_of_unit[unit] = pc
        for q in push_q:
            pushes[q].append(pc)
    touch = []
    for insn in insns:
        reads, writes = set(), set()
        for a in accesses(insn, bases, config):
            (writes if a.write else reads).update((a.resource, int(r)) for r in a.rows)
        touch.append((reads, writes))
    races = set()
    for i in range(len(insns)):
        for j in range(i):
            if unit_of(insns[i]) == unit_of(insns[j]) or reach[i] >> j & 1:
                continue
            ri, wi = touch[i]
            rj, wj = touch[j]
            if wi & (rj | wj) or wj & ri:
                races.add((j, i))
    return races


def _matched_pairs(program):
    """(push pc, push flag, pop pc, pop flag) of every matched token."""
    flags = {}
    for (unit, flag), q in FLAG_QUEUE.items():
        flags[(unit, q, flag.startswith("pop"))] = flag
    pushes: dict = {q: [] for q in QUEUE_ENDS}
    out = []
    pops_seen = {q: 0 for q in QUEUE_ENDS}
    for pc, insn in enumerate(program):
        if isinstance(insn, Finish):
            break
        unit = unit_of(insn)
        pops, push_q, _ = token_ops(insn)
        for q in pops:
            j = pushes[q][pops_seen[q]]
            pops_seen[q] += 1
            out.append((j, flags[(unit_of(program[j]), q, False)], pc, flags[(unit, q, True)]))
        for q in push_q:
            pushes[q].append(pc)
    return out


@pytest.mark.parametrize("seed", range(6))
def test_removing_a_token_pair_is_caught_exactly_when_it_creates_a_race(seed):
    gp = generate_program(100 + seed, length=70)
    assert check(gp.program, gp.bases, gp.windows, gp.config).ok
    assert oracle_races(gp.program, gp.bases, gp.config) == set()
    rng = np.random.default_rng(seed)
    pairs = _matched_pairs(gp.program)
    links = [p for p in pairs if p[0] in gp.link_pushes]
    others = [p for p in pairs if p[0] not in gp.link_pushes]
    picks = [links[int(k)] for k in rng.choice(len(links), size=min(10, len(links)), replace=False)]
    picks += [
        others[int(k)] for k in rng.choice(len(others), size=min(4, len(others)), replace=False)
    ]
    caught = 0
    for push_pc, push_flag, pop_pc, pop_flag in picks:
        prog = list(gp.program)
        prog[push_pc] = prog[push_pc].replace(**{push_flag: False})
        prog[pop_pc] = prog[pop_pc].replace(**{pop_flag: False})
        report = check(prog, gp.bases, gp.windows, gp.config)
        want = oracle_races(prog, gp.bases, gp.config)
        got = {(f.other_pc, f.pc) for f in report.of_kind("race")}
        assert got <= want
        assert bool(got) == bool(want), (push_pc, pop_pc)
        # every racing later instruction is named (the checker reports against the last
        # conflicting access of each row, so some earlier partners may be subsumed)
        assert {pc for _, pc in got} == {pc for _, pc in want}
        assert not report.of_kind("token_order")
        caught += bool(got) and push_pc in gp.link_pushes
    # Tokens the generator inserted to order a racing pair are needed (a drain SYNC that
    # popped an older token may order the pair too, rarely).
    assert caught >= 0.7 * min(10, len(links))


@pytest.mark.parametrize("seed", range(4))
def test_removing_one_flag_is_always_reported(seed):
    gp = generate_program(200 + seed, length=60)
    pairs = _matched_pairs(gp.program)
    rng = np.random.default_rng(seed)
    for k in rng.choice(len(pairs), size=min(8, len(pairs)), replace=False):
        push_pc, push_flag, pop_pc, pop_flag = pairs[int(k)]
        no_push = list(gp.program)
        no_push[push_pc] = no_push[push_pc].replace(**{push_flag: False})
        report = check(no_push, gp.bases, gp.windows, gp.config)
        assert report.of_kind("token_order"), "a pop lost its push"
        no_pop = list(gp.program)
        no_pop[pop_pc] = no_pop[pop_pc].replace(**{pop_flag: False})
        report = check(no_pop, gp.bases, gp.windows, gp.config)
        assert report.of_kind("tokens_left"), "a token is never popped"


def _pipeline(tiles: int, back_pressure: bool):
    """LOAD a tile, GEMM it, STORE it; tokens L2C and C2S forward, C2L/S2C back."""
    prog = []
    for t in range(tiles):
        slot = t % 2 if back_pressure else t  # without back pressure: fresh rows per tile
        prog.append(
            Load(
                buffer=Buffer.INP,
                base=0,
                sram=slot * 4,
                x_size=4,
                y_size=1,
                z_size=1,
                x_stride=16,
                push_next=True,
                pop_next=back_pressure and t >= 2,
            )
        )
        prog.append(
            Gemm(
                init=GemmInit.ZERO,
                acc=slot * 4,
                inp=slot * 4,
                n0=4,
                n1=1,
                n2=1,
                acc_s0=1,
                inp_s0=1,
                pop_prev=True,
                push_prev=back_pressure,
                push_next=True,
                pop_next=back_pressure and t >= 2,
            )
        )
        prog.append(
            Store(
                base=0,
                offset=0x1000 + 64 * t,
                sram=slot * 4,
                x_size=4,
                y_size=1,
                z_size=1,
                x_stride=16,
                sram_x_stride=1,
                lo=-128,
                hi=127,
                pop_prev=True,
                push_prev=back_pressure,
            )
        )
    if back_pressure:
        prog += [Sync(unit=Unit.LOAD, pop_next=True)] * 2 + [
            Sync(unit=Unit.COMPUTE, pop_next=True)
        ] * 2
    return [*prog, Finish()]


def test_double_buffering_with_back_pressure_is_clean():
    report = check(_pipeline(100, True), [MEM.base], [MEM])
    assert report.ok and not report.findings, str(report)


def test_tokens_without_back_pressure_may_overflow():
    """LOAD may run 64 tiles ahead of COMPUTE (nothing makes it wait): the 65th push may
    find the queue full, although in program order it never holds more than one."""
    prog = _pipeline(100, False)
    report = check(prog, [MEM.base], [MEM])
    over = report.of_kind("token_overflow")
    assert over[0].pc == 3 * 64 and "L2C" in over[0].message  # the 65th LOAD
    assert not report.of_kind("race")
    assert run(prog, Memory([MEM]), [MEM.base]).ok  # program order never overflows
    # COMPUTE never waits for STORE either: C2S may overflow just the same.
    assert any("C2S" in f.message for f in over)


def test_reusing_rows_without_back_pressure_races():
    prog = _pipeline(4, False)
    prog[3] = prog[3].replace(sram=0)  # tile 1 overwrites tile 0's rows
    races = check(prog, [MEM.base], [MEM]).of_kind("race")
    assert [(r.pc, r.other_pc, r.resource) for r in races] == [(3, 1, "INP")]


def test_missing_finish_and_leftover_tokens():
    report = check([Sync(unit=Unit.LOAD, push_next=True)], [], [MEM])
    assert [f.kind for f in report.findings] == ["no_finish"]
    report = check([Sync(unit=Unit.LOAD, push_next=True), Finish()], [], [MEM])
    assert report.ok and [f.kind for f in report.findings] == ["tokens_left"]
    assert "1 token(s) left in L2C" in report.findings[0].message


def test_a_race_names_both_instructions_the_resource_and_the_rows():
    prog = [
        Load(buffer=Buffer.INP, base=0, sram=8, x_size=4, y_size=1, z_size=1, x_stride=16),
        Gemm(init=GemmInit.ZERO, acc=0, inp=10, n0=3, n1=1, n2=1, inp_s0=1),
        Finish(),
    ]
    report = check(prog, [MEM.base], [MEM])
    (race,) = report.of_kind("race")
    assert (race.pc, race.other_pc, race.resource, race.span) == (1, 0, "INP", (10, 11))
    assert "GEMM at pc 1 (COMPUTE) reads" in race.message and "pc 0 (LOAD)" in race.message


def test_a_memory_race_names_the_bytes():
    prog = [
        Store(base=0, x_size=2, y_size=1, z_size=1, x_stride=16, sram_x_stride=1, lo=-128, hi=127),
        Load(buffer=Buffer.INP, base=0, offset=16, x_size=1, y_size=1, z_size=1),
        Finish(),
    ]
    (race,) = check(prog, [MEM.base], [MEM]).of_kind("race")
    assert race.resource == "MEM" and race.span == (MEM.base + 16, MEM.base + 32)


def test_decode_errors_in_bytes_name_the_instruction():
    blob = Finish().encode()[:0] + Sync(unit=Unit.LOAD).encode() + bytes(32) + Finish().encode()
    report = check(blob, [], [MEM])
    assert [f.kind for f in report.findings] == ["decode"]
    assert "instruction 1: undefined opcode 0" in report.findings[0].message


def test_bytes_after_finish_are_not_checked_and_a_ragged_tail_is():
    blob = Finish().encode() + bytes(32)
    assert check(blob, [], [MEM]).ok
    report = check(Finish().encode() + bytes(5), [], [MEM])
    assert [f.kind for f in report.findings] == ["decode"]
    assert "not a multiple of 32 bytes" in report.findings[0].message
