"""Train a recurrent text classifier or regressor from a table of texts and labels."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, cast

import torch

from bistack.data.batching import TextBatch, collate_text
from bistack.data.features import EncodedSentence
from bistack.data.splits import TrainAndDev, read_train_and_dev
from bistack.data.tables import Example, Tables, read_table
from bistack.data.tokenize import tokenize_text
from bistack.files.modeldir import write_json
from bistack.metrics.dev import Evaluation
from bistack.metrics.text import Scores
from bistack.runs.driver import Prepared
from bistack.runs.loop import Run
from bistack.runs.vocabularies import build_vocabularies, initialise_words, singleton_mask
from bistack.text_models.base import TextModelBase
from bistack.text_models.config import LayerPoolingTextConfig, TextModelConfig
from bistack.text_models.network import build_classifier
from bistack.text_models.outputs import ClassOutputs, RawOutputs, TargetOutputs
from bistack.text_models.text import Classifier, RecurrentTextModel, Regressor

if TYPE_CHECKING:
    from bistack.text_models.layer_text import LayerPoolingTextModel

TextData = TrainAndDev[Example]


def load_text_data(
    config: TextModelConfig | LayerPoolingTextConfig, tables: Tables | None = None
) -> TextData:
    """Read train and dev tables (``tables``: rows handed over from Python, by the
    ``memory:NAME`` the config names); without a dev table, split off a fixed fraction of
    train."""
    data = config.data

    def read(path: str) -> list[Example]:
        columns = (data.text_column, data.label_columns)
        return read_table(path, *columns, file_format=data.format, tables=tables)

    return read_train_and_dev(read, data)


def dev_evaluation(model: TextModelBase, scores: Scores) -> Evaluation:
    """What early stopping reads of dev scores, as the model's outputs say (accuracy for a
    classifier, minus RMSE for a regressor)."""
    return model.outputs.evaluation(scores)


class TextTask:
    """What the training loop needs for classification and regression."""

    def __init__(
        self,
        model: RecurrentTextModel,
        encoded: list[EncodedSentence],
        targets: torch.Tensor,
        data: TextData,
        run: Run,
        calibrate: bool,
    ) -> None:
        self.model = model
        self.encoded = encoded
        self.targets = targets
        self.data = data
        self.calibrate = calibrate

    def train_lengths(self) -> Sequence[int]:
        return [len(e.words) for e in self.encoded]

    def collate(self, indices: list[int]) -> TextBatch:
        return collate_text(
            [self.encoded[i] for i in indices], self.model.vocabularies, self.targets[indices]
        )

    def evaluate(self) -> Evaluation:
        examples, path = self.data.dev, self.data.dev_source
        raw = self.model.run([e.text for e in examples])
        if self.calibrate and self.data.calibrate_on_dev:
            # The kept epoch is the one that scores best as it will be used: calibrated (never
            # where dev is a cross-validation's held-out fold: nothing is fitted on it).
            # Uncalibrated RMSE would also charge each epoch for a shift that calibration undoes.
            # calibrate is set for regressors alone, whose outputs are targets
            cast(TargetOutputs, self.model.outputs).fit_calibration(examples, path, raw)
        return dev_evaluation(self.model, self.model.metrics(examples, raw, path))

    def save_weights(self, directory: Path) -> None:
        self.model.save_weights(directory)


def text_outputs(
    config: TextModelConfig | LayerPoolingTextConfig,
    outputs: type[ClassOutputs] | type[TargetOutputs],
    data: TextData,
) -> ClassOutputs | TargetOutputs:
    """The outputs' meaning from the training table; both splits' labels checked now, not
    after the first epoch (an unknown label or a bad target is an error naming its row)."""
    made = outputs.from_training(data.train, config.data.label_columns, config.data.train)
    made.training_targets(data.dev, data.dev_source)
    return made


def prepare_text_model(
    config: TextModelConfig,
    run: Run,
    model_class: type[RecurrentTextModel],
    tables: Tables | None = None,
    data: TextData | None = None,
) -> Prepared:
    """The recurrent classifier or regressor ``config`` describes, sized to its training data
    (``tables``: see ``load_text_data``; ``data``: train and dev rows already chosen, by a
    study that trains on subsets of one table, such as cross-validation's folds)."""
    data = data or load_text_data(config, tables)
    outputs = text_outputs(config, model_class.OUTPUTS, data)
    # Tokenise with the same rules prediction will use.
    tokens = [[t.text for t in tokenize_text(e.text, config.data.tokenizer)] for e in data.train]
    pairs = [(t, ()) for t in tokens]
    vocabularies, vectors = build_vocabularies(config.features, pairs)
    singletons = singleton_mask(vocabularies, pairs)
    network = build_classifier(config, vocabularies, len(outputs), singletons, loss=outputs.LOSS)
    dev_tokens = (t.text for e in data.dev for t in tokenize_text(e.text, config.data.tokenizer))
    train_tokens = (t for text in tokens for t in text)
    run.say(
        initialise_words(
            network.embedder, config.features, vocabularies, vectors, train_tokens, dev_tokens
        )
    )
    model = model_class(network, vocabularies, config, outputs)
    targets = torch.tensor(outputs.training_targets(data.train, config.data.train))
    encoded = [vocabularies.encode(t) for t in tokens]
    calibrate = config.regression.calibrate
    return Prepared(
        model=model,
        network=network,
        loop=TextTask(model, encoded, targets, data, run, calibrate),
        summary=(
            f"{config.kind}: {len(data.train)} train texts, {len(data.dev)} dev from "
            f"{data.dev_source}; {len(vocabularies.words)} words"
        ),
        finish=lambda run: finish_text_model(model_class, data, calibrate, run),
    )


def prepare_classifier(
    config: TextModelConfig,
    run: Run,
    tables: Tables | None = None,
    data: TextData | None = None,
) -> Prepared:
    return prepare_text_model(config, run, Classifier, tables, data)


def prepare_regressor(
    config: TextModelConfig,
    run: Run,
    tables: Tables | None = None,
    data: TextData | None = None,
) -> Prepared:
    return prepare_text_model(config, run, Regressor, tables, data)


def finish_text_model(
    model_class: type[RecurrentTextModel], data: TextData, calibrate: bool, run: Run
) -> None:
    """Calibrate the best model on dev, then report and save its dev metrics."""
    best = model_class.load(run.model_dir)
    finish_on_dev(best, data, best.run([e.text for e in data.dev]), calibrate, run)


def finish_on_dev(
    best: RecurrentTextModel | LayerPoolingTextModel,
    data: TextData,
    raw: RawOutputs,
    calibrate: bool,
    run: Run,
) -> None:
    """What every text model does with its best epoch: fit its outputs' calibration on dev (a
    classifier's temperature; a regressor's scale and offset when ``calibrate``), keep it with
    the model, and save the dev metrics. Where dev may not be fitted on (a cross-validation's
    held-out fold: ``data.calibrate_on_dev`` false), the outputs stay as trained."""
    if data.calibrate_on_dev:
        done = best.outputs.fit_on_dev(data.dev, data.dev_source, raw, calibrate)
    else:
        done = ""
        run.say("outputs as trained: dev is the held-out fold, fitted on by nothing")
    if done:
        best.save_metadata(run.model_dir)
        run.say(done)
    report_dev_metrics(best.metrics(data.dev, raw, data.dev_source), run.output, run.say)


def report_dev_metrics(scores: Scores, output: Path, say: Callable[[str], None]) -> None:
    """Save the best model's dev metrics; print its attention diagnostics when it attends."""
    write_json(output / "dev_metrics.json", scores.to_json())
    attention = scores.get("attention")
    if attention is None:
        return
    say(
        f"dev attention: mean mass on the first token {attention['mean_first_token_mass']:.3f}, "
        f"on the most-attended position {attention['mean_top_position_mass']:.3f}; "
        f"mass on padding {attention['padding_mass']:.1f}"
    )
    for warning in attention["warnings"]:
        say(
            f"WARNING: {warning}: the attention may be broken (mass piled on one position or on "
            "the first token usually means the pooling learnt nothing about the text)"
        )
