"""What every text model does with its outputs, whatever computes them (PyTorch, or an
exported graph on onnxruntime): predictions, scores on a labelled table, and what a regressor
adds (:class:`Regression`). Its outputs' meaning is :mod:`bistack.text_models.outputs`'s."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Hashable, Sequence
from pathlib import Path
from typing import Any

from bistack.data.tables import Example, read_table
from bistack.errors import ConfigError, DataError
from bistack.metrics.text import ClassificationScores, RegressionScores
from bistack.text_models.formats import Table, table_of
from bistack.text_models.outputs import Outputs, RawOutputs, TargetOutputs
from bistack.text_models.prediction import TextPrediction, with_blank_texts

# Why a model over a transformer's layers (saved or exported) shows no token weights.
OVER_LAYERS_REFUSAL = (
    "it pools over a transformer's layers, not over tokens, so it has no token weights; "
    "a recurrent classifier or regressor with 'additive' or 'dot' pooling has them"
)


class TextModelBase(ABC):
    """What every text model does with its outputs, whatever computes them (PyTorch, or an
    exported graph on onnxruntime): predictions, scores on a labelled table. A subclass
    supplies ``run`` (its network's raw outputs for raw texts)."""

    config: Any  # a config with a ``data`` section of table columns
    outputs: Outputs

    @property
    def attends(self) -> bool:
        """Whether ``predict(attention=True)`` gives token weights."""
        return False

    def attention_refusal(self) -> str | None:
        """Why it has no token attention weights to show, and what to do instead; None where
        it has them."""
        if self.attends:
            return None
        return (
            f"it pools with {self.config.pooling.type!r}, which weighs no tokens; train one with "
            "'additive' or 'dot' pooling for token weights"
        )

    @abstractmethod
    def run(
        self, texts: Sequence[str], batch_size: int | None = None, progress: bool = False
    ) -> RawOutputs:
        """The network's outputs for raw texts, in input order."""

    @staticmethod
    def refuse_empty(texts: Sequence[str]) -> None:
        """An empty text refused by its number (a model over a transformer reads none)."""
        for index, text in enumerate(texts):
            if not text.strip():
                raise DataError("input", f"text {index + 1} is empty")

    def shared_parts(self) -> dict[str, Any]:
        """What another member of its ensemble takes when it opens, rather than load it again
        (a frozen backbone); the keywords of its class's ``from_saved``."""
        return {}

    def shared_stage_key(self) -> Hashable | None:
        """Equal for models whose first stage (``shared_stage``) gives the same result on the
        same texts, so that an ensemble runs it once; None: it has none to share."""
        return None

    def shared_stage(
        self, texts: Sequence[str], batch_size: int | None = None, progress: bool = False
    ) -> Any:
        """The first stage of ``run`` on raw texts (a model with a ``shared_stage_key``)."""
        raise NotImplementedError(f"{type(self).__name__} shares no first stage")

    def run_after(self, stage: Any, texts: Sequence[str]) -> RawOutputs:
        """``run``'s outputs from its first stage's result (``shared_stage``)."""
        raise NotImplementedError(f"{type(self).__name__} shares no first stage")

    @property
    def output_info(self) -> dict[str, Any]:
        """Labels, or target names with mean, std and calibration, as config.json keeps them."""
        return self.outputs.info

    @property
    def labels(self) -> list[str]:
        """Class labels (classifiers) or target names (regressors)."""
        return self.outputs.names

    def describe(self) -> dict[str, Any]:
        """What ``GET /info`` and ``bistack info`` say of its outputs."""
        return {"labels": self.labels}

    def predict(
        self,
        texts: Sequence[str],
        attention: bool = False,
        batch_size: int | None = None,
        progress: bool = False,
    ) -> list[TextPrediction]:
        """One prediction per text (a single string is one text); ``attention=True`` adds
        token weights when the pooling has them; ``batch_size`` texts per forward pass. A blank
        text gets an empty prediction (no label, no values), so results stay aligned;
        ``progress`` shows a bar. ``attention`` from a model without token weights (its pooling
        weighs none, or it is an ensemble) is refused, saying what has them: an option that
        cannot act is never ignored."""
        if attention and (refusal := self.attention_refusal()) is not None:
            raise ConfigError(refusal)

        def predict(chosen: list[str]) -> list[TextPrediction]:
            raw = self.run(chosen, batch_size, progress)
            return self.outputs.predictions(chosen, raw, attention)

        return with_blank_texts(texts, predict)

    def prediction_table(
        self, delimiter: str, id_field: str | None, options: dict[str, Any]
    ) -> Table:
        """``predict --format csv`` (or ``tsv``): a row a text, its label or values."""
        return table_of(delimiter, self, id_field, options)

    def evaluate(self, path: str | Path) -> ClassificationScores | RegressionScores:
        """Metrics on a labelled table, with attention diagnostics when the pooling attends."""
        data = self.config.data
        examples = read_table(path, data.text_column, data.label_columns, file_format=data.format)
        return self.score(examples, path)

    def score(
        self, examples: Sequence[Example], path: str | Path = "<data>"
    ) -> ClassificationScores | RegressionScores:
        """Metrics against the examples' labels; a bad label fails, naming its row, before any
        work."""
        self.outputs.training_targets(examples, path)
        return self.metrics(examples, self.run([e.text for e in examples]), path)

    def metrics(
        self, examples: Sequence[Example], raw: RawOutputs, path: str | Path = "<data>"
    ) -> ClassificationScores | RegressionScores:
        """Metrics of outputs already computed (``raw``) against the examples' labels."""
        return self.outputs.scores(examples, raw, path)


class Regression:
    """What a regressor adds, over whichever network computes its outputs. Its ``outputs``
    are a regressor's (``TargetOutputs``), narrower than a text model's: mypy refuses the
    narrowing of a writable attribute in the classes that mix this in, hence their ignores."""

    outputs: TargetOutputs

    @property
    def targets(self) -> list[str]:
        return self.outputs.names

    def fit_calibration(
        self, examples: Sequence[Example], path: str | Path, raw: RawOutputs | None = None
    ) -> list[list[float]]:
        """Least-squares ``[scale, offset]`` per target onto ``examples``' targets, used by every
        prediction from now on; ``raw``: the network's outputs on them, if already known."""
        if raw is None:
            raw = self.run([e.text for e in examples])  # type: ignore[attr-defined]  # its model's
        return self.outputs.fit_calibration(examples, path, raw)
