"""The recipes bistack ships: the configs of its benchmarks (CoNLL-2003, WNUT-16, SST-2,
CommonLit, a language model), inside the package, so that an installed bistack trains them
without a checkout. ``recipe:NAME`` names one wherever a config file goes (``bistack train
recipe:conll03-bilstm-crf --set data.train=train.txt``); ``bistack recipes`` lists them and
``bistack config --recipe NAME`` prints one to start a config of your own from.

A recipe's data paths are relative to its own folder, as every config's are: in a checkout they
reach ``../shared/data``; elsewhere give your files with ``--set data.train=... data.dev=...``.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from bistack.errors import ConfigError

PREFIX = "recipe:"


def recipes_folder() -> Path:
    """Where the packaged recipes lie (in a checkout: its ``configs/``, which the package
    links to)."""
    return Path(str(resources.files("bistack") / "recipes")).resolve()


def recipe_names() -> list[str]:
    """Every recipe's name, sorted (its file name without ``.yaml``)."""
    return sorted(path.stem for path in recipes_folder().glob("*.yaml"))


def recipe_path(name: str) -> Path:
    """The file of the recipe ``name``; an unknown name is an error listing the known."""
    path = recipes_folder() / f"{name}.yaml"
    if "/" in name or not path.is_file():
        raise ConfigError(f"{PREFIX}{name}: no such recipe (recipes: {', '.join(recipe_names())})")
    return path


def config_file(spelled: str | Path) -> Path:
    """The config file ``spelled`` names: a path, or ``recipe:NAME``."""
    text = str(spelled)
    return recipe_path(text.removeprefix(PREFIX)) if text.startswith(PREFIX) else Path(text)


def is_recipe(path: Path) -> bool:
    """Whether ``path`` is one of the packaged recipes."""
    return path.resolve().parent == recipes_folder()


def about(name: str) -> str:
    """What a recipe trains: the first sentence of its opening comment."""
    said = []
    for line in recipe_path(name).read_text(encoding="utf-8").splitlines():
        if not line.startswith("#") or line.startswith("# bistack "):
            break
        said.append(line.removeprefix("#").strip())
    text = " ".join(said)
    return text.split(". ")[0].removesuffix(".")
