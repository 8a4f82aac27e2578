"""An ensemble's directory: ``ensemble.json`` and one model directory a member under
``members/`` (the K fold models ``bistack cv`` trained), opened through the one door like any
model directory.

``ensemble.json`` holds ``kind`` (every member's kind: an ensemble is of one kind), ``members``
(their folder names, in order), ``exported`` (true where ``bistack export`` wrote each member
as an exported directory), what ``info`` says of them (``folds``: each member's held-out
score; ``cv``: the cross-validated score) and the combination's own settings, fitted on the
out-of-fold predictions (a classifier ensemble's ``temperature``, a regressor ensemble's
``target_calibration``: a scale and offset per target, a tagger ensemble's ``calibration``).
A blend's (``bistack blend``) also holds ``runs``: each cross-validated run's name, weight,
members, the fingerprint of the frozen backbone its members share (or null) and its own
ensemble's calibration. The directory is written beside its place and renamed into it whole.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from bistack._version import __version__
from bistack.errors import ModelFileError
from bistack.files.claim import Layout, staged
from bistack.files.modeldir import model_layout, read_json_object, write_json
from bistack.files.swap import atomic_folder

ENSEMBLE_FILE = "ensemble.json"
MEMBERS = "members"


def ensemble_layout(member: Layout = model_layout) -> Layout:
    """An ensemble directory's layout (see ``bistack.files.claim``): ``ensemble.json``, its
    card, and under ``members/`` one folder a member, each laid out as ``member`` says (a model
    directory, or an exported one)."""

    def members(name: str) -> Layout | bool:
        return member if not name.startswith(".") else staged(name)

    def layout(name: str) -> Layout | bool:
        if name == MEMBERS:
            return members
        return name in (ENSEMBLE_FILE, "README.md") or staged(name)

    return layout


def is_ensemble(path: str | Path) -> bool:
    return (Path(path) / ENSEMBLE_FILE).is_file()


@dataclass(frozen=True)
class EnsembleMeta:
    """``ensemble.json`` read and checked once: the ``kind`` and ``members`` (folder names) it
    names, its ``values`` as written (what ``info`` shows, and the combination's settings
    fitted on the out-of-fold predictions), and, of a blend, its ``runs``: each a meta of its
    own (its members, its ensemble's calibration) with its ``name``, ``weight`` and the
    fingerprint of the frozen ``backbone`` its members share (or None). A meta without runs is
    an ensemble of fold models."""

    kind: str
    members: list[str]
    values: dict[str, Any]
    runs: tuple[EnsembleMeta, ...] = ()
    name: str = ""
    weight: float = 1.0
    backbone: str | None = None

    @classmethod
    def of(cls, values: dict[str, Any], kind: str) -> EnsembleMeta:
        """A meta of ``values`` (as ``ensemble.json``, or a blend's run, holds them), of
        ``kind`` unless they name their own."""
        runs = tuple(cls.run_of(run, kind) for run in values.get("runs", ()))
        return cls(str(values.get("kind", kind)), list(values["members"]), values, runs)

    @classmethod
    def run_of(cls, run: dict[str, Any], kind: str) -> EnsembleMeta:
        meta = cls.of(run, kind)
        backbone = run.get("backbone")
        return replace(meta, name=run["name"], weight=float(run["weight"]), backbone=backbone)

    @property
    def blend(self) -> bool:
        return bool(self.runs)

    @property
    def exported(self) -> bool:
        """Whether ``bistack export`` wrote each member as an exported directory."""
        return bool(self.values.get("exported"))

    def member_kinds(self) -> dict[str, str]:
        """Each member's kind, by its folder's name: the ensemble's, or in a blend its run's (a
        blend's runs may be of kinds that predict alike, such as a recurrent regressor and one
        over a transformer's layers)."""
        kinds = {name: self.kind for name in self.members}
        for run in self.runs:
            kinds |= {name: run.kind for name in run.members}
        return kinds

    def member_paths(self, path: str | Path) -> list[Path]:
        return [Path(path) / MEMBERS / name for name in self.members]

    def description(self) -> str:
        """What the directory holds, in words: K fold models, or a blend of runs'."""
        count = len(self.members)
        if self.blend:
            runs = len(self.runs)
            return f"a blend of {runs} cross-validated run{'s' * (runs != 1)} ({count} fold models)"
        return f"an ensemble of {count} fold model{'s' * (count != 1)}"

    def described(self) -> dict[str, Any]:
        """What ``info`` says of an ensemble: its members and their scores, the CV score, and
        the temperature its confidences take from the out-of-fold predictions, where one was
        kept; a blend's runs' weights."""
        values = self.values
        described = {
            "members": len(self.members),
            "folds": values.get("folds", {}),
            "cv": values.get("cv", {}),
        }
        calibration = values.get("calibration") or {}
        temperature = values.get("temperature", calibration.get("temperature"))
        if temperature is not None:
            described["temperature"] = temperature
        if "target_calibration" in values:
            described["calibration"] = values["target_calibration"]
        if self.blend:
            described["blend"] = {run.name: run.weight for run in self.runs}
        return described


def read_ensemble(path: str | Path) -> EnsembleMeta:
    """``ensemble.json``, checked to name a kind and member folders (the door checks that
    each member holds a model of that kind), and a blend's runs their weights and members."""
    path = Path(path)
    values = read_json_object(path / ENSEMBLE_FILE)
    kind, members = values.get("kind"), values.get("members")
    if (
        not isinstance(kind, str)
        or not isinstance(members, list)
        or not members
        or not all(isinstance(m, str) and m and "/" not in m and m != ".." for m in members)
    ):
        raise ModelFileError(
            f"{path / ENSEMBLE_FILE}: expected a kind and a list of member folders; was it "
            "edited by hand?"
        )
    runs = values.get("runs")
    if runs is not None and not blend_runs_named(runs, members):
        raise ModelFileError(
            f"{path / ENSEMBLE_FILE}: expected a blend's runs, each with a name, a weight and "
            "members of the ensemble's; was it edited by hand?"
        )
    return EnsembleMeta.of(values, kind)


def blend_runs_named(runs: object, members: list[str]) -> bool:
    """Whether a blend's ``runs`` name their weights and members, each of ``members``."""
    return (
        isinstance(runs, list)
        and bool(runs)
        and all(
            isinstance(run, dict)
            and isinstance(run.get("name"), str)
            and isinstance(run.get("weight"), int | float)
            and isinstance(run.get("members"), list)
            and bool(run["members"])
            and all(m in members for m in run["members"])
            for run in runs
        )
    )


def write_ensemble(target: Path, members: dict[str, Path], meta: dict[str, Any]) -> None:
    """An ensemble directory at ``target`` of the model directories ``members`` (name: folder,
    hard-linked where the file system allows, else copied) and ``meta``; staged beside
    ``target`` and swapped in whole, so a reader never sees half an ensemble."""
    with atomic_folder(target) as staging:
        for name, folder in members.items():
            try:
                shutil.copytree(folder, staging / MEMBERS / name, copy_function=_link_or_copy)
            except shutil.Error as error:  # one (source, destination, why) a file it failed
                _, destination, why = error.args[0][0]
                raise ModelFileError(
                    f"{destination}: cannot write ({why}); nothing was changed at {target}"
                ) from None
        write_json(
            staging / ENSEMBLE_FILE,
            {**meta, "members": list(members), "bistack_version": __version__},
        )


def _link_or_copy(source: str, destination: str) -> None:
    try:
        os.link(source, destination)
    except OSError:
        shutil.copy2(source, destination)
