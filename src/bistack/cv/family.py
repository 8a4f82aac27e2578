"""What cross-validation needs of a kind's family: the family's card names its class
(``cv``), built with the config, the kind's model class and the door's opener of a saved
model. The family reads and checks its rows when built; the run asks it the rest."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from bistack.cards import resolve
from bistack.errors import ConfigError
from bistack.predictor import member_opener
from bistack.tasks import TASKS, task_of

if TYPE_CHECKING:
    from bistack.cards import Card
    from bistack.cv.plan import FoldPlan
    from bistack.cv.settings import CVSettings
    from bistack.cv.splitters import SplitKeys

Say = Callable[[str], None]
# A fold's record: its name, rows, score and metrics, its held-out predictions (as its family
# keeps them), its best epoch and its model's digest; what ``fold.json`` holds.
FoldRecord = dict[str, Any]
# What every fold shares (a frozen backbone, its vectors of every row), by name.
Shared = dict[str, Any]
# Opens a saved model folder as the door does: ``open(folder, shared_parts)``.
OpenModel = Callable[[Path, dict[str, Any]], Any]


class FoldFamily(Protocol):
    """A kind's cross-validation: its ``rows`` (a table's rows, a tagger's sentences: what
    ``ROWS_ARE`` calls them in messages) and what the folds do with them; ``OOF_FILES``: what
    ``write_oof`` writes; ``FOLD_FILES``: what ``predict_held_out`` keeps in a fold's folder."""

    config: Any
    rows: Sequence[Any]
    OOF_FILES: tuple[str, ...]
    FOLD_FILES: tuple[str, ...]
    ROWS_ARE: str

    @property
    def calibrates(self) -> bool:
        """Whether a fold model calibrates its outputs after training (so that a fold whose
        dev is its held-out fold is scored cross-fitted, once every fold has finished)."""
        ...

    def split_keys(self) -> SplitKeys:
        """What the rows can be split by (a fold column, groups, classes, targets)."""
        ...

    def refuse_settings(self, settings: CVSettings) -> None:
        """A ConfigError for a setting of ``bistack cv`` this kind cannot act on."""
        ...

    def shared_inputs(self, say: Say) -> Shared:
        """What every fold shares, made once (a frozen backbone and its vectors)."""
        ...

    def training_inputs(
        self,
        train: list[int],
        dev: list[int],
        dev_source: str,
        shared: Shared,
        calibrate_on_dev: bool,
    ) -> dict[str, Any]:
        """The keyword arguments of the kind's recipe for one fold's rows."""
        ...

    def model_parts(self, shared: Shared) -> dict[str, Any]:
        """What a fold's model opens with of the shared inputs (a frozen backbone)."""
        ...

    def predict_held_out(
        self, model: Any, held: list[int], shared: Shared, metric: str, directory: Path
    ) -> FoldRecord:
        """A fold model's predictions of its held-out rows, and its scores on them
        (``directory``: the fold's folder, for what a family keeps of that pass beside its
        model)."""
        ...

    def pool_out_of_fold(
        self, plan: FoldPlan, records: list[FoldRecord], metric: str
    ) -> tuple[list[float], Any]:
        """The metric on each repeat's pooled out-of-fold predictions, and those predictions."""
        ...

    def cross_fit(
        self,
        plan: FoldPlan,
        records: list[FoldRecord],
        metric: str,
        members: dict[str, Path],
        say: Say,
    ) -> list[FoldRecord]:
        """Each fold's held-out predictions calibrated by a fit on the other folds'."""
        ...

    def ensemble_settings(
        self,
        oof: Any,
        members: dict[str, Path],
        records: list[FoldRecord],
        say: Say,
        members_calibrated: bool,
    ) -> tuple[dict[str, Any], str]:
        """What the fold ensemble keeps of the out-of-fold predictions, and what was done."""
        ...

    def write_oof(self, output: Path, card: Card, plan: FoldPlan, oof: Any) -> None:
        """The out-of-fold files (``OOF_FILES``) in ``output``."""
        ...

    def oof_report(self, card: Card, oof: Any, model_dir: Path) -> dict[str, Any] | None:
        """The kind's report of the out-of-fold predictions, where it draws one."""
        ...


def family_of(config: Any) -> FoldFamily:
    """The fold family of ``config``'s kind, its rows read and checked, its fold models opened
    through the door; a kind its card does not cross-validate is refused, saying which are."""
    card = task_of(config.kind)
    if card.cv is None:
        kinds = ", ".join(sorted(kind for kind, c in TASKS.items() if c.cv is not None))
        raise ConfigError(
            f"cross-validation trains {kinds}; {card.description} is not cross-validated"
        )
    return resolve(card.cv)(config, card.loader_class, opener_of(card))


def opener_of(card: Card) -> OpenModel:
    """The door's opener of a saved model of ``card``'s kind, on the CPU."""
    return member_opener(card, exported=False, device="cpu", threads=None)


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
