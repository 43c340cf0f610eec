"""The mutation report: ``report.md`` (a table) and ``summary.json``."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tools.mutation.mutants import Mutant

__all__ = ["Outcome", "write_report"]


@dataclass(frozen=True)
class Outcome:
    """What one mutant's run found."""

    mutant: Mutant
    killed: bool
    killed_by: str | None  # first failing test (or the timeout) when killed
    seconds: float
    timed_out: bool = False
    also_failed: tuple[str, ...] = ()  # other cocotb tests that failed in the same test
    assertion: str | None = None  # the RTL assertion that caught it first, if one did


def write_report(
    out: Path, outcomes: Sequence[Outcome], meta: dict[str, object]
) -> tuple[Path, Path]:
    """Write ``report.md`` and ``summary.json`` into `out`.

    Args:
        out: The output folder (created).
        outcomes: One per mutant run, in run order.
        meta: Run facts for both files (date, total seconds, load averages, baseline...).

    Returns:
        The paths of the report and the summary.
    """
    out.mkdir(parents=True, exist_ok=True)
    survived = [o.mutant.id for o in outcomes if not o.killed]
    by_assertion = [o.mutant.id for o in outcomes if o.killed and o.assertion]
    summary = {
        "mutants": len(outcomes),
        "killed": len(outcomes) - len(survived),
        "caught_by_assertion": len(by_assertion),
        "survived": survived,
        "results": [
            {
                "id": o.mutant.id,
                "file": o.mutant.file,
                "killed": o.killed,
                "killed_by": o.killed_by,
                "also_failed": list(o.also_failed),
                "assertion": o.assertion,
                "timed_out": o.timed_out,
                "seconds": round(o.seconds, 1),
            }
            for o in outcomes
        ],
        "meta": meta,
    }
    json_path = out / "summary.json"
    json_path.write_text(json.dumps(summary, indent=2) + "\n")

    lines = [
        "# Mutation check",
        "",
        f"{summary['killed']} of {summary['mutants']} mutants killed"
        + (f"; **survived: {', '.join(survived)}**" if survived else "") + "; "
        + f"{len(by_assertion)} caught first by an RTL assertion.",
        "",
        *(f"- {k}: {v}" for k, v in meta.items()),
        "",
        "| mutant | file | description | killed by | assertion first | also failed | time |",
        "|---|---|---|---|---|---|---|",
    ]  # fmt: skip
    for o in outcomes:
        by = o.killed_by if o.killed else "**SURVIVED**"
        lines.append(
            f"| `{o.mutant.id}` | {o.mutant.file.removeprefix('rtl/')} | "
            f"{o.mutant.description} | {_cell(by or '?')} | {_cell(o.assertion or '')} | "
            f"{', '.join(o.also_failed)} | {o.seconds:.0f} s |"
        )
    md_path = out / "report.md"
    md_path.write_text("\n".join(lines) + "\n")
    return md_path, json_path


def _cell(text: str) -> str:
    """Markdown table cell: no pipes or newlines."""
    return text.replace("|", "\\|").replace("\n", " ")
