"""The import graph: no module of the project imports one that (through others) imports it back.

A circle is how a wrapper ends up importing the package that builds it (once, `ocr_app.engines` imported
`regions`, which imported `ocr_app.engines`); it works only while every import in it is deferred.
"""

from __future__ import annotations

import ast
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("ocr_app", "ui")


def module_name(path: Path) -> str:
    parts = path.relative_to(PROJECT_ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_modules() -> dict[str, Path]:
    return {module_name(path): path for package in PACKAGES for path in (PROJECT_ROOT / package).rglob("*.py")}


def imported_modules(path: Path, modules: dict[str, Path]) -> set[str]:
    """The project's modules that `path` imports, at any depth of its code (deferred imports count too)."""

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found |= {resolve(f"{node.module}.{alias.name}") for alias in node.names}
        elif isinstance(node, ast.Import):
            found |= {resolve(alias.name) for alias in node.names}
    return found - {None}


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Each circle found by a depth-first walk, as the modules along it."""
    circles, done, path = [], set(), []

    def visit(module: str) -> None:
        path.append(module)
        for imported in sorted(graph[module]):
            if imported in path:
                circles.append(path[path.index(imported) :] + [imported])
            elif imported not in done:
                visit(imported)
        path.pop()
        done.add(module)

    for module in sorted(graph):
        if module not in done:
            visit(module)
    return circles


def test_no_import_circles():
    modules = project_modules()
    graph = {name: imported_modules(path, modules) - {name} for name, path in modules.items()}
    assert import_circles(graph) == []


def test_circle_finder_finds_a_circle():
    assert import_circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]
