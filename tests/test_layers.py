"""The package's imports point one way (#26): each module's layer is at or above every module it
imports, and no two modules reach each other through imports (no circle), whether an import sits
at the top of a file or inside a function.

Layers, bottom to top (README's Layout; shared/ARCHITECTURE.md):

    hwspecs < kernels (the specs, their kernels, the GEMM schedule) < sandbox < prompts < profiling
    < agent.verification < agent.capture, agent.distributed < agent.proposers < agent.loop < eval
    < agent.cli

``agent.capture`` and ``agent.distributed`` are siblings: neither imports the other. A module is
in the deepest group its name starts with; ``swizzleperf.agent`` itself (the rooms' package, a
docstring) sits with ``agent.verification``, the lowest room, so that it may import nothing of
the rooms. Only absolute imports are counted: the package uses no relative ones outside
``hwspecs`` (which imports only itself).
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {"hwspecs": "hwspecs", "kernels": "kernels", "sandbox": "sandbox", "profiling": "profiling",
            "prompts": "prompts", "agent": "agent", "eval": "eval"}
# The sandbox imports nothing of the package (its docstring): the bottom, so that anything that
# reads untrusted data (the kernels' GEMM cache too) can use its bounded readers.
LAYERS = [("sandbox",), ("hwspecs",), ("kernels",), ("prompts",), ("profiling",), ("agent", "agent.verification"),
          ("agent.capture", "agent.distributed"), ("agent.proposers",), ("agent.loop",), ("eval",), ("agent.cli",)]


def modules() -> dict:
    """``swizzleperf.X.Y`` -> its file, for every module of the package."""
    found = {}
    for package, folder in PACKAGES.items():
        for path in (ROOT / folder).rglob("*.py"):
            parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(["swizzleperf", package, *parts])] = path
    return found


def imports(name: str, path: Path, known: dict) -> set:
    """The package's modules that ``name`` imports (``from a import b`` counts ``a.b`` where that is a
    module, else ``a``), its own package's ``__init__`` left out."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        targets = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            targets = [f"{node.module}.{alias.name}" if f"{node.module}.{alias.name}" in known else node.module
                       for alias in node.names]
        out |= {t for t in targets if t in known and t != name and not name.startswith(t + ".")}
    return out


def layer(name: str) -> tuple:
    """``(rank, group)`` of a module: the deepest listed group that is a prefix of its name."""
    short = name.removeprefix("swizzleperf.")
    best = None
    for rank, groups in enumerate(LAYERS):
        for group in groups:
            if short == group or short.startswith(group + "."):
                if best is None or len(group) > len(best[1]):
                    best = (rank, group)
    if best is None:
        raise AssertionError(f"{name} is in no layer: add it to LAYERS")
    return best


GRAPH = {name: imports(name, path, modules()) for name, path in modules().items()}


@pytest.mark.parametrize("name", sorted(GRAPH))
def test_imports_point_down(name):
    rank, group = layer(name)
    upward = []
    for target in sorted(GRAPH[name]):
        target_rank, target_group = layer(target)
        if target_rank > rank or (target_rank == rank and target_group != group):
            upward.append(f"{target} ({target_group})")
    assert not upward, f"{name} ({group}) imports from above or beside its layer: {', '.join(upward)}"


def test_no_circles():
    index, low, stack, on_stack, circles, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in GRAPH.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for v in sorted(GRAPH):
        if v not in index:
            visit(v)
    assert not circles, f"import circles: {circles}"
