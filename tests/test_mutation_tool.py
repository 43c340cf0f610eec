"""The mutation check's tool (`make mutation`, tools/mutation): the mutants file is sound,
a stale mutant is an error naming it, a mutant never touches the tracked RTL, and one cheap
mutant is built and killed end to end.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from tools.mutation import MutantFileError, apply_mutant, load_mutants
from tools.mutation.__main__ import ROOT, run_mutant

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
