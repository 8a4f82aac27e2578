"""The documentation's building-blocks example runs as printed, and every import path the
README and the documentation pages name resolves."""

import re
from pathlib import Path

ROOT = Path(__file__).parents[1]


def documentation() -> str:
    """The README, then every documentation page."""
    pages = sorted((ROOT / "docs").rglob("*.md"))
    return "\n".join(p.read_text() for p in [ROOT / "README.md", *pages])


def test_readme_building_blocks_example_runs():
    readme = (ROOT / "docs" / "building-blocks.md").read_text()
    example = next(b for b in re.findall(r"```python\n(.*?)```", readme, re.S) if "CRF(" in b)
    namespace: dict = {}
    exec(example, namespace)
    assert namespace["out"].states.shape == (2, 7, 256)
    assert namespace["pooled"].weights[1, 3:].abs().sum() == 0
    assert namespace["best"].shape == (2, 7)


def documented_names(readme: str) -> set[str]:
    """Every ``from bistack... import a, b`` in the README's code, and every dotted
    ``bistack.x.y`` it names in backquotes."""
    names = set()
    for module, imported in re.findall(r"from (bistack[\w.]*) import ([\w, ]+)", readme):
        names |= {f"{module}:{name.strip()}" for name in imported.split(",") if name.strip()}
    for dotted in re.findall(r"`(bistack(?:\.\w+)+)", readme):
        names.add(dotted)
    return names


def test_every_import_path_the_readme_documents_resolves():
    """The regrouped package keeps every public path the README gives: a module, or a name in
    one (``bistack.predictor.load_model``, ``from bistack.api import Tagger``)."""
    import importlib

    names = documented_names(documentation())
    assert "bistack.api:Tagger" in names and "bistack.encoders:RecurrentEncoder" in names
    missing = []
    for name in sorted(names):
        module, _, attribute = name.partition(":")
        parts = module.split(".")
        for cut in range(len(parts), 0, -1):  # the longest prefix that is a module
            try:
                found = importlib.import_module(".".join(parts[:cut]))
                break
            except ModuleNotFoundError:
                continue
        rest = [*parts[cut:], *([attribute] if attribute else [])]
        try:
            for part in rest:
                found = getattr(found, part)
        except AttributeError:
            missing.append(name)
    assert not missing, f"the README names paths that do not resolve: {missing}"
