"""Coverage figures per source file, per folder of rtl/ and in all, from merged points.

How each figure is computed (the report says the same):

- **line**: source lines. A line is instrumented when a Verilator ``line`` point (a block
  of statements: a process body, an if/else/case arm) spans it; it is covered when every
  non-waived point spanning it ran at least once (so a line holding two arms is covered
  only when both ran). ``line`` = covered lines / instrumented lines.
- **branch**: Verilator ``branch`` points (each arm of a ``?:``): hit / points.
- **toggle**: Verilator ``toggle`` points, one per bit of a signal and direction (0->1 and
  1->0 are two points): points that toggled at least once / points.

Waived points (tools/coverage/waivers.py) are taken out before counting; ``waived`` counts
them in the same unit (lines for line, points for the others). Percentages are rounded
to two decimals; a folder without points of a kind has ``null``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from tools.coverage.data import KINDS, Point
from tools.coverage.waivers import Waiver

__all__ = ["FileCoverage", "Tally", "WaiverUse", "folder_of", "folder_tallies", "tally_files"]


@dataclass
class Tally:
    """Hit, total (waived excluded) and waived counts of one kind."""

    hit: int = 0
    total: int = 0
    waived: int = 0

    @property
    def pct(self) -> float | None:
        return None if self.total == 0 else round(100.0 * self.hit / self.total, 2)

    def add(self, other: Tally) -> None:
        self.hit += other.hit
        self.total += other.total
        self.waived += other.waived

    def as_dict(self) -> dict[str, int]:
        return {"hit": self.hit, "total": self.total, "waived": self.waived}


@dataclass
class FileCoverage:
    """What one source file's points say: per kind a tally, and what is missed where."""

    file: str
    module: str = ""
    tallies: dict[str, Tally] = field(default_factory=lambda: {k: Tally() for k in KINDS})
    line_counts: dict[int, int] = field(default_factory=dict)  # instrumented line -> count
    waived_lines: set[int] = field(default_factory=set)
    missed: dict[str, list[Point]] = field(default_factory=lambda: {k: [] for k in KINDS})
    points: dict[str, list[Point]] = field(default_factory=lambda: {k: [] for k in KINDS})
    waived_points: list[Point] = field(default_factory=list)


def folder_of(file: str) -> str:
    """The summary's group of a source: its folder under rtl/ (``rtl/dma``), else
    ``other``."""
    parts = file.split("/")
    return "/".join(parts[:2]) if parts[0] == "rtl" and len(parts) > 2 else "other"


@dataclass
class WaiverUse:
    """Points each waiver (by index) took, and how many of those were hit all the same."""

    points: dict[int, int]
    hit: dict[int, int]


def tally_files(
    points: Iterable[Point], waivers: list[Waiver]
) -> tuple[dict[str, FileCoverage], WaiverUse]:
    """Per-file coverage of `points`, and what each waiver took."""
    files: dict[str, FileCoverage] = {}
    used: dict[int, int] = defaultdict(int)
    used_hit: dict[int, int] = defaultdict(int)
    for p in points:
        # Code coverage is of the RTL's own sources: not of the functional bins' checkers
        # (generated into a build folder) nor of Verilator's own files.
        if p.key.kind == "user" or not p.key.file.startswith("rtl/"):
            continue
        fc = files.get(p.key.file)
        if fc is None:
            fc = files[p.key.file] = FileCoverage(p.key.file, p.module)
        waiver = next((w for w in waivers if w.covers(p)), None)
        if waiver is not None:
            used[waiver.index] += 1
            if p.hit:  # a waiver should take only what never happens: the report says
                used_hit[waiver.index] += 1
            fc.waived_points.append(p)
            if p.key.kind == "line":
                fc.waived_lines.update(p.lines)
            else:
                fc.tallies[p.key.kind].waived += 1
            continue
        kind = p.key.kind
        if kind not in KINDS:
            continue
        fc.points[kind].append(p)
        if kind == "line":
            for n in p.lines:
                fc.line_counts[n] = min(fc.line_counts.get(n, p.count), p.count)
        else:
            t = fc.tallies[kind]
            t.total += 1
            t.hit += p.hit
            if not p.hit:
                fc.missed[kind].append(p)
    for fc in files.values():
        t = fc.tallies["line"]
        t.total = len(fc.line_counts)
        t.hit = sum(1 for c in fc.line_counts.values() if c > 0)
        fc.waived_lines -= fc.line_counts.keys()
        t.waived = len(fc.waived_lines)
        fc.missed["line"] = [p for p in fc.points["line"] if not p.hit]
    return files, WaiverUse(dict(used), dict(used_hit))


def folder_tallies(files: dict[str, FileCoverage]) -> dict[str, dict[str, Tally]]:
    """Tallies per folder (`folder_of`), sorted by folder, and ``total`` over all of rtl/."""
    out: dict[str, dict[str, Tally]] = {}
    total = {k: Tally() for k in KINDS}
    for name in sorted(files):
        fc = files[name]
        group = out.setdefault(folder_of(name), {k: Tally() for k in KINDS})
        for k in KINDS:
            group[k].add(fc.tallies[k])
            if folder_of(name) != "other":
                total[k].add(fc.tallies[k])
    out = dict(sorted(out.items()))
    out["total"] = total
    return out
