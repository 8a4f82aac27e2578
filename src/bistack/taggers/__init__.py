"""Taggers: a recurrent tagger and a tagger over a transformer's word states, with everything that
is theirs alone, by what it does: ``config`` (their config sections), ``recipe`` and
``layer_recipe`` (how each is trained), ``networks``, ``emissions`` (the output math of
emissions), ``models`` (what users load and get), ``ensembles`` (cross-validation and fold
ensembles) and ``exported`` (export plans, graphs and the runtime); ``cards`` says what each kind
offers.

The modules were one flat folder before: an import of an old path (``bistack.taggers.tagger``)
still gives the module from its new home, with a deprecation warning.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import types
import warnings

MOVED = {
    "networks": ("network", "layer_network", "heads", "streaming"),
    "emissions": ("decoding", "device_decoding", "confidence", "consistency", "calibration"),
    "models": ("tagger", "layer_tagger", "tagging", "records", "report", "formats"),
    "ensembles": ("folds", "ensemble"),
    "exported": ("export", "graphs", "runtime"),
}
NEW_HOME = {
    f"{__name__}.{old}": f"{__name__}.{room}.{old}" for room, olds in MOVED.items() for old in olds
}


class _MovedModule(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds an old flat path and hands over the module at its new home."""

    def find_spec(
        self, fullname: str, path: object = None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in NEW_HOME:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> None:
        return None

    def exec_module(self, module: types.ModuleType) -> None:
        new = NEW_HOME[module.__name__]
        warnings.warn(
            f"{module.__name__} moved to {new}; import it from there",
            DeprecationWarning,
            stacklevel=2,
        )
        sys.modules[module.__name__] = importlib.import_module(new)


if not any(isinstance(finder, _MovedModule) for finder in sys.meta_path):
    sys.meta_path.append(_MovedModule())
