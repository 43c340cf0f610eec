"""The coverage report (`make coverage`, tools/coverage): merging, waivers, and a summary
that says what the report and the lcov files say.

Two simulator runs' worth of Verilator coverage data are written by hand (two
specialisations of one module, a branch, toggles, functional bins), merged and reported;
the figures of summary.json must be those of report.md's table and of line.info /
toggle.info (genhtml's pages are made from those). The same check runs on the last real
``make coverage`` output when there is one. No simulator is needed.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tools.coverage.__main__ import OUT, ROOT, WAIVERS
from tools.coverage.data import merge_files
from tools.coverage.functional import bin_name
from tools.coverage.report import build_report, read_report_figures
from tools.coverage.waivers import WaiverError, load_waivers


def _point(file: str, line: int, col: int, kind: str, page: str, comment: str, count: int,
           span: str = "", hier: str = "top.u") -> str:  # fmt: skip
    pairs = [("f", file), ("l", line), ("n", col), ("t", kind), ("page", page), ("o", comment)]
    if span:
        pairs.append(("S", span))
    pairs.append(("h", hier))
    return "C '" + "".join(f"\x01{k}\x02{v}" for k, v in pairs) + f"' {count}\n"


def _write_runs(root: Path) -> list[Path]:
    """Two runs: module m in rtl/dma/m.sv built with two parameter sets, and rtl/bus/b.sv."""
    src = root / "rtl" / "dma" / "m.sv"
    src.parent.mkdir(parents=True)
    src.write_text("".join(f"// line {n}\n" for n in range(1, 31)))
    bus = root / "rtl" / "bus" / "b.sv"
    bus.parent.mkdir(parents=True)
    bus.write_text("// bus\n" * 10)
    fcov = root / "build" / "sim" / "x" / "npu_fcov.sv"
    header = "# SystemC::Coverage-3\n"
    run1 = header + "".join(
        [
            _point(str(src), 10, 3, "line", "v_line/m__W8", "block", 5, "10-12"),
            _point(str(src), 14, 5, "line", "v_line/m__W8", "if", 0, "14"),
            _point(str(src), 16, 5, "line", "v_line/m__W8", "else", 2, "16"),
            _point(str(src), 20, 9, "branch", "v_branch/m__W8", "cond_then", 1, "20"),
            _point(str(src), 20, 10, "branch", "v_branch/m__W8", "cond_else", 0, "20"),
            _point(str(src), 5, 3, "toggle", "v_toggle/m__W8", "a[0]:0->1", 1),
            _point(str(src), 5, 3, "toggle", "v_toggle/m__W8", "a[0]:1->0", 0),
            _point(str(src), 6, 3, "toggle", "v_toggle/m__W8", "rsvd[7]:0->1", 0),
            _point(str(bus), 2, 3, "line", "v_line/b", "block", 1, "2-3"),
            _point(str(fcov), 3, 3, "user", "v_user/npu_fcov_dma", "dma_end___05FOK", 4),
            _point(str(fcov), 4, 3, "user", "v_user/npu_fcov_dma", "dma_end___05FABORTED", 0),
        ]
    )
    other = "/elsewhere/checkout/rtl/dma/m.sv"  # the same source from another copy
    run2 = header + "".join(
        [
            _point(other, 14, 5, "line", "v_line/m__W16", "if", 0, "14", "top.v"),
            _point(other, 20, 10, "branch", "v_branch/m__W16", "cond_else", 3, "20"),
            _point(other, 5, 3, "toggle", "v_toggle/m__W16", "a[0]:1->0", 2),
            _point(other, 5, 3, "toggle", "v_toggle/m__W16", "a[1]:0->1", 0),
            _point(
                "/x/build/sim/y/npu_fcov.sv",
                9,
                3,
                "user",
                "v_user/npu_fcov_dma",
                "dma_end___05FABORTED",
                1,
            ),
        ]
    )
    paths = [root / "run1.dat", root / "run2.dat"]
    paths[0].write_text(run1)
    paths[1].write_text(run2)
    return paths


def _check_consistent(out: Path) -> dict:
    """summary.json == report.md's folder table == the lcov files' totals."""
    summary = json.loads((out / "summary.json").read_text())
    table = read_report_figures(out / "report.md")
    folders = {k for k in summary if k.startswith("rtl/") or k == "total"}
    assert folders == set(table), (folders, set(table))
    for folder in folders:
        for kind in ("line", "branch", "toggle"):
            pts = summary[folder]["points"][kind]
            row = table[folder][kind]
            if pts["total"] == 0:
                assert row is None and summary[folder][kind] is None
            else:
                assert row == (pts["hit"], pts["total"]), (folder, kind)
                assert summary[folder][kind] == round(100 * pts["hit"] / pts["total"], 2)
    sums = {"LF": 0, "LH": 0, "BRF": 0, "BRH": 0}
    for line in (out / "line.info").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in sums:
            sums[key] += int(value)
    total = summary["total"]["points"]
    assert (sums["LH"], sums["LF"]) == (total["line"]["hit"], total["line"]["total"])
    assert (sums["BRH"], sums["BRF"]) == (total["branch"]["hit"], total["branch"]["total"])
    brf = brh = 0
    for line in (out / "toggle.info").read_text().splitlines():
        if line.startswith("BRF:"):
            brf += int(line[4:])
        elif line.startswith("BRH:"):
            brh += int(line[4:])
    assert (brh, brf) == (total["toggle"]["hit"], total["toggle"]["total"])
    for page, kinds in (("line", ("line", "branch")), ("toggle", (None, "toggle"))):
        index = out / "html" / page / "index.html"
        if index.is_file():  # genhtml's header: lines hit, total, functions, branches
            cells = re.findall(r'headerCovTableEntry">(\d+)<', index.read_text())
            numbers = [int(c) for c in cells]
            assert len(numbers) == 6, numbers
            if kinds[0] is not None:
                assert numbers[:2] == [total["line"]["hit"], total["line"]["total"]]
            assert numbers[4:] == [total[kinds[1]]["hit"], total[kinds[1]]["total"]]
    return summary


def test_merge_waive_and_report_agree(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    runs = _write_runs(root)
    waivers = root / "waivers.toml"
    waivers.write_text(
        '[[waiver]]\nfile = "rtl/dma/*.sv"\nkind = "toggle"\nmatch = "^rsvd\\\\["\n'
        'reason = "reserved bits are tied to zero"\n\n'
        '[[waiver]]\nfile = "rtl/dma/gone.sv"\nkind = "line"\nreason = "a stale one"\n'
    )
    points = merge_files(runs, root)
    # the two specialisations (and the two copies of the source) merged into one point
    keys = {(p.key.file, p.key.line, p.key.kind, p.key.comment): p.count for p in points.values()}
    assert keys[("rtl/dma/m.sv", 14, "line", "if")] == 0
    assert keys[("rtl/dma/m.sv", 20, "branch", "cond_else")] == 3
    assert keys[("rtl/dma/m.sv", 5, "toggle", "a[0]:1->0")] == 2

    out = tmp_path / "out"
    summary = build_report(runs, out, root, waivers, {"generated": "test"})
    _check_consistent(out)
    dma = summary["rtl/dma"]["points"]
    # lines 10-12 and 16 ran, 14 did not: 4 of 5
    assert dma["line"] == {"hit": 4, "total": 5, "waived": 0}
    assert dma["branch"] == {"hit": 2, "total": 2, "waived": 0}
    # a[0] both ways, a[1] 0->1 never; rsvd[7] waived
    assert dma["toggle"] == {"hit": 2, "total": 3, "waived": 1}
    assert summary["rtl/bus"]["line"] == 100.0
    assert summary["waivers"] == {
        "count": 2,
        "points_waived": 1,
        "waived_but_hit": 0,
        "stale": [2],
    }
    assert summary["functional"]["bins"] == 2 and summary["functional"]["hit"] == 2
    report = (out / "report.md").read_text()
    assert "lines never run: 14" in report and "STALE" in report
    annotated = (out / "annotated" / "rtl" / "dma" / "m.sv").read_text().splitlines()
    margin = {ln[9:]: ln[:9].strip() for ln in annotated if ln[9:].startswith("// line")}
    assert margin["// line 14"] == "%000000" and margin["// line 10"] == "5"
    assert margin["// line 13"] == ""
    assert any("toggle `a`: 1 never 0->1 [1]" in ln for ln in annotated)


def test_bin_names() -> None:
    # Verilator writes a label's "__" as "___05F"
    assert bin_name("dma_end___05FOK") == ("dma_end", "OK")
    assert bin_name("isa___05FLOAD_buffer___05FWGT") == ("isa.LOAD_buffer", "WGT")
    assert bin_name("plain") == ("other", "plain")


def test_waiver_file_is_well_formed(tmp_path: Path) -> None:
    for w in load_waivers(WAIVERS):  # every waiver of the project has its reason
        assert w.reason and all(f.startswith("rtl/") for f in w.files)
    bad = tmp_path / "w.toml"
    bad.write_text('[[waiver]]\nfile = "rtl/x.sv"\nkind = "line"\n')
    with pytest.raises(WaiverError, match="reason"):
        load_waivers(bad)


@pytest.mark.skipif(not (OUT / "summary.json").is_file(), reason="no make coverage output")
def test_last_make_coverage_output_is_consistent() -> None:
    summary = _check_consistent(OUT)
    assert summary["meta"].get("waiver_file") == WAIVERS.relative_to(ROOT).as_posix()
