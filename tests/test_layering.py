"""Dependencies flow one way, checked by walking every import in the package (module-level and
inside functions) rather than by eye.

An edge goes from a module to the module it names (``from bistack.api.tagger import Tagger``:
to ``bistack.api.tagger``; ``from bistack.api import Tagger``: to the package ``bistack.api``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "bistack"
BLOCKS = [
    "masking",
    "dropout",
    "encoders",
    "pooling",
    "layer_pooling",
    "crf",
    "crf_kernels",
    "schemes",
    "streaming",
]
ABOVE_BLOCKS = ["config", "data", "api", "recipes", "cli", "tasks"]


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> set[str]:
    """Every module ``path`` imports, within bistack and outside it."""
    names: set[str] = set()
    package = (
        module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    )
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1])
                base = f"{base}.{node.module}" if node.module else base
            names.add(base)
            for alias in node.names:  # "from torch import nn", "from bistack.api import text"
                names.add(f"{base}.{alias.name}")
    return names


GRAPH = {module_name(p): imports_of(p) for p in PACKAGE.rglob("*.py")}


def internal(names: set[str]) -> set[str]:
    return {n for n in names if n in GRAPH}


def reachable(start: str) -> set[str]:
    seen, stack = set(), [start]
    while stack:
        for target in internal(GRAPH[stack.pop()]):
            if target not in seen:
                seen.add(target)
                stack.append(target)
    return seen


def test_the_walk_sees_the_package():
    assert "bistack.encoders" in GRAPH and "bistack.tasks" in GRAPH
    assert "bistack.api.tagging" in internal(GRAPH["bistack.api.tagger"])


@pytest.mark.parametrize("block", BLOCKS)
def test_building_blocks_depend_on_nothing_above_them(block):
    above = {f"bistack.{name}" for name in ABOVE_BLOCKS}
    offenders = {
        m
        for m in reachable(f"bistack.{block}") | {f"bistack.{block}"}
        if any(m == a or m.startswith(f"{a}.") for a in above)
    }
    assert not offenders, f"bistack.{block} reaches {sorted(offenders)}"


@pytest.mark.parametrize(
    "module", sorted(m for m in GRAPH if m.startswith(("bistack.data", "bistack.metrics")))
)
def test_data_and_metrics_use_no_torch_nn(module):
    assert not {n for n in GRAPH[module] if n == "torch.nn" or n.startswith("torch.nn.")}


def test_there_are_no_import_cycles():
    """Tarjan's strongly connected components over the whole graph: each must be one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in internal(GRAPH[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1 or node in internal(GRAPH[node]):
                cycles.append(sorted(component))

    for node in sorted(GRAPH):
        if node not in index:
            visit(node)
    assert not cycles, f"import cycles: {cycles}"


def test_only_the_command_line_sets_process_wide_state():
    """os.environ, transformers' logging and the csv field limit are set in cli.py alone (the
    csv reader raises the limit for one read and puts it back)."""
    for path in PACKAGE.rglob("*.py"):
        if path.name == "cli.py":
            continue
        text = path.read_text()
        assert "os.environ" not in text, path
        assert "set_verbosity" not in text and "disable_progress_bar" not in text, path
