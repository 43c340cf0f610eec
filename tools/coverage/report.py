"""The coverage report: summary.json, report.md, lcov files, annotated sources, HTML.

Everything is written from one `Coverage` (merged points, waivers, functional bins), so the
figures of the summary, the markdown and the lcov files (and genhtml's pages made from
them) are the same numbers; `read_report_figures` reads them back from report.md for the
test that checks so.

- ``summary.json``: per rtl/ folder ``{"line": %, "branch": %, "toggle": %, "points":
  {kind: {"hit", "total", "waived"}}}``, ``total``, ``functional`` ``{"bins", "hit",
  "groups"}``, ``waivers`` and ``meta``.
- ``report.md``: the folder table, the module table, what is missed where, the waivers,
  the functional bins.
- ``line.info`` (lines ``DA``, Verilator branch points ``BRDA``) and ``toggle.info`` (one
  ``BRDA`` per toggle point on its signal's declaration line; ``DA`` of that line is hit
  when all its points are): lcov tracefiles, rendered by ``genhtml`` into ``html/line`` and
  ``html/toggle`` where lcov is installed (Debian's ``lcov``).
- ``annotated/rtl/...``: each source with its counts in the margin (``%000000`` where a
  point never ran, ``~`` where it is waived) and the missed branches and toggles under the
  line.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from tools.coverage.data import KINDS, Point, merge_files, write_dat
from tools.coverage.functional import FunctionalBins
from tools.coverage.summary import (
    FileCoverage,
    Tally,
    WaiverUse,
    folder_of,
    folder_tallies,
    tally_files,
)
from tools.coverage.waivers import Waiver, load_waivers

__all__ = ["GOALS", "Coverage", "build_report", "read_report_figures", "write_all"]

# genhtml knows lines and branches: the toggle page shows toggle points as branches.
TOGGLE_TITLE = "RTL toggles (the branch column counts toggle points)"
# The goal of issue 29: (folder, kind, minimum %).
GOALS = (("rtl/compute", "line", 95.0), ("rtl/compute", "toggle", 90.0),
         ("rtl/dma", "line", 95.0), ("rtl/dma", "toggle", 90.0))  # fmt: skip


@dataclass
class Coverage:
    """Everything a report is made of."""

    root: Path  # the repository root (sources are read from it)
    files: dict[str, FileCoverage]
    waivers: list[Waiver]
    waiver_use: WaiverUse
    functional: FunctionalBins
    meta: dict[str, object] = field(default_factory=dict)

    def folders(self) -> dict[str, dict[str, Tally]]:
        return folder_tallies(self.files)


def _fig(t: Tally) -> str:
    return "n/a" if t.pct is None else f"{t.pct:.2f}% ({t.hit}/{t.total})"


def summary_dict(cov: Coverage) -> dict[str, object]:
    """The content of summary.json."""
    out: dict[str, object] = {}
    for folder, tallies in cov.folders().items():
        out[folder] = {
            **{k: tallies[k].pct for k in KINDS},
            "points": {k: tallies[k].as_dict() for k in KINDS},
        }
    out["functional"] = cov.functional.summary()
    use = cov.waiver_use
    out["waivers"] = {
        "count": len(cov.waivers),
        "points_waived": sum(use.points.values()),
        "waived_but_hit": sum(use.hit.values()),
        "stale": [w.index for w in cov.waivers if not use.points.get(w.index)],
    }
    out["goals"] = [
        {"folder": f, "kind": k, "min": m, "met": (out.get(f, {}).get(k) or 0.0) >= m}
        for f, k, m in GOALS
    ]
    out["meta"] = cov.meta
    return out


def _line_ranges(lines: list[int]) -> str:
    spans: list[list[int]] = []
    for n in sorted(set(lines)):
        if spans and n == spans[-1][1] + 1:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)


def _toggle_misses(points: list[Point]) -> list[str]:
    """Missed toggle points grouped by signal: ``name: 3 of 64 bits never 0->1; ...``."""
    by: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for p in points:
        bit, _, direction = p.key.comment.rpartition(":")
        by[p.signal][direction].append(bit[len(p.signal) :] or "")
    out = []
    for sig, dirs in sorted(by.items()):
        parts = []
        for direction, bits in sorted(dirs.items()):
            shown = " ".join(bits[:8]) + (" ..." if len(bits) > 8 else "")
            parts.append(f"{len(bits)} never {direction} {shown}".rstrip())
        out.append(f"`{sig}`: " + "; ".join(parts))
    return out


def markdown(cov: Coverage) -> str:
    """report.md."""
    folders = cov.folders()
    meta = cov.meta
    out = [
        "# RTL coverage",
        "",
        f"Generated {meta.get('generated', '?')} by `make coverage` from {meta.get('runs', '?')} "
        f"simulator runs ({meta.get('runs_cut_short', 0)} of them cut short: a worker killed "
        f"while writing; {meta.get('tests', 'tests: ?')}; {meta.get('seconds', '?')} s, "
        f"load average {meta.get('loadavg_before', '?')} before, "
        f"{meta.get('loadavg_after', '?')} after).",
        "",
        "How each figure is computed: **line** = source lines whose Verilator line points "
        "(blocks: process bodies, if/else/case arms) all ran at least once / lines spanned "
        "by such points; **branch** = arms of `?:` taken / arms; **toggle** = (bit, "
        "direction) pairs of every signal up to 256 bits wide seen toggling / pairs. Points "
        "of all instances and of every parameter set built are merged per source location. "
        "Waived points count neither way (`rtl/coverage_waivers.toml`).",
        "",
        "## Per folder",
        "",
        "| folder | line | branch | toggle | waived (lines/branches/toggles) |",
        "|---|---|---|---|---|",
    ]
    for folder, t in folders.items():
        waived = "/".join(str(t[k].waived) for k in KINDS)
        out.append(
            f"| {folder} | {_fig(t['line'])} | {_fig(t['branch'])} | {_fig(t['toggle'])} "
            f"| {waived} |"
        )
    out += ["", "Goals (issue 29):", ""]
    for f, k, m in GOALS:
        pct = folders.get(f, {}).get(k, Tally()).pct
        verdict = "met" if pct is not None and pct >= m else "NOT met"
        out.append(f"- {f} {k} >= {m:.0f}%: {verdict} ({'n/a' if pct is None else pct})")
    out += [
        "",
        "## Per module",
        "",
        "| file | module | line | branch | toggle |",
        "|---|---|---|---|---|",
    ]
    for name in sorted(cov.files):
        fc = cov.files[name]
        t = fc.tallies
        out.append(
            f"| {name} | {fc.module} | {_fig(t['line'])} | {_fig(t['branch'])} "
            f"| {_fig(t['toggle'])} |"
        )
    out += ["", "## Missed points", ""]
    for name in sorted(cov.files):
        fc = cov.files[name]
        lines = [n for n, c in fc.line_counts.items() if c == 0]
        if not (lines or fc.missed["branch"] or fc.missed["toggle"]):
            continue
        out.append(f"### {name}")
        out.append("")
        if lines:
            out.append(f"- lines never run: {_line_ranges(lines)}")
        for p in fc.missed["branch"]:
            out.append(
                f"- branch never taken: line {p.key.line} col {p.key.column} {p.key.comment}"
            )
        for text in _toggle_misses(fc.missed["toggle"]):
            out.append(f"- toggle: {text}")
        out.append("")
    out += ["## Waivers", ""]
    if not cov.waivers:
        out.append("None.")
    for w in cov.waivers:
        used = cov.waiver_use.points.get(w.index, 0)
        hit = cov.waiver_use.hit.get(w.index, 0)
        state = f"{used} points, {hit} of them hit" if used else "STALE: matches nothing"
        out.append(f"{w.index}. `{w.describe()}` ({state}): {w.reason}")
    out += ["", *cov.functional.markdown(), ""]
    return "\n".join(out)


_ROW = re.compile(r"^\| (rtl/[\w/]+|other|total) \| (.+?) \| (.+?) \| (.+?) \| [\d/]+ \|$")
_CELL = re.compile(r"^(?:n/a|([\d.]+)% \((\d+)/(\d+)\))$")


def read_report_figures(report: Path) -> dict[str, dict[str, tuple[int, int] | None]]:
    """The per-folder table of a report.md: folder -> kind -> (hit, total) or None."""
    out: dict[str, dict[str, tuple[int, int] | None]] = {}
    for line in report.read_text().splitlines():
        m = _ROW.match(line)
        if not m:
            continue
        row: dict[str, tuple[int, int] | None] = {}
        for kind, cell in zip(KINDS, m.groups()[1:], strict=True):
            c = _CELL.match(cell)
            if c is None:
                raise ValueError(f"unreadable cell {cell!r} in {line!r}")
            row[kind] = None if c.group(1) is None else (int(c.group(2)), int(c.group(3)))
        out[m.group(1)] = row
    return out


def lcov_files(cov: Coverage) -> tuple[str, str]:
    """(line.info, toggle.info) text."""
    line_info, toggle_info = [], []
    for name in sorted(cov.files):
        fc = cov.files[name]
        if folder_of(name) == "other":
            continue
        src = cov.root / name
        rec = ["TN:rtl_line", f"SF:{src}"]
        for p_i, p in enumerate(sorted(fc.points["branch"], key=lambda q: q.key)):
            rec.append(f"BRDA:{p.key.line},0,{p_i},{p.count if p.count else '-'}")
        b = fc.tallies["branch"]
        rec += [f"BRF:{b.total}", f"BRH:{b.hit}"]
        for n in sorted(fc.line_counts):
            rec.append(f"DA:{n},{fc.line_counts[n]}")
        t = fc.tallies["line"]
        rec += [f"LF:{t.total}", f"LH:{t.hit}", "end_of_record"]
        line_info += rec
        decl: dict[int, int] = {}
        rec = ["TN:rtl_toggle", f"SF:{src}"]
        for p_i, p in enumerate(sorted(fc.points["toggle"], key=lambda q: q.key)):
            rec.append(f"BRDA:{p.key.line},0,{p_i},{p.count if p.count else '-'}")
            decl[p.key.line] = min(decl.get(p.key.line, p.count), p.count)
        t = fc.tallies["toggle"]
        rec += [f"BRF:{t.total}", f"BRH:{t.hit}"]
        rec += [f"DA:{n},{c}" for n, c in sorted(decl.items())]
        rec += [f"LF:{len(decl)}", f"LH:{sum(1 for c in decl.values() if c)}", "end_of_record"]
        toggle_info += rec
    return "\n".join(line_info) + "\n", "\n".join(toggle_info) + "\n"


def annotate(fc: FileCoverage, source: Path) -> str:
    """One source with its counts in a margin of 9 characters."""
    notes: dict[int, list[str]] = defaultdict(list)
    for p in fc.missed["branch"]:
        notes[p.key.line].append(f"branch {p.key.comment} (col {p.key.column}) never taken")
    by_line: dict[int, list[Point]] = defaultdict(list)
    for p in fc.missed["toggle"]:
        by_line[p.key.line].append(p)
    for n, pts in by_line.items():
        notes[n] += [f"toggle {t}" for t in _toggle_misses(pts)]
    waived = {n for p in fc.waived_points for n in p.lines}
    out = []
    for n, text in enumerate(source.read_text(errors="replace").splitlines(), start=1):
        if n in fc.line_counts:
            c = fc.line_counts[n]
            margin = f"{c:>8} " if c else "%000000  "
        elif n in waived:
            margin = "~waived  "
        else:
            margin = " " * 9
        out.append(f"{margin}{text}")
        out += [f"%{'':>8}^ {note}" for note in notes.get(n, [])]
    return "\n".join(out) + "\n"


def genhtml(info: Path, out: Path, title: str, root: Path) -> str | None:
    """Render an lcov file with genhtml; None when genhtml is missing, else its log's
    last line (or why it failed)."""
    exe = shutil.which("genhtml")
    if exe is None:
        return None
    shutil.rmtree(out, ignore_errors=True)
    cmd = [exe, "--quiet", "--branch-coverage", "--prefix", str(root), "--title", title,
           "--output-directory", str(out), str(info)]  # fmt: skip
    res = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if res.returncode != 0:
        return f"genhtml failed: {(res.stderr or res.stdout).strip()[-300:]}"
    return f"{out}/index.html"


def write_all(cov: Coverage, out: Path) -> dict[str, object]:
    """Write every product into `out`; return the summary."""
    out.mkdir(parents=True, exist_ok=True)
    line_info, toggle_info = lcov_files(cov)
    (out / "line.info").write_text(line_info)
    (out / "toggle.info").write_text(toggle_info)
    ann = out / "annotated"
    shutil.rmtree(ann, ignore_errors=True)
    for name, fc in cov.files.items():
        src = cov.root / name
        if src.is_file():
            target = ann / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(annotate(fc, src))
    html = [
        genhtml(out / "line.info", out / "html" / "line", "RTL lines and branches", cov.root),
        genhtml(out / "toggle.info", out / "html" / "toggle", TOGGLE_TITLE, cov.root),
    ]
    cov.meta["html"] = html if any(html) else "genhtml not installed (apt-get install lcov)"
    summary = summary_dict(cov)
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    (out / "report.md").write_text(markdown(cov))
    return summary


def build_report(
    dat_files: list[Path], out: Path, root: Path, waivers_file: Path, meta: dict[str, object]
) -> dict[str, object]:
    """Merge `dat_files` into ``out/merged.dat``, apply the waivers of `waivers_file` and
    write every product into `out`; return the summary."""
    out.mkdir(parents=True, exist_ok=True)
    truncated: list[Path] = []
    points = merge_files(dat_files, root, truncated)
    write_dat(points.values(), out / "merged.dat", root)
    waivers = load_waivers(waivers_file)
    files, used = tally_files(points.values(), waivers)
    try:
        waiver_name = waivers_file.relative_to(root).as_posix()
    except ValueError:
        waiver_name = str(waivers_file)
    meta = {
        **meta,
        "runs": len(dat_files),
        "runs_cut_short": len(truncated),
        "waiver_file": waiver_name,
    }
    cov = Coverage(root, files, waivers, used, FunctionalBins.from_points(points.values()), meta)
    return write_all(cov, out)
