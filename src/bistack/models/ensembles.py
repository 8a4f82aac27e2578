"""Opening an ensemble's members (``bistack.files.ensemble_dir``): each member directory opened
by its kind's class onto one device, what the first one can share with the rest (a frozen
backbone, ``shared_parts()``) handed to them rather than loaded again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bistack.files.ensemble_dir import member_paths
from bistack.files.modeldir import read_config
from bistack.models.saved import opening


def open_members(path: Path, meta: dict[str, Any], loader: Any, device: str) -> list[Any]:
    """The members of the ensemble at ``path`` (``meta``: its ensemble.json, read and
    checked), each built by ``loader`` (the kind's model class) onto ``device``."""
    members: list[Any] = []
    shared: dict[str, Any] = {}
    for folder in member_paths(path, meta):
        member_meta = read_config(folder)
        with opening(folder, loader.KIND, loader.CONFIG, device, meta=member_meta) as saved:
            members.append(loader.from_saved(saved, **shared))
        shared = members[0].shared_parts()
    return members
