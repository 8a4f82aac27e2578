"""``bistack compare-poolers``: every layer pooler trained on the same cached backbone vectors.

The backbone runs once per table (the feature cache); each pooler is then trained over several
seeds (scored on dev) or K folds (dealt as ``bistack cv`` deals a plain split, each scored on its
held-out fold, with early stopping on a split of the remaining folds, so the held-out fold never
chooses the epoch). Finished runs are
reused when the comparison is run again, so an interrupted one resumes. With
``backbone.finetune: true`` each run fine-tunes a fresh copy of the backbone instead (slow).
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

from bistack.cv.plan import plan_folds
from bistack.cv.splitters import PlainSplit
from bistack.data.splits import split_off_dev
from bistack.data.tables import Example, read_table
from bistack.errors import ConfigError
from bistack.files.fingerprints import content_digest
from bistack.files.paths import refuse_overlap
from bistack.models.backbone import TransformerBackbone
from bistack.predictor import member_opener
from bistack.runs.driver import RunOptions
from bistack.studies.pooler_variants import POOLER_VARIANTS as VARIANTS
from bistack.studies.repeated import RepeatedResult, finished_run, run_or_reuse
from bistack.studies.seed_table import Comparison, format_table, write_comparison
from bistack.tasks import task_of
from bistack.text_models.config import LayerPoolingTextConfig
from bistack.text_models.layer_recipe import VectorsByExample, frozen_vectors
from bistack.text_models.layer_text import LayerPoolingTextModel
from bistack.text_models.recipe import TextData, load_text_data
from bistack.training import train_config as train


def compare_poolers(
    config: LayerPoolingTextConfig,
    output: str | Path,
    *,
    poolers: Sequence[str] = tuple(VARIANTS),
    seeds: int = 3,
    folds: int | None = None,
    progress: bool = False,
    finished_only: bool = False,
    only_runs: Sequence[str] = (),
    log_format: Literal["text", "json"] = "text",
    say: Callable[[str], None] = print,
    accelerator: str = "auto",
    precision: str | None = None,
) -> list[RepeatedResult]:
    """Train each pooler ``seeds`` times (or on ``folds`` folds), each run on ``accelerator``
    at ``precision`` (``bistack train``'s flags); write the table and a chart.

    ``finished_only``: train nothing; tabulate the runs that have finished so far (of a
    comparison still running, or interrupted), each score named by its fold or seed.
    ``only_runs`` (``fold<K>`` or ``seed<N>`` names): train only these runs, then tabulate
    every finished one, so that processes or machines can share one long comparison.
    """
    unknown = [p for p in poolers if p not in VARIANTS]
    if unknown:
        raise ConfigError(f"unknown pooler {unknown[0]!r} (known: {', '.join(VARIANTS)})")
    refuse_overlap(output, config.input_paths(), "the comparison's output")
    output = Path(output)
    names = (
        [f"fold{k}" for k in range(folds)] if folds else [f"seed{s}" for s in range(1, seeds + 1)]
    )
    outside = [run for run in only_runs if run not in names]
    if outside:
        raise ConfigError(
            f"no run {outside[0]!r} in this comparison (its runs: {', '.join(names)})"
        )
    if finished_only:
        return _report_finished(config, output, poolers, names, folds, seeds, say)
    backbone = TransformerBackbone.load(config.backbone.path)
    vectors = VectorsByExample()
    if folds:
        table = read_table(
            config.data.train,
            config.data.text_column,
            config.data.label_columns,
            file_format=config.data.format,
        )
        if not config.backbone.finetune:
            vectors.add(table, frozen_vectors(backbone, config, table, say))
        digest = content_digest(config.data.train)
        plan = plan_folds(folds, 1, config.data.split_seed, digest, PlainSplit(len(table)))
        runs = [
            (name, _fold_data(config, table, plan.held_out(0, fold), fold))
            for _, fold, name in plan.runs()
        ]
    else:
        data = load_text_data(config)
        if not config.backbone.finetune:
            vectors.add(data.train, frozen_vectors(backbone, config, data.train, say))
            vectors.add(data.dev, frozen_vectors(backbone, config, data.dev, say))
        runs = [(f"seed{s}", (data, data.dev)) for s in range(1, seeds + 1)]
    if only_runs:
        runs = [run for run in runs if run[0] in only_runs]
    results = []
    for name in poolers:
        scores, seconds, parameters = [], [], 0
        for run_name, (data, held_out) in runs:
            settings = _run_settings(config, name, run_name)
            options = RunOptions(
                progress=progress,
                overwrite=True,
                log_format=log_format,
                checkpoints=False,
                accelerator=accelerator,
                precision=precision,
            )
            result = _train_or_reuse(
                settings, output / name / run_name, backbone, data, held_out, vectors, options
            )
            scores.append(result["score"])
            seconds.append(result["seconds"])
            parameters = result["parameters"]
            say(f"{name} {run_name}: {result['score']:.4f} ({result['seconds']:.0f}s)")
        results.append(RepeatedResult(name, scores, parameters, statistics.fmean(seconds)))
    if only_runs:  # the table of every finished run, not only of those trained here
        return _report_finished(config, output, poolers, names, folds, seeds, say)
    _write_and_show(output, results, config, folds, seeds, "", say)
    return results


def _run_settings(
    config: LayerPoolingTextConfig, pooler: str, run_name: str
) -> LayerPoolingTextConfig:
    """The config of one run: the pooler's variant, and the seed of a ``seed<N>`` run."""
    settings = dataclasses.replace(
        config, layer_pooling=dataclasses.replace(config.layer_pooling, **VARIANTS[pooler])
    )
    if run_name.startswith("seed"):
        train = dataclasses.replace(settings.train, seed=int(run_name[4:]))
        settings = dataclasses.replace(settings, train=train)
    return settings


def _report_finished(
    config: LayerPoolingTextConfig,
    output: Path,
    poolers: Sequence[str],
    run_names: list[str],
    folds: int | None,
    seeds: int,
    say: Callable[[str], None],
) -> list[RepeatedResult]:
    """The table of the runs under ``output`` that finished with these settings."""
    results = []
    for name in poolers:
        records = {}
        for run_name in run_names:
            record = finished_run(output / name / run_name, _run_settings(config, name, run_name))
            if record is None:
                say(f"{name} {run_name}: not finished")
            else:
                records[run_name] = record
        if records:
            results.append(
                RepeatedResult(
                    name,
                    [r["score"] for r in records.values()],
                    next(iter(records.values()))["parameters"],
                    statistics.fmean(r["seconds"] for r in records.values()),
                    runs=list(records),
                )
            )
    if not results:
        raise ConfigError(f"{output}: no run of this comparison has finished yet")
    done = sum(len(r.runs) for r in results)
    note = f", finished runs only ({done} of {len(poolers) * len(run_names)})"
    _write_and_show(output, results, config, folds, seeds, note, say)
    return results


def _write_and_show(
    output: Path,
    results: list[RepeatedResult],
    config: LayerPoolingTextConfig,
    folds: int | None,
    seeds: int,
    note: str,
    say: Callable[[str], None],
) -> None:
    metric = task_of(config.kind).metric
    name = metric.name.removeprefix("dev ")  # scored on held-out folds, not only on dev
    where = f"{folds}-fold CV on {config.data.train}" if folds else f"dev, {seeds} seeds"
    mode = "fine-tuned" if config.backbone.finetune else "frozen"
    comparison = Comparison(
        title=f"Layer poolers on {config.backbone.path} ({mode}): {name}, {where + note}",
        row_label="pooler",
        metric=name,
        higher_is_better=metric.higher_is_better,
        digits=2 if metric.higher_is_better else 4,
        rows_key="results",
        fields={"where": where + note},
    )
    write_comparison(output, "compare-poolers", comparison, results)
    say(format_table(comparison, results))


def _fold_data(
    config: LayerPoolingTextConfig, table: list[Example], held: list[int], fold: int
) -> tuple[TextData, list[Example]]:
    """Train on the other folds minus a dev split (early stopping); score the held-out fold."""
    held_set = set(held)
    rest = [e for i, e in enumerate(table) if i not in held_set]
    train, dev = split_off_dev(rest, config.data.dev_fraction, config.data.split_seed)
    source = f"{config.data.train} (fold {fold}: dev split of the other folds)"
    return TextData(train, dev, source), [table[i] for i in held]


def _train_or_reuse(
    config: LayerPoolingTextConfig,
    directory: Path,
    backbone: TransformerBackbone,
    data: TextData,
    held_out: list[Example],
    vectors: VectorsByExample,
    options: RunOptions,
) -> dict[str, Any]:
    """Train one head and score it on ``held_out``, unless an identical run has finished."""

    def run() -> dict[str, Any]:
        tuned = config.backbone.finetune
        trained = train(
            config,
            directory,
            options,  # overwrite: a run without its result.json did not finish
            # A fine-tuned backbone changes: every run starts from a fresh copy.
            backbone=TransformerBackbone.load(config.backbone.path) if tuned else backbone,
            data=data,
            vectors_of=None if tuned else vectors,
        )
        card = task_of(config.kind)  # opened through the door, the backbone shared
        opened = member_opener(card, exported=False, device="cpu", threads=None)
        model: LayerPoolingTextModel = opened(Path(trained.model_dir), {"backbone": backbone})
        if tuned:
            scores = model.score(held_out, config.data.train)
        else:
            texts = [e.text for e in held_out]
            raw = model.outputs_of(vectors(held_out), texts)
            scores = model.metrics(held_out, raw, config.data.train)
        key = task_of(config.kind).metric.column.removeprefix("dev_")
        return {
            "score": scores[key],
            "metrics": scores.to_json(),
            "parameters": trained.parameters,
            "best_epoch": trained.fit.best_epoch,
        }

    return run_or_reuse(directory, config, run)
