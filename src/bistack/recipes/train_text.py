"""Train a text classifier or regressor from a table of texts and labels."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from bistack.api.text import Classifier, Regressor, TextModel
from bistack.config import LayerPoolingTextConfig, TextModelConfig
from bistack.data.batching import TextBatch, collate_text
from bistack.data.features import EncodedSentence
from bistack.data.splits import split_off_dev
from bistack.data.tables import Example, parse_targets, read_table
from bistack.data.tokenize import tokenize_text
from bistack.modeldir import write_json
from bistack.models.classifier import build_classifier
from bistack.recipes.features import build_vocabularies, prepare_embedder
from bistack.recipes.loop import Evaluation, fit, start_run


@dataclass
class TextData:
    train: list[Example]
    dev: list[Example]
    dev_source: str


def load_text_data(config: TextModelConfig | LayerPoolingTextConfig) -> TextData:
    """Read train and dev tables; without a dev table, split off a fixed fraction of train."""
    data = config.data
    train = read_table(data.train, data.text_column, data.label_columns, file_format=data.format)
    if data.dev:
        dev = read_table(data.dev, data.text_column, data.label_columns, file_format=data.format)
        return TextData(train, dev, data.dev)
    train, dev = split_off_dev(train, data.dev_fraction, data.split_seed)
    return TextData(train, dev, f"{data.train} (held-out {data.dev_fraction:.0%})")


def output_info(
    config: TextModelConfig | LayerPoolingTextConfig, train: Sequence[Example]
) -> dict[str, Any]:
    """Labels (classification), or target names with training mean and std (regression)."""
    if config.task == "classification":
        return {"labels": sorted({e.labels[0] for e in train}, key=_label_order)}
    columns = config.data.label_columns
    values = parse_targets(train, columns, config.data.train)
    means = [statistics.fmean(column) for column in zip(*values, strict=True)]
    stds = [statistics.pstdev(column) or 1.0 for column in zip(*values, strict=True)]
    return {"targets": list(columns), "mean": means, "std": stds}


def _label_order(label: str) -> tuple[int, float | str]:
    """Numeric labels in numeric order ("2" before "10"), then the rest alphabetically."""
    try:
        return (0, float(label))
    except ValueError:
        return (1, label)


def targets_tensor(model: TextModel, examples: Sequence[Example], path: str) -> torch.Tensor:
    """Targets: class ids ``(n,)``, or standardised values ``(n, num_targets)``.

    Raises DataError at the row of a label the model does not know or a bad target.
    """
    if isinstance(model, Classifier):
        return torch.tensor(model.label_ids(examples, path))
    info = model.output_info
    values = torch.tensor(parse_targets(examples, info["targets"], path))
    return (values - torch.tensor(info["mean"])) / torch.tensor(info["std"])


def dev_evaluation(model: TextModel, metrics: dict[str, Any]) -> Evaluation:
    """Early stopping maximises dev accuracy (classification) or minus dev RMSE (regression)."""
    if isinstance(model, Classifier):
        return Evaluation(
            score=metrics["accuracy"],
            metrics={"dev_accuracy": metrics["accuracy"], "dev_macro_f1": metrics["macro_f1"]},
            summary=f"dev accuracy {metrics['accuracy']:.2f} macro-F1 {metrics['macro_f1']:.2f}",
        )
    return Evaluation(
        score=-metrics["rmse"],
        metrics={"dev_rmse": metrics["rmse"], "dev_pearson": metrics["pearson"]},
        summary=f"dev RMSE {metrics['rmse']:.4f} r {metrics['pearson']:.4f}",
    )


class TextTask:
    """What the training loop needs for classification and regression."""

    def __init__(
        self,
        model: TextModel,
        encoded: list[EncodedSentence],
        targets: torch.Tensor,
        dev: TextData,
        model_dir: Path,
        calibrate: bool = False,
    ) -> None:
        self.model = model
        self.calibrate = calibrate
        self.encoded = encoded
        self.targets = targets
        self.data = dev
        self.model_dir = model_dir

    def train_lengths(self) -> Sequence[int]:
        return [len(e.words) for e in self.encoded]

    def collate(self, indices: list[int]) -> TextBatch:
        return collate_text(
            [self.encoded[i] for i in indices], self.model.vocabularies, self.targets[indices]
        )

    def evaluate(self) -> Evaluation:
        examples, path = self.data.dev, self.data.dev_source
        raw = self.model.run([e.text for e in examples])
        if isinstance(self.model, Regressor) and self.calibrate:
            # The kept epoch is the one that scores best as it will be used: calibrated.
            # Uncalibrated RMSE would also charge each epoch for a shift that calibration undoes.
            self.model.fit_calibration(examples, path, raw)
        return dev_evaluation(self.model, self.model.metrics(examples, raw, path))

    def save_weights(self) -> None:
        self.model.save_weights(self.model_dir)


def train_text_model(
    config: TextModelConfig,
    output: str | Path,
    *,
    devices: int | str = 1,
    strategy: str = "auto",
    accelerator: str = "cpu",
    progress: bool = True,
) -> Path:
    """Train as ``config`` says; the best model goes to ``output/model``. Returns that path."""
    run = start_run(
        output, config.train.seed, devices=devices, strategy=strategy, accelerator=accelerator
    )
    fabric, say, model_dir = run.fabric, run.say, run.model_dir
    data = load_text_data(config)
    info = output_info(config, data.train)
    kind = Classifier if config.task == "classification" else Regressor
    # Tokenise with the same rules prediction will use.
    tokens = [[t.text for t in tokenize_text(e.text, config.data.tokenizer)] for e in data.train]
    pairs = [(t, ()) for t in tokens]
    vocabularies = build_vocabularies(config.features, pairs)
    network = build_classifier(config, vocabularies, len(info.get("labels", info.get("targets"))))
    say(prepare_embedder(network, config, vocabularies, pairs))
    model = kind(network, vocabularies, config, info)
    say(
        f"{config.task}: {len(data.train)} train texts, {len(data.dev)} dev from "
        f"{data.dev_source}; {len(vocabularies.words)} words; "
        f"{sum(p.numel() for p in network.parameters()):,} parameters"
    )
    if fabric.is_global_zero:
        model.save_metadata(model_dir)
    targets = targets_tensor(model, data.train, config.data.train)
    targets_tensor(model, data.dev, data.dev_source)  # fail now, not after the first epoch
    encoded = [vocabularies.encode(t) for t in tokens]
    task = TextTask(model, encoded, targets, data, model_dir, config.train.calibrate)
    result = fit(run, network, task, config.train, config.optimizer, progress=progress)
    say(
        f"best dev {'accuracy' if kind is Classifier else 'RMSE'} {abs(result.best_score):.4f} "
        f"at epoch {result.best_epoch}; model in {model_dir}"
    )
    if fabric.is_global_zero:
        best = kind.load(model_dir)
        if isinstance(best, Regressor) and config.train.calibrate:
            calibration = best.fit_calibration(data.dev, data.dev_source)
            best.save_metadata(model_dir)
            pairs = ", ".join(f"x{a:.3f} {b:+.3f}" for a, b in calibration)
            say(f"calibrated on dev (scale, offset per target): {pairs}")
        report_dev_diagnostics(best, data, run.output, say)
    return model_dir


def report_dev_diagnostics(
    model: TextModel, data: TextData, output: Path, say: Callable[[str], None]
) -> None:
    """Score the best model on dev; print and save metrics and attention diagnostics."""
    metrics = model.score(data.dev, data.dev_source)
    write_json(output / "dev_metrics.json", metrics)
    attention = metrics.get("attention")
    if attention is None:
        return
    say(
        f"dev attention: mean mass on the first token {attention['mean_first_token_mass']:.3f}, "
        f"on the most-attended position {attention['mean_top_position_mass']:.3f}; "
        f"mass on padding {attention['padding_mass']:.1f}"
    )
    for warning in attention["warnings"]:
        say(
            f"WARNING: {warning}: the attention may be broken (seed: 'if all the mass sits on "
            f"<pad> or on the first token, something is broken')"
        )
