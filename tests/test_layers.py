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
import re
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


def phase_only_names() -> set[str]:
    """The phase names that name nothing else: ``data_wait``, ``compute_hooked``, ``eval``,
    ``gpu_idle``. ``compute``, ``logging``, ``checkpoint``, ``transfer`` and ``collective`` are also
    check names or verdicts, and ``other`` a loader role, so a literal of theirs proves nothing."""
    import typing

    from supplyline import phases as P
    from supplyline.analyze.checks import CheckName
    from supplyline.collect.events import LoaderRole

    names = set(P.PHASE_ORDER) | set(P.CLOCK_PHASES) | {P.GPU_IDLE}
    return names - set(typing.get_args(CheckName)) - set(typing.get_args(P.Bound)) - set(typing.get_args(LoaderRole))


def phase_literals(path: Path, names: set[str]) -> list[str]:
    """``file:line "name"`` for each string constant in ``path`` that is one of ``names``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return [
        f"{path.name}:{node.lineno} {node.value!r}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names
    ]


def test_no_phase_literal_outside_phases_py() -> None:
    """A phase is named through ``supplyline.phases`` (``P.EVAL``, ``P.COMPUTE_HOOKED``), so a
    renamed or added phase is one edit; the record's JSON keys are the only other place they live."""
    names = phase_only_names()
    assert {"data_wait", "compute_hooked", "eval"} <= names  # the rule checks what it claims
    found = [
        hit for path in sorted(SRC.rglob("*.py")) if path.name != "phases.py" for hit in phase_literals(path, names)
    ]
    assert found == []


def test_the_phase_literal_rule_finds_a_literal(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text('acc = {}\nacc["compute_hooked"] = 1.0\nEVAL = "eval"\n', encoding="utf-8")
    assert set(phase_literals(probe, phase_only_names())) == {"probe.py:2 'compute_hooked'", "probe.py:3 'eval'"}


IGNORE = re.compile(r"#\s*type:\s*ignore(\[[^\]]*\])?(.*)$")


def unexplained_ignores(text: str) -> list[int]:
    """Lines whose ``# type: ignore`` names no error code or gives no reason (a ``# why`` after it)."""
    bad = []
    for n, line in enumerate(text.splitlines(), 1):
        m = IGNORE.search(line)
        if m and (not m.group(1) or not re.match(r"\s*#\s*\S", m.group(2))):
            bad.append(n)
    return bad


def test_every_type_ignore_names_its_code_and_its_reason() -> None:
    assert unexplained_ignores("x = f()  # type: ignore[arg-type]  # typeshed lacks the overload\n") == []
    assert unexplained_ignores("x = f()  # type: ignore[arg-type]\ny = g()  # type: ignore  # why\n") == [1, 2]
    found = [
        f"{path.relative_to(SRC)}:{n}"
        for path in sorted(SRC.rglob("*.py"))
        for n in unexplained_ignores(path.read_text(encoding="utf-8"))
    ]
    assert found == []
