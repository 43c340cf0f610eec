"""The house's structure, enforced by `make test` (CONTRIBUTING.md, "Layout"):

- no import circle among the hand-written modules of runtime/ and emulator/, counting the
  imports under ``if TYPE_CHECKING:`` (a circle hidden from the interpreter is still one for
  the reader) and the imports inside functions;
- no hand-written module over 600 lines;
- nothing outside the runtime imports its private modules (``xrt._...``, ``xrt.pkg._...``);
- docs/performance.md stays a reference (at most 400 lines), not a log.

Generated code (``_generated``, ``_proto``) is left out: its size and imports are its
generator's.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE_ROOTS = (ROOT / "runtime", ROOT / "emulator")
GENERATED = {"_generated", "_proto", "__pycache__"}
MAX_MODULE_LINES = 600
MAX_PERFORMANCE_PAGE_LINES = 400


def _module_name(root: Path, path: Path) -> str:
    name = ".".join(path.relative_to(root).with_suffix("").parts)
    return name.removesuffix(".__init__")


@cache
def hand_written_modules() -> dict[str, Path]:
    modules: dict[str, Path] = {}
    for root in PACKAGE_ROOTS:
        for path in sorted(root.rglob("*.py")):
            if GENERATED.isdisjoint(path.relative_to(root).parts) and ".egg-info" not in str(path):
                modules[_module_name(root, path)] = path
    return modules


def imported_modules(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The known modules `name` imports, anywhere in the file (TYPE_CHECKING blocks and
    function bodies included). ``from a.b import c`` names ``a.b.c`` when that is a module,
    else ``a.b``."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        candidates: list[str] = []
        if isinstance(node, ast.Import):
            candidates = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            candidates = [f"{base}.{alias.name}" for alias in node.names]
            candidates = [c if c in known else base for c in candidates]
        for candidate in candidates:
            while candidate and candidate not in known:
                candidate = candidate.rpartition(".")[0]
            if candidate and candidate != name:
                found.add(candidate)
    return found


def import_graph() -> dict[str, set[str]]:
    known = hand_written_modules()
    graph: dict[str, set[str]] = {}
    for name, path in known.items():
        # a package's __init__ re-exporting its own children is how packages are built
        imported = imported_modules(name, path, known)
        graph[name] = {t for t in imported if not t.startswith(name + ".")}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in graph:
        if start in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, targets = work[-1]
            for target in targets:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph.get(target, ())))))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def _cycle_path(graph: dict[str, set[str]], members: list[str]) -> str:
    """One concrete loop through a circle, for the failure message."""
    inside = set(members)
    path = [members[0]]
    while True:
        step = sorted(graph[path[-1]] & inside)
        nxt = next((t for t in step if t == members[0] or t not in path), step[0])
        path.append(nxt)
        if nxt in path[:-1]:
            return " -> ".join(path[path.index(nxt) :])


def test_circles_finds_a_type_checking_circle(tmp_path: Path) -> None:
    """The detector itself: a circle closed only under TYPE_CHECKING is found."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg.b import B\n")
    (pkg / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.a import A\nB = 1\n"
    )
    (pkg / "c.py").write_text("from . import a\n")
    known = {_module_name(tmp_path, p): p for p in pkg.glob("*.py")}
    graph = {n: imported_modules(n, p, known) - {"pkg"} for n, p in known.items()}
    assert circles(graph) == [["pkg.a", "pkg.b"]]
    assert graph["pkg.c"] == {"pkg.a"}


def test_no_import_circles() -> None:
    graph = import_graph()
    found = circles(graph)
    assert not found, "import circles (TYPE_CHECKING imports count):\n" + "\n".join(
        _cycle_path(graph, members) for members in found
    )


def test_no_hand_written_module_over_600_lines() -> None:
    big = {
        str(path.relative_to(ROOT)): lines
        for path in hand_written_modules().values()
        if (lines := len(path.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert not big, f"modules over {MAX_MODULE_LINES} lines: split them by idea: {big}"


def _python_files_outside_the_runtime() -> Iterator[Path]:
    for folder in ("emulator", "bench", "tools", "examples"):
        yield from (p for p in (ROOT / folder).rglob("*.py") if "__pycache__" not in p.parts)


def _is_private(dotted: str) -> bool:
    first, *rest = dotted.split(".")
    return first == "xrt" and any(p.startswith("_") and not p.startswith("__") for p in rest)


def test_nothing_outside_the_runtime_imports_its_private_modules() -> None:
    private = []
    for path in _python_files_outside_the_runtime():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names = [f"{node.module}.{alias.name}" for alias in node.names]
            where = f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}"
            private += [f"{where}: {n}" for n in names if _is_private(n)]
    assert not private, "private runtime modules imported from outside xrt:\n" + "\n".join(private)


def test_the_performance_page_is_a_reference() -> None:
    lines = len((ROOT / "docs" / "performance.md").read_text().splitlines())
    assert lines <= MAX_PERFORMANCE_PAGE_LINES, f"docs/performance.md has {lines} lines"
