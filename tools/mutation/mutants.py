"""The mutants file: loading, checking each snippet, and applying one to a copy of rtl/."""

from __future__ import annotations

import shutil
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["MUTANTS_FILE", "Mutant", "MutantFileError", "apply_mutant", "load_mutants"]

MUTANTS_FILE = Path(__file__).resolve().with_name("mutants.toml")
_KEYS = {"id", "file", "find", "replace", "description", "tests", "env"}


class MutantFileError(ValueError):
    """The mutants file is malformed, or a mutant is stale: its snippet is not found exactly
    once in its file (the message names the mutant)."""


@dataclass(frozen=True)
class Mutant:
    """One deliberate bug: replace `find` (exactly once in `file`) with `replace`."""

    id: str
    file: str  # path from the repository root, under rtl/
    find: str
    replace: str
    description: str
    tests: tuple[str, ...]  # pytest selection that must fail on the mutant
    env: dict[str, str] = field(default_factory=dict)  # more environment for that run

    @property
    def rtl_path(self) -> str:
        """`file` relative to rtl/ (where it lands in a copy of the RTL)."""
        return self.file.removeprefix("rtl/")


def load_mutants(path: Path = MUTANTS_FILE, root: Path | None = None) -> list[Mutant]:
    """Read and check the mutants file.

    Args:
        path: The TOML file (``[[mutant]]`` tables).
        root: Repository root the files are relative to (default: `path`'s repository).

    Returns:
        The mutants, in file order.

    Raises:
        MutantFileError: unknown or missing keys, a duplicate id, a file outside rtl/ or
            missing, a replacement equal to its snippet, a snippet found zero or several
            times, or a test path that does not exist.
    """
    root = root or path.resolve().parents[2]
    try:
        tables = tomllib.loads(path.read_text())["mutant"]
    except (tomllib.TOMLDecodeError, KeyError) as exc:
        raise MutantFileError(f"{path}: no readable [[mutant]] tables ({exc})") from exc
    mutants: list[Mutant] = []
    seen: set[str] = set()
    for i, t in enumerate(tables):
        name = t.get("id", f"#{i + 1}")
        unknown = set(t) - _KEYS
        missing = _KEYS - {"env"} - set(t)
        if unknown or missing:
            raise MutantFileError(
                f"mutant {name}: unknown keys {sorted(unknown)}, missing {sorted(missing)}"
            )
        if name in seen:
            raise MutantFileError(f"mutant {name}: duplicate id")
        seen.add(name)
        m = Mutant(
            id=name,
            file=t["file"],
            find=t["find"],
            replace=t["replace"],
            description=t["description"],
            tests=tuple(t["tests"]),
            env={k: str(v) for k, v in t.get("env", {}).items()},
        )
        _check(m, root)
        mutants.append(m)
    return mutants


def _check(m: Mutant, root: Path) -> None:
    src = root / m.file
    if not m.file.startswith("rtl/") or not src.is_file():
        raise MutantFileError(f"mutant {m.id}: {m.file} is not a file under rtl/")
    if m.find == m.replace:
        raise MutantFileError(f"mutant {m.id}: replace equals find (no mutation)")
    count = src.read_text().count(m.find)
    if count != 1:
        raise MutantFileError(
            f"mutant {m.id} is stale: its snippet occurs {count} times in {m.file} "
            f"(must be exactly once): {m.find.strip()[:80]!r}"
        )
    if not m.tests:
        raise MutantFileError(f"mutant {m.id}: no tests")
    for test in m.tests:
        if not (root / test.split("::")[0]).exists():
            raise MutantFileError(f"mutant {m.id}: test {test} does not exist")


def apply_mutant(m: Mutant, rtl_src: Path, dest: Path) -> Path:
    """Copy the RTL folder `rtl_src` to `dest` (replaced if there) and mutate the copy.

    Returns:
        `dest`, the mutated RTL folder (what ``NPU_EMU_RTL_DIR`` names for the run).

    Raises:
        MutantFileError: the snippet is not found exactly once in the copy.
    """
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(rtl_src, dest)
    target = dest / m.rtl_path
    text = target.read_text()
    if text.count(m.find) != 1:
        raise MutantFileError(f"mutant {m.id} is stale: snippet not found once in {target}")
    target.write_text(text.replace(m.find, m.replace, 1))
    return dest
