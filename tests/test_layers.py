"""The package layers, read from the source: who may import whom.

Every ``import`` in every module of ``supplyline`` is parsed (the lazy ones inside functions too:
they are dependencies all the same), and each is reduced to the top-level package or module it
reaches (``supplyline.collect.sampler`` -> ``collect``). On that graph:

- no cycle: a package never reaches back to one that reaches it;
- ``collect`` measures; it imports neither ``analyze`` nor ``render``;
- ``analyze`` decides from what it is handed; it imports neither ``fixes`` nor a tool room
  (``tune``, ``preprocess``, ``storage``);
- the doctor imports no tool room either, and the rooms do not import each other: what they share
  (``target``, ``locate``, ``console``, ``units``) sits below them;
- ``import supplyline`` loads no torch (the monitor runs where torch is absent or slow to load).
"""

from __future__ import annotations

import ast
import itertools
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

import supplyline

SRC = Path(supplyline.__file__).resolve().parent
ROOT = "supplyline"
TOOL_ROOMS = ("tune", "preprocess", "storage")

# Known edges still to remove, as (importing module, package it reaches).
ALLOWED: set[tuple[str, str]] = set()


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path) for path in SRC.rglob("*.py")}


def imported(path: Path) -> set[str]:
    """Every ``supplyline...`` module name ``path`` imports, relative imports resolved."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    here = module_name(path).split(".")
    package = here if path.name == "__init__.py" else here[:-1]
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            names.add(base)
            # ``from supplyline.x import y`` may import the module y itself
            names.update(f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in MODULES)
    return {n for n in names if n == ROOT or n.startswith(ROOT + ".")}


def package_of(module: str) -> str | None:
    """``collect`` for ``supplyline.collect.sampler``; None for the root facade (``supplyline``),
    which only re-exports lazily and hands out ``__version__``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def module_edges() -> dict[str, set[str]]:
    return {module_name(path): imported(path) for path in sorted(SRC.rglob("*.py"))}


def package_edges(edges: Mapping[str, Iterable[str]]) -> dict[str, dict[str, list[str]]]:
    """package -> package it imports -> the modules doing it (for the failure message)."""
    graph: dict[str, dict[str, list[str]]] = {}
    for module, targets in edges.items():
        source = package_of(module)
        if source is None:
            continue
        for target in targets:
            reached = package_of(target)
            if reached is not None and reached != source:
                graph.setdefault(source, {}).setdefault(reached, []).append(module)
    return graph


def find_cycle(graph: Mapping[str, Iterable[str]]) -> list[str] | None:
    """One cycle as [a, b, ..., a], or None (depth-first search, colouring nodes)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: finished
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (cycle := visit(start)):
            return cycle
    return None


def imports_of(package: str, forbidden: Iterable[str]) -> list[str]:
    """``module -> package`` lines for each forbidden package that ``package``'s modules import."""
    bad = []
    for module, targets in module_edges().items():
        if package_of(module) != package:
            continue
        for reached in sorted({package_of(t) for t in targets} & set(forbidden)):
            if (module, reached) not in ALLOWED:
                bad.append(f"{module} -> {reached}")
    return bad


def test_the_cycle_finder_finds_a_cycle_and_only_a_cycle() -> None:
    assert find_cycle({"a": ["b"], "b": ["c"], "c": ["a"], "d": ["a"]}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": ["b", "c"], "b": ["c"], "c": []}) is None
    edges = {"supplyline.x.m": {"supplyline.y.n"}, "supplyline.y.n": {"supplyline.x"}}
    assert find_cycle(package_edges(edges)) == ["x", "y", "x"]


def test_imports_are_read_from_the_source() -> None:
    edges = module_edges()
    assert "supplyline.collect.samples" in edges["supplyline.collect.sampler"]
    assert "supplyline.target" in edges["supplyline.tune.target"]
    assert (
        "supplyline.preprocess.chain" in edges["supplyline.preprocess.api"]
    )  # from supplyline.preprocess import chain


def test_no_import_cycle_among_packages() -> None:
    graph = package_edges(module_edges())
    cycle = find_cycle(graph)
    if cycle:
        steps = [f"{a} -> {b} (in {', '.join(sorted(set(graph[a][b])))})" for a, b in itertools.pairwise(cycle)]
        pytest.fail("import cycle: " + "; ".join(steps))


def test_collect_imports_neither_analysis_nor_rendering() -> None:
    assert imports_of("collect", ("analyze", "render")) == []


def test_analysis_imports_neither_fixes_nor_a_tool() -> None:
    assert imports_of("analyze", ("fixes", *TOOL_ROOMS)) == []


def test_the_doctor_imports_no_tool() -> None:
    assert imports_of("doctor", TOOL_ROOMS) == []


@pytest.mark.parametrize("room", TOOL_ROOMS)
def test_tool_rooms_do_not_import_each_other(room: str) -> None:
    assert imports_of(room, [r for r in TOOL_ROOMS if r != room]) == []


def test_the_allowed_exceptions_still_exist() -> None:
    """An exception that is no longer needed is deleted, not kept as a silent licence."""
    edges = module_edges()
    stale = [(m, p) for m, p in ALLOWED if p not in {package_of(t) for t in edges.get(m, ())}]
    assert stale == []


def test_import_supplyline_loads_no_torch() -> None:
    code = "import sys, supplyline; print('torch' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "False"
