"""Which family cross-validates a kind: the kind's card names its class (``cv``, typed as the
contract's factory in its module), built by ``of`` with the config, the card and the door's
opener of a saved model; what the families answer is :class:`bistack.folds.contract.FoldFamily`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bistack.cards import Card
from bistack.config import ExperimentConfig
from bistack.errors import ConfigError
from bistack.folds.contract import FoldFamily, OpenModel
from bistack.predictor import member_opener
from bistack.tasks import TASKS, task_of

# Any kind's family, as the run drives it (each kind's records are its own).
Family = FoldFamily[Any, Any, Any, Any]


def family_of(config: ExperimentConfig) -> Family:
    """The fold family of ``config``'s kind, its rows read and checked, its fold models opened
    through the door; a kind its card does not cross-validate is refused, saying which are."""
    card = task_of(config.kind)
    factory: type[Family] | None = card.fold_family
    if factory is None:
        kinds = ", ".join(sorted(k for k, c in TASKS.items() if c.cross_validating is not None))
        raise ConfigError(
            f"cross-validation trains {kinds}; {card.description} is not cross-validated"
        )
    return factory.of(config, card, opener_of(card))


def opener_of(card: Card) -> OpenModel:
    """The door's opener of a saved model of ``card``'s kind, on the CPU."""
    opener: OpenModel = member_opener(card, exported=False, device="cpu", threads=None)
    return opener


def oof_files_of_every_kind() -> tuple[str, ...]:
    """What any kind's cross-validation writes as its out-of-fold files."""
    return _of_every_kind(lambda family: family.OOF_FILES)


def fold_files_of_every_kind() -> tuple[str, ...]:
    """What any kind's cross-validation keeps in a fold's folder beside its run."""
    return _of_every_kind(lambda family: family.FOLD_FILES)


def _of_every_kind(files: Callable[[type[Family]], tuple[str, ...]]) -> tuple[str, ...]:
    found: list[str] = []
    for card in TASKS.values():
        if card.fold_family is not None:
            found += [name for name in files(card.fold_family) if name not in found]
    return tuple(found)
