"""Which family cross-validates a kind: the kind's card names its class (``cv``), built with the
config, the card and the door's opener of a saved model; what the families answer is
:class:`bistack.folds.contract.FoldFamily`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from bistack.cards import Card, resolve
from bistack.config import ExperimentConfig
from bistack.errors import ConfigError
from bistack.folds.contract import FoldFamily
from bistack.predictor import member_opener
from bistack.tasks import TASKS, task_of

# Opens a saved model folder as the door does: ``open(folder, shared_parts)``.
OpenModel = Callable[[Path, dict[str, object]], object]
# Any kind's family, as the run drives it (each kind's records are its own).
Family = FoldFamily[Any, Any, Any, Any]


def family_of(config: ExperimentConfig) -> Family:
    """The fold family of ``config``'s kind, its rows read and checked, its fold models opened
    through the door; a kind its card does not cross-validate is refused, saying which are."""
    card = task_of(config.kind)
    if card.cv is None:
        kinds = ", ".join(sorted(kind for kind, c in TASKS.items() if c.cv is not None))
        raise ConfigError(
            f"cross-validation trains {kinds}; {card.description} is not cross-validated"
        )
    family: Family = resolve(card.cv)(config, card, opener_of(card))
    return family


def opener_of(card: Card) -> OpenModel:
    """The door's opener of a saved model of ``card``'s kind, on the CPU."""
    opener: OpenModel = member_opener(card, exported=False, device="cpu", threads=None)
    return opener


def oof_files_of_every_kind() -> tuple[str, ...]:
    """What any kind's cross-validation writes as its out-of-fold files."""
    return _of_every_kind("OOF_FILES")


def fold_files_of_every_kind() -> tuple[str, ...]:
    """What any kind's cross-validation keeps in a fold's folder beside its run."""
    return _of_every_kind("FOLD_FILES")


def _of_every_kind(files: str) -> tuple[str, ...]:
    found: list[str] = []
    for card in TASKS.values():
        if card.cv is not None:
            found += [name for name in getattr(resolve(card.cv), files) if name not in found]
    return tuple(found)
