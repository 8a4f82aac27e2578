"""The taggers' modules moved from one flat folder into rooms by what they do; a user's import
of an old path keeps working, warns, and gives the very module at its new home."""

from __future__ import annotations

import importlib
import sys

import pytest

from bistack.taggers import NEW_HOME


@pytest.mark.parametrize("old", sorted(NEW_HOME))
def test_an_old_path_gives_the_moved_module_with_a_warning(old, monkeypatch):
    monkeypatch.delitem(sys.modules, old, raising=False)
    with pytest.warns(DeprecationWarning, match=f"{old} moved to {NEW_HOME[old]}"):
        module = importlib.import_module(old)
    assert module is importlib.import_module(NEW_HOME[old])


def test_names_import_from_an_old_path():
    from bistack.taggers.models.tagger import Tagger

    sys.modules.pop("bistack.taggers.tagger", None)
    with pytest.warns(DeprecationWarning):
        from bistack.taggers.tagger import Tagger as old

    assert old is Tagger


def test_an_unknown_path_is_still_an_import_error():
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("bistack.taggers.nothing_here")
