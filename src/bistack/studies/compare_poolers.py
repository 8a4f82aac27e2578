"""``bistack compare-poolers``: every layer pooler trained on the same cached backbone vectors.

The backbone runs once per table (the feature cache); each run (a pooler over one kind of layer
vectors) is then one ``bistack cv`` in ``OUTPUT/RUN``: over several seeds, a fold a seed
holding out the dev rows (``data.dev``, else the share of ``data.train`` a run holds out),
each stopping early on them; or on K folds (every run dealt the same folds, as ``bistack cv``
deals them; each fold stopping early on a dev split of its training folds, so the held-out
fold chooses nothing), with its out-of-fold predictions and fold ensemble, so that the runs'
CVs blend as they stand (``bistack blend``; ``--blend`` writes the blend of them in
``OUTPUT/blend``). Finished runs and folds are reused when the comparison is run again, so an
interrupted one resumes. With ``backbone.finetune`` each run fine-tunes a fresh copy of the
backbone instead (slow).
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bistack.cv.reader import CVFolder
from bistack.cv.run import run_cv
from bistack.errors import ConfigError
from bistack.files.paths import refuse_overlap
from bistack.folds.contract import FoldResult, Recorded
from bistack.folds.plan import fold_name
from bistack.folds.settings import CVSettings
from bistack.runs.driver import DEFAULT_OPTIONS, RunOptions
from bistack.studies.pooler_variants import POOLER_VARIANTS, pooler_runs, vectors_read
from bistack.studies.repeated import RepeatedResult
from bistack.studies.seed_table import Comparison, format_table, write_comparison
from bistack.tasks import task_of
from bistack.text_models.config import LayerPoolingTextConfig


@dataclass(frozen=True)
class PoolerStudy:
    """What a comparison is asked: the ``poolers`` (a pooler that reads each layer's vectors
    once for each of ``vectors``: ``cls``, ``mean``; None: the config's), over ``seeds`` seeds
    on dev (None: 3) or, with ``folds``, a K-fold CV; ``finished_only``: train nothing,
    tabulate the runs finished so far (each score named by its fold or seed); ``only_runs``
    (``fold<K>`` or ``seed<N>``): train only these, then tabulate every finished one (processes
    or machines sharing one long comparison); ``blend``: with ``folds``, the blend of the
    poolers' CVs."""

    poolers: Sequence[str] = tuple(POOLER_VARIANTS)
    vectors: Sequence[str] | None = None
    seeds: int | None = None
    folds: int | None = None
    finished_only: bool = False
    only_runs: Sequence[str] = ()
    blend: bool = False

    @property
    def settings(self) -> CVSettings:
        """Each run's ``bistack cv``: K folds, each stopping on a dev split of its training
        folds; or the dev split trained with a seed a repeat, stopping on the dev rows."""
        if self.folds:
            return CVSettings(self.folds, inner_dev=True)
        return CVSettings(1, repeats=self.seed_count, split="dev")

    @property
    def run_names(self) -> list[str]:
        if self.folds:
            return [fold_name(0, fold, 1) for fold in range(self.folds)]
        return [fold_name(seed, 0, self.seed_count, seeded=True) for seed in range(self.seed_count)]

    @property
    def seed_count(self) -> int:
        """The seeds a study on dev trains each pooler with."""
        return self.seeds or 3

    def check(self) -> None:
        """A ConfigError for what cannot act: seeds asked of a K-fold study, a run not in the
        comparison, a blend of seeds, a blend of unfinished CVs."""
        if self.seeds and self.folds:
            raise ConfigError(
                f"--seeds {self.seeds} and --folds {self.folds} ask for two studies: seeds each "
                "scored on the dev rows, or a K-fold CV over data.train; give one"
            )
        outside = [run for run in self.only_runs if run not in self.run_names]
        if outside:
            raise ConfigError(
                f"no run {outside[0]!r} in this comparison (its runs: {', '.join(self.run_names)})"
            )
        if self.blend and not self.folds:
            raise ConfigError("--blend blends cross-validations: add --folds K")
        if self.blend and (self.finished_only or self.only_runs):
            without = "--finished-only" if self.finished_only else "--runs"
            raise ConfigError(f"--blend blends finished cross-validations: run without {without}")


def compare_poolers(
    config: LayerPoolingTextConfig,
    output: str | Path,
    study: PoolerStudy = PoolerStudy(),
    options: RunOptions = DEFAULT_OPTIONS,
    say: Callable[[str], None] = print,
) -> list[RepeatedResult]:
    """Each pooler of ``study`` cross-validated into ``output/POOLER`` (``bistack cv``, each
    fold trained with ``options``: accelerator, precision, progress, log format), then the
    table and chart of their finished runs, and with ``study.blend`` the blend of their CVs in
    ``output/blend``. A pooler sets ``layer_pooling``'s type (and an LSTM's summary); the rest
    comes from ``config``."""
    runs = pooler_runs(study.poolers, study.vectors or [config.layer_pooling.vectors])
    refuse_overlap(output, config.input_paths(), "the comparison's output")
    output = Path(output)
    study.check()
    cv_options = dataclasses.replace(options, overwrite=False, checkpoints=False)
    results, done = [], 0
    for name, pooler in runs.items():
        if not study.finished_only:
            say(
                f"{name}: {pooler['type']} pooler over {vectors_read(pooler)}, "
                f"cross-validating into {output / name}"
            )
            run_config = _run_settings(config, pooler)
            run_cv(run_config, output / name, study.settings, cv_options, say, only=study.only_runs)
        records = _finished_folds(CVFolder(output / name), study.run_names, say, name)
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
    total = len(runs) * len(study.run_names)
    partial = study.finished_only or study.only_runs
    note = f", finished runs only ({done} of {total})" if partial else ""
    _write_and_show(output, results, config, runs, study, note, say)
    if study.blend:
        from bistack.blends.run import blend as blend_runs

        blend_runs([output / name for name in runs], output / "blend", overwrite=True, say=say)
    return results


def _finished_folds(
    cv: CVFolder, names: Sequence[str], say: Callable[[str], None], pooler: str
) -> dict[str, FoldResult[Recorded]]:
    """The records of the runs ``names`` (folds or seeds) of the CV in ``cv`` that have
    finished, by name."""
    records = {}
    for name in names:
        record = cv.fold(name)
        if record is None:
            say(f"{pooler} {name}: not finished")
        else:
            records[name] = record
    return records


def _run_settings(config: LayerPoolingTextConfig, pooler: dict[str, Any]) -> LayerPoolingTextConfig:
    """The config of one run: the pooler's ``layer_pooling`` settings over the config's."""
    return dataclasses.replace(
        config, layer_pooling=dataclasses.replace(config.layer_pooling, **pooler)
    )


def _write_and_show(
    output: Path,
    results: list[RepeatedResult],
    config: LayerPoolingTextConfig,
    runs: dict[str, dict[str, Any]],
    study: PoolerStudy,
    note: str,
    say: Callable[[str], None],
) -> None:
    metric = task_of(config.kind).metric
    name = metric.name.removeprefix("dev ")  # scored on held-out folds, not only on dev
    table = Path(config.data.train)  # named as a recipe names it, not by this machine's path
    where = (
        f"{study.folds}-fold CV on {table.parent.name}/{table.name}"
        if study.folds
        else f"dev, {study.seed_count} seeds"
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
