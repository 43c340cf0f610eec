"""The mutation check's tool (`make mutation`, tools/mutation): the mutants file is sound,
a stale mutant is an error naming it, a mutant never touches the tracked RTL, and one cheap
mutant is built and killed end to end.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from tools.mutation import MutantFileError, apply_mutant, load_mutants
from tools.mutation.__main__ import ROOT, run_mutant
from tools.mutation.report import Outcome, write_report
from tools.mutation.runner import first_assertion

MUTANT_TOML = """
[[mutant]]
id = "{id}"
file = "rtl/dma/x.sv"
find = "{find}"
replace = "a <= b + 1;"
description = "d"
tests = ["tests"]
"""


def _repo(tmp_path: Path, find: str, mid: str = "m1") -> Path:
    (tmp_path / "rtl" / "dma").mkdir(parents=True)
    (tmp_path / "rtl" / "dma" / "x.sv").write_text("a <= b;\nc <= d;\nc <= d;\n")
    (tmp_path / "tests").mkdir()
    mutants = tmp_path / "mutants.toml"
    mutants.write_text(MUTANT_TOML.format(id=mid, find=find))
    return mutants


def test_the_shipped_mutants_cover_compute_and_dma_and_each_snippet_is_unique():
    mutants = load_mutants()  # raises on a stale or malformed mutant
    assert len(mutants) >= 20
    compute = [m for m in mutants if m.file.startswith("rtl/compute/")]
    dma = [m for m in mutants if m.file.startswith("rtl/dma/")]
    assert len(compute) + len(dma) == len(mutants)
    assert len(compute) >= 10 and len(dma) >= 10
    for m in mutants:
        assert (ROOT / m.file).read_text().count(m.find) == 1, m.id


@pytest.mark.parametrize(("find", "count"), [("x <= y;", 0), ("c <= d;", 2)])
def test_a_stale_mutant_is_an_error_naming_it(tmp_path, find, count):
    mutants = _repo(tmp_path, find, mid="stale-one")
    with pytest.raises(MutantFileError, match=rf"stale-one is stale.*occurs {count} times"):
        load_mutants(mutants, tmp_path)


def test_a_duplicate_id_is_an_error(tmp_path):
    mutants = _repo(tmp_path, "a <= b;")
    mutants.write_text(mutants.read_text() * 2)
    with pytest.raises(MutantFileError, match="m1: duplicate id"):
        load_mutants(mutants, tmp_path)


def test_a_mutant_changes_only_its_copy(tmp_path):
    (m,) = load_mutants(_repo(tmp_path, "a <= b;"), tmp_path)
    rtl = tmp_path / "rtl"
    copy = apply_mutant(m, rtl, tmp_path / "copy")
    assert (rtl / "dma" / "x.sv").read_text() == "a <= b;\nc <= d;\nc <= d;\n"
    assert (copy / "dma" / "x.sv").read_text() == "a <= b + 1;\nc <= d;\nc <= d;\n"


@pytest.mark.sim
def test_a_dma_mutant_is_built_from_a_copy_and_killed(tmp_path):
    """Full strobes on every W beat: the DMA block test (one bus width) must fail, on a
    model built from the mutated copy; the tracked RTL is left as it was."""
    m = next(m for m in load_mutants() if m.id == "dma-wr-full-strobes")
    m = replace(m, tests=("tests/rtl/test_dma_block.py::test_dma_block[w8-tight]",))
    before = (ROOT / m.file).read_text()
    outcome = run_mutant(m, ROOT, tmp_path, timeout=300)
    assert outcome.killed and not outcome.timed_out
    assert outcome.killed_by is not None
    assert outcome.killed_by.startswith("tests/rtl/test_dma_block.py::test_dma_block[w8-tight] > ")
    assert (ROOT / m.file).read_text() == before
    log = (tmp_path / m.id / "run" / "pytest.log").read_text()
    assert f"{tmp_path / m.id / 'sim'}" in log  # the model was built from the copy's cache
    assert not (tmp_path / m.id / "rtl").exists()  # the copy is removed afterwards


def test_the_first_assertion_to_fail_is_named_and_reported(tmp_path):
    """A run whose simulators reported failed RTL assertions names the earliest one (by
    simulated time, across its logs), and the report has it beside the killing test."""
    logs = {
        "test_a0/sim.log": "noise\n[90000] %Error: npu_fifo.sv:84: Assertion failed in "
        "top.u_q.g_must_accept.FifoOverflow: FifoOverflow: push into a full FIFO\n",
        "test_b0/run/sim.log": "[40000] %Error: npu_axi_sva.sv:74: Assertion failed in "
        "top.u_sva_axi.AxiAr4K: AxiAr4K: dma master AR: burst crosses a 4 KiB boundary\n"
        "[50000] %Error: x.sv:1: Assertion failed in top.Later: Later: later\n",
        "test_c0/sim.log": "[10000] %Error: x.sv:3: not an assertion\n",
    }
    for rel, text in logs.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    got = first_assertion(tmp_path)
    assert got == (
        "AxiAr4K (top.u_sva_axi.AxiAr4K) at 40000 ps: dma master AR: burst crosses a 4 KiB boundary"
    )
    assert first_assertion(tmp_path / "test_c0") is None
    (m,) = load_mutants(_repo(tmp_path / "repo", "a <= b;"), tmp_path / "repo")
    outcomes = [Outcome(m, True, "tests/x.py::t > c", 3.0, assertion=got)]
    md, js = write_report(tmp_path / "out", outcomes, {})
    assert "1 caught first by an RTL assertion" in md.read_text()
    assert "AxiAr4K (top.u_sva_axi.AxiAr4K)" in md.read_text()
    assert json.loads(js.read_text())["results"][0]["assertion"] == got
