"""Every error code the golden model produces, at the right instruction and unit; malformed
programs get errors naming the instruction."""

from __future__ import annotations

import pytest

from xrt.hw.config import MemoryWindow
from xrt.hw.isa import (
    Buffer,
    EngineError,
    Finish,
    IsaError,
    Load,
    Store,
    Sync,
    Unit,
    encode_program,
)
from xrt.npu.golden import Memory, run
from xrt.npu.golden.checker import check
from xrt.npu.golden.errorgen import error_cases
from xrt.npu.golden.generator import small_config

CASES = error_cases(seed=3)
MEM = MemoryWindow("mem", 0x1000_0000, 1 << 16)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_the_model_reports_the_expected_error(case):
    res = run(
        None,
        case.memory(),
        case.bases,
        config=case.config,
        prog_addr=case.prog_addr,
        prog_insns=case.prog_insns,
    )
    assert (res.error, res.error_pc, res.error_unit) == case.expect, res.message
    assert res.message
    # The legal prefix ran completely before the error.
    # Everything before the failing instruction retired (FINISH and failures do not count),
    # or before the one that waits, when the error is found behind a wait.
    assert sum(res.insns.values()) == (case.expect[1] if case.retired is None else case.retired)


def test_every_error_code_but_aborted_is_produced():
    produced = {c.expect[0] for c in CASES}
    assert produced == set(EngineError) - {EngineError.NONE, EngineError.ABORTED}


def test_cases_hold_for_other_seeds_and_block_sizes():
    for cfg in (small_config(block=8, rows=64), None):
        for case in error_cases(seed=11, config=cfg):
            res = run(
                None,
                case.memory(),
                case.bases,
                config=case.config,
                prog_addr=case.prog_addr,
                prog_insns=case.prog_insns,
            )
            assert (res.error, res.error_pc, res.error_unit) == case.expect, case.name


def test_the_checker_flags_the_static_errors():
    for case in CASES:
        report = check(
            case.program, case.bases, case.windows, case.config, prog_addr=case.prog_addr
        )
        code = case.expect[0]
        if code.name.endswith(("SLVERR", "DECERR")):
            assert report.ok, (case.name, str(report))  # bus faults are not the program's
        elif code in (EngineError.ADDR_RANGE, EngineError.MISALIGNED, EngineError.BUFFER_RANGE):
            faults = [f for f in report.errors if f.code is not None]  # (a wait is also one)
            assert [f.code for f in faults] == [code], case.name
            assert faults[0].pc == case.expect[1]
        else:
            assert not report.ok, case.name


def test_a_truncated_program_is_refused_with_its_length():
    with pytest.raises(IsaError, match="not a multiple of 32 bytes"):
        run(Finish().encode()[:-3], Memory([MEM]))


def test_nothing_after_an_illegal_instruction_runs():
    good = Load(buffer=Buffer.INP, base=0, x_size=1, y_size=1, z_size=1)
    blob = encode_program([good]) + bytes(32) + encode_program([good, Finish()])
    res = run(blob, Memory([MEM]), [MEM.base])
    assert (res.error, res.error_pc, res.error_unit) == (EngineError.ILLEGAL_INSTRUCTION, 1, None)
    assert "instruction 1: undefined opcode 0" in res.message
    assert res.insns[Unit.LOAD] == 1


def test_a_pop_before_its_push_in_program_order_is_reported():
    prog = [Sync(unit=Unit.COMPUTE, pop_prev=True), Sync(unit=Unit.LOAD, push_next=True), Finish()]
    res = run(prog, Memory([MEM]))
    assert (res.error, res.error_pc, res.error_unit) == (EngineError.WATCHDOG, 0, Unit.COMPUTE)
    assert "only comes later" in res.message
    assert not check(prog, [], [MEM]).ok


def test_instances_with_fields_out_of_range_are_illegal():
    res = run([Load(buffer=Buffer.INP, x_size=5000, y_size=1, z_size=1), Finish()], Memory([MEM]))
    assert (res.error, res.error_pc) == (EngineError.ILLEGAL_INSTRUCTION, 0)
    assert "x_size=5000 does not fit 10 unsigned bits" in res.message


def test_the_checker_flags_a_store_into_the_program_itself():
    """The fetch unit reads ahead: what runs after a STORE into the program's own
    instructions is unspecified (docs/isa.md), so the checker reports it."""
    store = Store(base=0, x_size=1, y_size=1, z_size=1, x_stride=32, lo=-128, hi=127)
    prog = [store.replace(offset=32), Finish()]
    report = check(prog, [MEM.base], [MEM], prog_addr=MEM.base)
    assert [f.kind for f in report.errors] == ["self_write"], str(report)
    assert report.errors[0].pc == 0
    assert check(prog, [MEM.base], [MEM], prog_addr=MEM.base + 4096).ok
