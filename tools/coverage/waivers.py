"""Coverage waivers: points that no test can reach, each named with its reason.

The waivers live in one file, ``rtl/coverage_waivers.toml``; each ``[[waiver]]`` table has

- ``file``: a glob on the source's path from the repository root (``rtl/dma/npu_dma_core.sv``,
  ``rtl/generated/*.sv``), or a list of them;
- ``kind``: ``line``, ``branch``, ``toggle`` or ``all``;
- ``lines`` (optional): line numbers or ``"a-b"`` ranges; a line point matches when any of
  the lines it spans is listed, a toggle point when its signal's declaration line is;
- ``match`` (optional): a regular expression searched in the point's comment (a toggle
  point's is ``name[bit]:0->1``; a line point's ``if``, ``else``, ``case``, ``block``...);
- ``bits`` (optional, toggle points): bit numbers or ``"a-b"`` ranges; a toggle point
  matches when the last index of its signal (``7`` of ``mem_q[3][7]``) is listed;
- ``reason``: why the point cannot be reached, or why reaching it proves nothing (required,
  not empty).

A waived point counts neither as hit nor as missed; the summary says how many were waived
per folder. A waiver that matches no point is stale and the report lists it.
"""

from __future__ import annotations

import fnmatch
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from tools.coverage.data import KINDS, Point

__all__ = ["Waiver", "WaiverError", "load_waivers"]


class WaiverError(ValueError):
    """The waiver file is malformed (the message names the waiver)."""


@dataclass(frozen=True)
class Waiver:
    """One waiver of the file."""

    index: int  # its position in the file, from 1
    files: tuple[str, ...]  # globs
    kind: str
    lines: frozenset[int] | None
    match: re.Pattern[str] | None
    reason: str
    bits: frozenset[int] | None = None

    def covers(self, point: Point) -> bool:
        """Whether this waiver waives `point`."""
        k = point.key
        if self.kind not in ("all", k.kind):
            return False
        if not any(fnmatch.fnmatchcase(k.file, f) for f in self.files):
            return False
        if self.lines is not None and not self.lines.intersection(point.lines):
            return False
        if self.match is not None and self.match.search(k.comment) is None:
            return False
        if self.bits is not None:
            bit = _BIT.search(k.comment)
            return bit is not None and int(bit.group(1)) in self.bits
        return True

    def describe(self) -> str:
        """One line naming what the waiver covers."""
        where = ",".join(self.files)
        if self.lines is not None:
            where += f":{_ranges(sorted(self.lines))}"
        what = f" /{self.match.pattern}/" if self.match is not None else ""
        if self.bits is not None:
            what += f" bits {_ranges(sorted(self.bits))}"
        return f"{self.kind} {where}{what}"


_BIT = re.compile(r"\[(\d+)\]:[01]->[01]$")


def _ranges(lines: list[int]) -> str:
    out: list[tuple[int, int]] = []
    for n in lines:
        if out and n == out[-1][1] + 1:
            out[-1] = (out[-1][0], n)
        else:
            out.append((n, n))
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in out)


def _numbers(value: object, where: str, key: str = "lines") -> frozenset[int]:
    if isinstance(value, str | int):
        value = [value]
    if not isinstance(value, list) or not value:
        raise WaiverError(f"{where}: '{key}' must be a number, a range or a non-empty list")
    out: set[int] = set()
    for item in value:
        if isinstance(item, int):
            out.add(item)
        elif isinstance(item, str) and re.fullmatch(r"\d+-\d+", item):
            lo, hi = map(int, item.split("-"))
            out.update(range(lo, hi + 1))
        else:
            raise WaiverError(f"{where}: bad {key} {item!r} (a number or 'a-b')")
    return frozenset(out)


def load_waivers(path: Path) -> list[Waiver]:
    """The waivers of `path` (none when it does not exist).

    Raises:
        WaiverError: a waiver lacks its file or reason, or has an unknown key or kind.
    """
    if not path.is_file():
        return []
    data = tomllib.loads(path.read_text())
    out: list[Waiver] = []
    for i, entry in enumerate(data.get("waiver", []), start=1):
        where = f"{path.name} waiver {i}"
        unknown = set(entry) - {"file", "kind", "lines", "match", "bits", "reason"}
        if unknown:
            raise WaiverError(f"{where}: unknown keys {sorted(unknown)}")
        reason = str(entry.get("reason", "")).strip()
        if not entry.get("file") or not reason:
            raise WaiverError(f"{where}: 'file' and a non-empty 'reason' are required")
        kind = entry.get("kind", "all")
        if kind not in (*KINDS, "all"):
            raise WaiverError(f"{where}: kind {kind!r} is not one of {(*KINDS, 'all')}")
        match = entry.get("match")
        files = entry["file"] if isinstance(entry["file"], list) else [entry["file"]]
        out.append(
            Waiver(
                i,
                tuple(map(str, files)),
                kind,
                _numbers(entry["lines"], where) if "lines" in entry else None,
                re.compile(match) if match else None,
                reason,
                _numbers(entry["bits"], where, "bits") if "bits" in entry else None,
            )
        )
    return out
