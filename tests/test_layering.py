"""Dependencies flow one way, checked by walking every import in the package (module-level,
inside functions and for type checking only: a circle made of type-checking imports is still a
circle, and the types it names are still the other room's) rather than by eye.

The floors are derived from the package layout, not listed here: each name at the top of the
package (a module file such as ``bistack.crf``, or a package such as ``bistack.taggers``) is
one unit, and a unit's floor is the length of the longest chain of units below it (0: it
imports no other unit). That is only well defined while the units' imports form no circle, so
an arrow running back up (``models`` importing a root module that imports ``models``) fails
as a circle; circles between modules inside one unit fail too. What the layout promises on
top of that:

- a module file at the root is a building block (tensors only), unless it is the task table
  or a face (:data:`TABLE_AND_FACES`): a building block reaches nothing but building blocks,
  their kernels and the errors;
- a kind family is a package with a ``cards.py``; none imports another, and each sits below
  the task table, which sits below the outlets and the command line, which nothing imports;
- the table and the exported runtimes import no torch.

An edge goes from a module to the module it names (``from bistack.taggers.models.tagger import
Tagger``: to ``bistack.taggers.models.tagger``; ``from bistack.api import Tagger``: to
``bistack.api``); a package naming its own submodules (``from bistack.cli import train``)
depends on them, not on itself.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "bistack"
# The root's files that are not building blocks: the task table, the door into a model and the
# Python faces.
TABLE_AND_FACES = {"tasks", "cards", "inputs", "predictor", "training", "__init__", "__main__"}
BELOW_BLOCKS = {"kernels", "errors", "_version"}  # what a building block may also import
FAMILIES = sorted(p.parent.name for p in PACKAGE.glob("*/cards.py"))


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def type_checking_only(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def imports_of(path: Path, for_types: bool = False) -> set[str]:
    """Every module ``path`` imports, within bistack and outside it (``for_types``: those for
    type checking only too)."""
    names: set[str] = set()
    package = (
        module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    )
    stack: list[ast.AST] = [ast.parse(path.read_text())]
    while stack:
        node = stack.pop()
        if type_checking_only(node) and not for_types:
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
    return names - {module_name(path)}


GRAPH = {module_name(p): imports_of(p) for p in PACKAGE.rglob("*.py")}
TYPED = {module_name(p): imports_of(p, for_types=True) for p in PACKAGE.rglob("*.py")}


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


def unit(module: str) -> str:
    """``bistack.taggers.models.tagger`` -> ``taggers``; the package itself -> ``__init__``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def is_block(name: str) -> bool:
    return (PACKAGE / f"{name}.py").is_file() and name not in TABLE_AND_FACES | BELOW_BLOCKS


# Each unit's imports of other units, those for type checking only included.
UNITS = {
    name: {unit(t) for m in TYPED if unit(m) == name for t in internal(TYPED[m])} - {name}
    for name in {unit(m) for m in TYPED}
}


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's components of more than one node (or a node importing itself)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph[node]:
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
            if len(component) > 1 or node in graph[node]:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


@cache
def floor(name: str) -> int:
    """The longest chain of units below ``name`` (defined while the units form no circle)."""
    return 1 + max((floor(below) for below in UNITS[name]), default=-1)


def test_the_walk_sees_the_package():
    assert "bistack.encoders" in GRAPH and "bistack.tasks" in GRAPH
    assert "bistack.taggers.models.tagging" in internal(GRAPH["bistack.taggers.models.tagger"])
    assert FAMILIES == ["language_models", "taggers", "text_models"]
    assert is_block("crf") and not is_block("tasks") and "kernels" in UNITS["crf"]


def test_no_arrow_runs_back_up():
    """The units' imports (for type checking too) form no circle, so each unit has a floor: an
    import from a floor above would close one."""
    circles = strongly_connected(UNITS)
    assert not circles, f"units importing each other in a circle: {circles}"
    floors: dict[int, list[str]] = {}
    for name in UNITS:
        floors.setdefault(floor(name), []).append(name)
    assert floors[0] and max(floors) > 3, sorted(floors.items())


def test_there_are_no_import_cycles():
    """No two modules import each other, even inside one unit, and even for types only (a
    module handing itself to another that imports it back for its type is a circle too)."""
    graph = {module: internal(names) for module, names in TYPED.items()}
    cycles = strongly_connected(graph)
    assert not cycles, f"import cycles: {cycles}"


@pytest.mark.parametrize("block", sorted(n for n in UNITS if is_block(n)))
def test_building_blocks_depend_on_nothing_above_them(block):
    allowed = {unit(m) for m in GRAPH if is_block(unit(m))} | BELOW_BLOCKS
    offenders = {m for m in reachable(f"bistack.{block}") if unit(m) not in allowed}
    assert not offenders, f"bistack.{block} reaches {sorted(offenders)}"


@pytest.mark.parametrize("family", FAMILIES)
def test_no_family_imports_another(family):
    others = set(FAMILIES) - {family}
    assert not UNITS[family] & others, f"{family} imports {sorted(UNITS[family] & others)}"


@pytest.mark.parametrize("family", FAMILIES)
def test_the_families_sit_below_the_table_and_the_table_below_the_faces(family):
    assert floor(family) < floor("tasks") < floor("serve") < floor("cli")
    assert floor("tasks") < floor("corpus") and floor("tasks") < floor("studies")
    importing_cli = [name for name, below in UNITS.items() if "cli" in below]
    assert importing_cli == ["__main__"]  # python -m bistack runs it; nothing else imports it


@pytest.mark.parametrize(
    "module",
    [
        "bistack.tasks",
        "bistack.taggers.exported.runtime",
        "bistack.text_models.runtime",
        "bistack.cards",
    ],
)
def test_the_table_and_the_exported_runtimes_import_no_torch(module):
    """What opens a model's card and runs an exported model needs no torch: no module it
    reaches imports torch (a subprocess with torch made unimportable proves it again in
    tests/export/test_onnx_export.py)."""
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


def test_only_the_command_line_sets_process_wide_state():
    """os.environ, transformers' logging, matplotlib's backend and the csv field limit are set
    in the command line alone (the csv reader raises the limit for one read and puts it
    back)."""
    for path in PACKAGE.rglob("*.py"):
        if unit(module_name(path)) == "cli":
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
            if isinstance(node, ast.Global) and unit(module) != "cli":
                for name in node.names:
                    assert (module, name) in allowed, f"{module} writes the global {name}"


def test_the_folds_contract_lies_below_the_families_and_imports_no_torch():
    """What cross-validation asks of a family, and how rows are split, lie below the families
    (which import it at run time, their records typed), never in the room of the run (which
    names the families through the task table); importing it brings no torch."""
    assert all(floor("folds") < floor(family) for family in FAMILIES)
    into_cv = sorted(
        m
        for m in TYPED
        if unit(m) in FAMILIES and any(n.split(".")[:2] == ["bistack", "cv"] for n in TYPED[m])
    )
    assert not into_cv, f"families importing the cross-validation run: {into_cv}"
    modules = [m for m in GRAPH if unit(m) == "folds"]
    code = f"import sys, {', '.join(modules)}; print('torch' in sys.modules)"
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert found.stdout.strip() == "False"


def test_no_import_hook_redirects_modules():
    """A module lives where its name says: nothing in the package redirects imports."""
    hooks = [p for p in PACKAGE.rglob("*.py") if "meta_path" in p.read_text()]
    assert not hooks, hooks
