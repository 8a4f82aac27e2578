"""The house reads as what it does, checked by walking the package's source rather than by eye:
modules and functions small enough to read whole, a kind's differences decided by the kind
(its outputs, its config) rather than asked about in shared code, and one K-fold loop."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "bistack"
MODULES = sorted(SRC.rglob("*.py"))
MAX_MODULE_LINES, MAX_FUNCTION_LINES = 500, 100
OUTPUTS = {"ClassOutputs", "TargetOutputs"}


def trees() -> list[tuple[Path, ast.Module]]:
    return [(path, ast.parse(path.read_text())) for path in MODULES]


def where(path: Path, node: ast.AST) -> str:
    return f"{path.relative_to(SRC)}:{getattr(node, 'lineno', 0)}"


def test_no_module_or_function_is_too_long_to_read_whole():
    long_modules = [
        f"{path.relative_to(SRC)} ({lines} lines)"
        for path in MODULES
        if (lines := len(path.read_text().splitlines())) > MAX_MODULE_LINES
    ]
    long_functions = [
        f"{where(path, node)} {node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for path, tree in trees()
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and (node.end_lineno or node.lineno) - node.lineno + 1 > MAX_FUNCTION_LINES
    ]
    assert long_modules == [] and long_functions == []


def test_a_text_model_s_outputs_decide_what_differs_between_classes_and_targets():
    """Cross-validation, the ensemble and the OOF files ask the outputs (strata, averaging,
    columns, the out-of-fold fit), never which class the outputs are."""
    home = SRC / "text_models" / "outputs.py"
    asked = []
    for path, tree in trees():
        if path == home:
            continue
        for node in ast.walk(tree):
            if asks_the_class(node):
                asked.append(where(path, node))
            if isinstance(node, ast.Compare) and any(
                ast.unparse(c) in OUTPUTS for c in node.comparators
            ):
                asked.append(where(path, node))
    assert asked == []


def asks_the_class(node: ast.AST) -> bool:
    """``isinstance(x, ClassOutputs)`` (or of a union naming one)."""
    if not (isinstance(node, ast.Call) and ast.unparse(node.func) == "isinstance"):
        return False
    return len(node.args) == 2 and bool(OUTPUTS & set(ast.unparse(node.args[1]).split(" | ")))


def test_shared_code_asks_a_config_what_it_has_rather_than_sniffing_its_sections():
    """Whether a config fine-tunes a transformer, or reads a frozen one, is the config's to
    say (``fine_tunes_transformer``, ``frozen_backbone``); no code sniffs for a backbone."""
    sniffs = [
        where(path, node)
        for path, tree in trees()
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and ast.unparse(node.func) in ("getattr", "hasattr")
        and len(node.args) > 1
        and ast.unparse(node.args[1]) in ("'backbone'", '"backbone"')
    ]
    assert sniffs == []


def test_one_k_fold_loop_deals_folds_in_the_package():
    """``bistack cv`` deals folds in one place, and ``compare-poolers --folds`` cross-validates
    through it: no module outside ``bistack.folds`` (the splitters) and ``bistack.cv`` (the run)
    shuffles rows into folds of its own."""
    dealers = [
        where(path, node)
        for path, tree in trees()
        if path.parent not in (SRC / "folds", SRC / "cv")
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef) and "fold" in node.name and "plain" in node.name
    ]
    callers = {
        str(path.relative_to(SRC))
        for path, tree in trees()
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and ast.unparse(node.func) == "plan_folds"
    }
    cross_validators = {
        str(path.relative_to(SRC))
        for path, tree in trees()
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and ast.unparse(node.func) == "run_cv"
    }
    assert dealers == []
    assert callers == {"cv/run.py"}
    assert "studies/compare_poolers.py" in cross_validators
