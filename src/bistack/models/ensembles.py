"""Opening an ensemble's members (``bistack.files.ensemble_dir``): each member directory opened
as the door opens one (a PyTorch model directory onto a device, or an exported one on
onnxruntime), what the first one can share with the rest (a frozen backbone,
``shared_parts()``) handed to them rather than loaded again."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from bistack.files.ensemble_dir import EnsembleMeta

# Opens one member's folder, given what the members before it share.
OpenMember = Callable[[Path, dict[str, Any]], Any]


def open_members(
    path: Path, meta: EnsembleMeta, open_member: OpenMember, shared: dict[str, Any] | None = None
) -> list[Any]:
    """The members of the ensemble at ``path`` (``meta``: its ensemble.json, or a blend's run
    naming some of its members), each opened by ``open_member``;
    ``shared``: what the first may take too (a frozen backbone opened for other members)."""
    members: list[Any] = []
    shared = shared or {}
    for folder in meta.member_paths(path):
        members.append(open_member(folder, shared))
        shared = members[0].shared_parts()
    return members
