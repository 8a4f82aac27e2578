"""A cross-validation's output folder read back: what ``bistack blend`` and ``compare-poolers``
read of a CV, by what it is rather than by its file names.

:meth:`CVFolder.finished` opens a finished CV (an error naming what is missing otherwise):
its settings and config (``cv-settings.json``), its plan of folds (``folds.json``), its
summary (``cv.json``), its fold ensemble's metadata (``model/ensemble.json``) and its
out-of-fold predictions (``oof.jsonl``). :meth:`CVFolder.fold` reads one fold's record,
finished or not, of a CV still running.
"""

from __future__ import annotations

import json
from functools import cached_property
from pathlib import Path
from typing import Any, cast

from bistack.cv.folder import (
    FOLD_FILE,
    FOLDS_FILE,
    MODEL_DIR,
    RESULT_FILE,
    SETTINGS_FILE,
    fold_dir,
)
from bistack.errors import ConfigError
from bistack.files.ensemble_dir import EnsembleMeta, read_ensemble
from bistack.files.modeldir import missing_part, read_json_object
from bistack.folds.contract import JSON, CVSummary, FoldResult, Recorded
from bistack.folds.plan import FoldPlan


class CVFolder:
    """The output folder of ``bistack cv`` at ``path``, each file read once, when first
    asked."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    @classmethod
    def finished(cls, path: str | Path) -> CVFolder:
        """The finished CV in ``path``; an error naming what is missing where there is none (no
        such folder, a folder that is not a CV's, a CV that has not finished)."""
        folder = cls(path)
        path = folder.path
        if not path.is_dir():
            raise ConfigError(
                f"{path}: no such folder{missing_part(path)}; give the --output of a bistack cv"
            )
        if not (path / SETTINGS_FILE).is_file():
            raise ConfigError(
                f"{path}: not a cross-validation's folder (no {SETTINGS_FILE}); give the "
                "--output of a bistack cv"
            )
        if not (path / RESULT_FILE).is_file() or not folder.model.is_dir():
            raise ConfigError(
                f"{path}: its cross-validation has not finished (no {RESULT_FILE}); run the same "
                "bistack cv again to finish it"
            )
        return folder

    @property
    def model(self) -> Path:
        """The fold ensemble's folder."""
        return self.path / MODEL_DIR

    @cached_property
    def recorded(self) -> JSON:
        """``cv-settings.json``: the config, the settings and the precision the CV ran with."""
        return read_json_object(self.path / SETTINGS_FILE)

    @property
    def config(self) -> dict[str, Any]:
        """The config the CV trained its folds with, as a mapping (as ``config.json`` keeps
        it)."""
        return cast(dict[str, Any], self.recorded["config"])

    @property
    def inner_dev(self) -> bool:
        """Whether its folds stopped early on a dev split of their training folds."""
        settings = self.recorded.get("settings", {})
        return isinstance(settings, dict) and bool(settings.get("inner_dev", False))

    @cached_property
    def plan(self) -> FoldPlan:
        written = self.path / FOLDS_FILE
        return FoldPlan.from_json(read_json_object(written), str(written))

    @cached_property
    def summary(self) -> CVSummary:
        """``cv.json``: its metric, scores and how it split, stopped and calibrated."""
        return cast(CVSummary, read_json_object(self.path / RESULT_FILE))

    @cached_property
    def ensemble(self) -> EnsembleMeta:
        return read_ensemble(self.model)

    def fold(self, name: str) -> FoldResult[Recorded] | None:
        """The record of the fold ``name`` (``fold0``...) where it has finished, its
        predictions as written; None where it has not."""
        written = fold_dir(self.path, name) / FOLD_FILE
        if not written.is_file():
            return None
        return FoldResult.from_json(json.loads(written.read_text()), Recorded, str(written))
