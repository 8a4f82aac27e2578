"""``bistack compare-poolers``: every layer pooler trained on the same cached backbone vectors.

The backbone runs once per table (the feature cache); each run (a pooler over one kind of layer
vectors) is then trained over several seeds (scored on dev) or cross-validated on K folds: its
folds are one ``bistack cv`` in ``OUTPUT/RUN`` (every run dealt the same folds, as ``bistack
cv`` deals them; each fold stopping early on a dev split of its training folds, so the held-out
fold chooses nothing), with its out-of-fold predictions and fold ensemble, so that the runs'
CVs blend as they stand
(``bistack blend``; ``--blend`` writes the blend of them in ``OUTPUT/blend``). Finished runs and
folds are reused when the comparison is run again, so an interrupted one resumes. With
``backbone.finetune: true`` each run fine-tunes a fresh copy of the backbone instead (slow).
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

from bistack.cv.reader import CVFolder
from bistack.cv.run import run_cv
from bistack.data.tables import Example
from bistack.errors import ConfigError
from bistack.files.paths import refuse_overlap
from bistack.folds.contract import FoldResult, Recorded
from bistack.folds.plan import fold_name
from bistack.folds.settings import CVSettings
from bistack.models.backbone import TransformerBackbone
from bistack.predictor import member_opener
from bistack.runs.driver import RunOptions
from bistack.studies.pooler_variants import POOLER_VARIANTS, pooler_runs, vectors_read
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
    poolers: Sequence[str] = tuple(POOLER_VARIANTS),
    vectors: Sequence[str] | None = None,
    seeds: int = 3,
    folds: int | None = None,
    progress: bool = False,
    finished_only: bool = False,
    only_runs: Sequence[str] = (),
    log_format: Literal["text", "json"] = "text",
    say: Callable[[str], None] = print,
    accelerator: str = "auto",
    precision: str | None = None,
    blend: bool = False,
) -> list[RepeatedResult]:
    """Train each pooler ``seeds`` times (or cross-validate it on ``folds`` folds), each run
    on ``accelerator`` at ``precision`` (``bistack train``'s flags); write the table and a
    chart; with ``blend`` (and ``folds``), the blend of the poolers' CVs in ``output/blend``.
    A pooler sets ``layer_pooling``'s type (and an LSTM's summary); the rest comes from
    ``config``. A pooler that reads each layer's vectors runs once for each of ``vectors``
    (``cls``, ``mean``; default: the config's), named ``POOLER-VECTORS``.

    ``finished_only``: train nothing; tabulate the runs that have finished so far (of a
    comparison still running, or interrupted), each score named by its fold or seed.
    ``only_runs`` (``fold<K>`` or ``seed<N>`` names): train only these runs, then tabulate
    every finished one, so that processes or machines can share one long comparison.
    """
    runs = pooler_runs(poolers, vectors or [config.layer_pooling.vectors])
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
    options = RunOptions(
        progress=progress,
        overwrite=True,  # a run without its result.json did not finish
        log_format=log_format,
        checkpoints=False,
        accelerator=accelerator,
        precision=precision,
    )
    if folds:
        return _compare_by_cv(
            config, output, runs, folds, finished_only, only_runs, blend, options, say
        )
    if blend:
        raise ConfigError("--blend blends cross-validations: add --folds K")
    if finished_only:
        return _report_finished(config, output, runs, names, seeds, say)
    backbone = TransformerBackbone.load(config.backbone.path)
    cached = VectorsByExample()
    data = load_text_data(config)
    if not config.backbone.finetune:
        cached.add(data.train, frozen_vectors(backbone, config, data.train, say))
        cached.add(data.dev, frozen_vectors(backbone, config, data.dev, say))
    seeded = [(f"seed{s}", (data, data.dev)) for s in range(1, seeds + 1)]
    if only_runs:
        seeded = [run for run in seeded if run[0] in only_runs]
    results = []
    for name, pooler in runs.items():
        say(f"{name}: {pooler['type']} pooler over {vectors_read(pooler)}")
        scores, seconds, parameters = [], [], 0
        for run_name, (data, held_out) in seeded:
            settings = _run_settings(config, pooler, run_name)
            result = _train_or_reuse(
                settings, output / name / run_name, backbone, data, held_out, cached, options
            )
            scores.append(result["score"])
            seconds.append(result["seconds"])
            parameters = result["parameters"]
            say(f"{name} {run_name}: {result['score']:.4f} ({result['seconds']:.0f}s)")
        results.append(RepeatedResult(name, scores, parameters, statistics.fmean(seconds)))
    if only_runs:  # the table of every finished run, not only of those trained here
        return _report_finished(config, output, runs, names, seeds, say)
    _write_and_show(output, results, config, runs, None, seeds, "", say)
    return results


def _compare_by_cv(
    config: LayerPoolingTextConfig,
    output: Path,
    runs: dict[str, dict[str, Any]],
    folds: int,
    finished_only: bool,
    only_runs: Sequence[str],
    blend: bool,
    options: RunOptions,
    say: Callable[[str], None],
) -> list[RepeatedResult]:
    """Each pooler cross-validated into ``output/POOLER`` (its folds named by ``only_runs``
    alone, where given; none with ``finished_only``), then the table of their finished folds,
    and with ``blend`` the blend of their CVs."""
    if blend and (finished_only or only_runs):
        without = "--finished-only" if finished_only else "--runs"
        raise ConfigError(f"--blend blends finished cross-validations: run without {without}")
    settings = CVSettings(folds, inner_dev=True)
    cv_options = dataclasses.replace(options, overwrite=False)
    results, done = [], 0
    for name, pooler in runs.items():
        if not finished_only:
            say(
                f"{name}: {pooler['type']} pooler over {vectors_read(pooler)}, "
                f"cross-validating into {output / name}"
            )
            run_config = _run_settings(config, pooler, "cv")
            run_cv(run_config, output / name, settings, cv_options, say, only=only_runs)
        records = _finished_folds(CVFolder(output / name), folds, say, name)
        done += len(records)
        if records:
            results.append(
                RepeatedResult(
                    name,
                    [r.score for r in records.values()],
                    next(iter(records.values())).parameters,
                    statistics.fmean(r.seconds for r in records.values()),
                    runs=list(records),
                )
            )
    if not results:
        raise ConfigError(f"{output}: no run of this comparison has finished yet")
    total = len(runs) * folds
    note = f", finished runs only ({done} of {total})" if finished_only or only_runs else ""
    _write_and_show(output, results, config, runs, folds, 0, note, say)
    if blend:
        from bistack.blends.run import blend as blend_runs

        blend_runs([output / name for name in runs], output / "blend", overwrite=True, say=say)
    return results


def _finished_folds(
    cv: CVFolder, folds: int, say: Callable[[str], None], pooler: str
) -> dict[str, FoldResult[Recorded]]:
    """The records of the folds of the CV in ``cv`` that have finished, by fold name."""
    records = {}
    for fold in range(folds):
        name = fold_name(0, fold, 1)
        record = cv.fold(name)
        if record is None:
            say(f"{pooler} {name}: not finished")
        else:
            records[name] = record
    return records


def _run_settings(
    config: LayerPoolingTextConfig, pooler: dict[str, Any], run_name: str
) -> LayerPoolingTextConfig:
    """The config of one run: the pooler's ``layer_pooling`` settings over the config's, and
    the seed of a ``seed<N>`` run."""
    settings = dataclasses.replace(
        config, layer_pooling=dataclasses.replace(config.layer_pooling, **pooler)
    )
    if run_name.startswith("seed"):
        train = dataclasses.replace(settings.train, seed=int(run_name[4:]))
        settings = dataclasses.replace(settings, train=train)
    return settings


def _report_finished(
    config: LayerPoolingTextConfig,
    output: Path,
    runs: dict[str, dict[str, Any]],
    run_names: list[str],
    seeds: int,
    say: Callable[[str], None],
) -> list[RepeatedResult]:
    """The table of the seeds' runs under ``output`` that finished with these settings."""
    results = []
    for name, pooler in runs.items():
        records = {}
        for run_name in run_names:
            settings = _run_settings(config, pooler, run_name)
            record = finished_run(output / name / run_name, settings)
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
    note = f", finished runs only ({done} of {len(runs) * len(run_names)})"
    _write_and_show(output, results, config, runs, None, seeds, note, say)
    return results


def _write_and_show(
    output: Path,
    results: list[RepeatedResult],
    config: LayerPoolingTextConfig,
    runs: dict[str, dict[str, Any]],
    folds: int | None,
    seeds: int,
    note: str,
    say: Callable[[str], None],
) -> None:
    metric = task_of(config.kind).metric
    name = metric.name.removeprefix("dev ")  # scored on held-out folds, not only on dev
    table = Path(config.data.train)  # named as a recipe names it, not by this machine's path
    where = (
        f"{folds}-fold CV on {table.parent.name}/{table.name}" if folds else f"dev, {seeds} seeds"
    )
    mode = "fine-tuned" if config.backbone.finetune else "frozen"
    comparison = Comparison(
        title=f"Layer poolers on {config.backbone.path} ({mode}): {name}, {where + note}",
        row_label="pooler",
        metric=name,
        higher_is_better=metric.higher_is_better,
        digits=2 if metric.higher_is_better else 4,
        rows_key="results",
        notes="Vectors each run read: "
        + "; ".join(f"{r.name}, {vectors_read(runs[r.name])}" for r in results)
        + ".",
        fields={"where": where + note, "vectors": {r.name: runs[r.name] for r in results}},
    )
    write_comparison(output, "compare-poolers", comparison, results)
    say(format_table(comparison, results))
    say(comparison.notes)


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
