"""Random legal programs: race free (the checker says so), run without error on the golden
model, deterministic per seed, and together they hit every coverage bin."""

from __future__ import annotations

import pytest

from xrt.npu.golden import run
from xrt.npu.golden.checker import check
from xrt.npu.golden.coverage import ALL_BINS, coverage
from xrt.npu.golden.generator import generate_program, small_config

SEEDS = range(12)


@pytest.fixture(scope="module")
def programs():
    return [generate_program(seed) for seed in SEEDS]


def test_generated_programs_are_legal_and_run(programs):
    for gp in programs:
        report = check(gp.program, gp.bases, gp.windows, gp.config)
        assert report.ok and not report.findings, f"seed {gp.seed}: {report}"
        res = run(gp.program, gp.memory(), gp.bases, config=gp.config)
        assert res.ok, f"seed {gp.seed}: {res}"
        assert sum(res.insns.values()) == len(gp.program) - 1
        assert not any(res.tokens_left.values())


def test_generated_programs_hit_every_bin(programs):
    hits = coverage(gp.program for gp in programs)
    assert set(hits) == set(ALL_BINS)
    assert [name for name in ALL_BINS if not hits[name]] == []


def test_the_same_seed_gives_the_same_program():
    a, b = generate_program(7, length=60), generate_program(7, length=60)
    assert a.encode() == b.encode() and a.bases == b.bases and a.init == b.init
    assert generate_program(8, length=60).encode() != a.encode()


@pytest.mark.parametrize("block", [4, 8])
def test_other_block_sizes(block):
    cfg = small_config(block=block, rows=64)
    for seed in range(3):
        gp = generate_program(seed, config=cfg, length=80, region_bytes=2048)
        assert check(gp.program, gp.bases, gp.windows, cfg).ok
        assert run(gp.program, gp.memory(), gp.bases, config=cfg).ok
