"""Dependencies flow one way, checked by walking every import in the package (module-level and
inside functions; imports for type checking only are not dependencies) rather than by eye.

The floors, lowest first: building blocks (tensors only) < shared machinery (config, data,
metrics, runs, models, the output formats, cards, the exported-graph parts) < the kind
families (taggers, text models, the language model; none imports another) < the task table <
the studies and the outlets (serve, corpus, export, the Python faces) < the command line.
Nothing imports from a floor above its own, and the exported runtimes and the table import no
torch, so an exported model runs where torch is not installed.

An edge goes from a module to the module it names (``from bistack.taggers.tagger import
Tagger``: to ``bistack.taggers.tagger``; ``from bistack.api import Tagger``: to ``bistack.api``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "bistack"
BLOCKS = [
    *("masking", "dropout", "encoders", "min_cells", "min_cell_kernels", "pooling"),
    *("layer_pooling", "crf", "crf_kernels", "crf_scan", "schemes", "streaming", "causality"),
    "errors",
    "_version",
]
SHARED = [
    *("config", "config_files", "data", "metrics", "runs", "models", "modeldir"),
    *("feature_cache", "threads", "formats", "inputs", "cards", "graphs", "onnx_session"),
    *("paths", "fingerprints", "processes", "process_environment"),
]
FAMILIES = ["taggers", "text_models", "language_models"]
TABLE = ["tasks"]
ABOVE = ["studies", "serve", "corpus", "export", "api", "training", "info", "reports"]
CLI = ["cli", "__init__", "__main__"]
FLOORS = [BLOCKS, SHARED, FAMILIES, TABLE, ABOVE, CLI]


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def type_checking_only(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def imports_of(path: Path) -> set[str]:
    """Every module ``path`` imports, within bistack and outside it."""
    names: set[str] = set()
    package = (
        module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    )
    stack: list[ast.AST] = [ast.parse(path.read_text())]
    while stack:
        node = stack.pop()
        if type_checking_only(node):
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))
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


def top(module: str) -> str:
    """``bistack.taggers.tagger`` -> ``taggers``; the package itself -> ``__init__``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def floor(module: str) -> int:
    name = top(module)
    for number, names in enumerate(FLOORS):
        if name in names:
            return number
    raise AssertionError(f"{module} is on no floor: add its folder to this test's FLOORS")


def test_the_walk_sees_the_package():
    assert "bistack.encoders" in GRAPH and "bistack.tasks" in GRAPH
    assert "bistack.taggers.tagging" in internal(GRAPH["bistack.taggers.tagger"])


@pytest.mark.parametrize("module", sorted(GRAPH))
def test_no_import_runs_back_up(module):
    """Every module is on a floor, and imports nothing from a floor above its own."""
    offenders = sorted(t for t in internal(GRAPH[module]) if floor(t) > floor(module))
    assert not offenders, f"{module} (floor {floor(module)}) imports {offenders}"


@pytest.mark.parametrize("family", FAMILIES)
def test_no_family_imports_another(family):
    others = {f"bistack.{name}" for name in FAMILIES if name != family}
    offenders = {
        (m, t)
        for m in GRAPH
        if top(m) == family
        for t in internal(GRAPH[m])
        if any(t == o or t.startswith(f"{o}.") for o in others)
    }
    assert not offenders, offenders


@pytest.mark.parametrize("block", BLOCKS)
def test_building_blocks_depend_on_nothing_above_them(block):
    offenders = {m for m in reachable(f"bistack.{block}") if floor(m) > 0}
    assert not offenders, f"bistack.{block} reaches {sorted(offenders)}"


@pytest.mark.parametrize(
    "module",
    ["bistack.tasks", "bistack.taggers.runtime", "bistack.text_models.runtime", "bistack.cards"],
)
def test_the_table_and_the_exported_runtimes_import_no_torch(module):
    """What opens a model's card and runs an exported model needs no torch: no module it
    reaches imports torch (a subprocess with torch made unimportable proves it again in
    tests/test_export.py)."""
    torch_users = sorted(
        m
        for m in reachable(module) | {module}
        if any(n == "torch" or n.startswith("torch.") for n in GRAPH[m])
    )
    assert not torch_users, f"{module} reaches torch through {torch_users}"


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
    """os.environ, transformers' logging, matplotlib's backend and the csv field limit are set
    in cli.py alone (the csv reader raises the limit for one read and puts it back)."""
    for path in PACKAGE.rglob("*.py"):
        if path.name == "cli.py":
            continue
        text = path.read_text()
        assert "os.environ" not in text, path
        assert "set_verbosity" not in text and "disable_progress_bar" not in text, path
        assert "matplotlib.use(" not in text, path


def test_no_module_keeps_state_that_another_caller_sees():
    """No module-level variable is assigned with ``global`` outside the command line, but for
    a corpus worker process's own model (each worker process is its own caller)."""
    allowed = {("bistack.corpus.predict", "_WORKER_MODEL")}
    for path in PACKAGE.rglob("*.py"):
        module = module_name(path)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Global) and module != "bistack.cli":
                for name in node.names:
                    assert (module, name) in allowed, f"{module} writes the global {name}"
