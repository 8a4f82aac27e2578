"""A search's trials as the report shows them, and its verdict: the best trial's config and
the starting one, each trained again with fresh seeds, judged against the seed noise."""

from __future__ import annotations

import contextlib
import statistics
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from bistack.config import ExperimentConfig
from bistack.metrics.dev import Metric
from bistack.runs.driver import RunOptions
from bistack.studies.repeated import RepeatedResult, run_or_reuse
from bistack.studies.search_space import Parameter, with_value
from bistack.studies.seed_table import judge
from bistack.studies.tune_results import TrialRow, Verdict
from bistack.training import train_config as train


@contextlib.contextmanager
def trial_output(path: Path) -> Iterator[None]:
    """A trial's training lines (its epochs, its summary) go to its own log file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as handle, contextlib.redirect_stdout(handle):
        yield


def trial_rows(study: Any) -> list[TrialRow]:
    rows = []
    for trial in study.get_trials(deepcopy=False):
        attrs = trial.user_attrs
        if attrs.get("surplus"):
            continue
        state = trial.state.name.lower()
        if state == "fail":
            state = "failed" if "error" in attrs else "interrupted"
        note = "the starting config" if attrs.get("start") else ""
        if "retry_of" in attrs:
            note = f"trial {attrs['retry_of']}'s values again"
        if "pruned_at" in attrs:
            note = f"pruned at {attrs['pruned_at']}"
        rows.append(
            TrialRow(
                number=trial.number,
                state=state,
                value=trial.value if state == "complete" else attrs.get("best"),
                params=dict(trial.params),
                epochs=attrs.get("epochs"),
                seconds=attrs.get("seconds"),
                note=note,
                error=attrs.get("error", ""),
                directory=attrs.get("directory", ""),
            )
        )
    return rows


def best_trial(study: Any) -> Any | None:
    complete = [t for t in study.get_trials(deepcopy=False) if t.state.name == "COMPLETE"]
    return study.best_trial if complete else None


def best_config(study: Any, config: ExperimentConfig, space: list[Parameter]) -> Any:
    trial = best_trial(study)
    if trial is None:
        return None
    return with_value(config, trial.params, f"trial {trial.number}")


def judge_best(
    study: Any,
    config: ExperimentConfig,
    space: list[Parameter],
    output: Path,
    seeds: int,
    options: RunOptions,
    metric: Metric,
    say: Callable[[str], None],
) -> Verdict | None:
    """The best trial's config and the starting config, each trained with ``seeds``
    fresh seeds (none a trial trained with: the winning trial's own run would count again),
    finished runs reused, and whether the gain beats the noise of the difference."""
    trial = best_trial(study)
    if trial is None:
        say("no trial completed: no verdict")
        return None
    best = with_value(config, trial.params, f"trial {trial.number}")
    if best.to_dict() == config.to_dict():
        say(f"the best trial ({trial.number}) is the starting config: nothing to compare")
        return Verdict(trial.number, None, None, 0.0, "the starting config is the best trial")
    used = {t.params.get("train.seed", config.train.seed) for t in study.get_trials()}
    fresh = [seed for seed in range(1, seeds + len(used) + 1) if seed not in used][:seeds]
    say(
        f"verdict: the starting config and trial {trial.number}'s, seeds "
        f"{', '.join(map(str, fresh))} each (the search trained with seed "
        f"{', '.join(map(str, sorted(used)))})"
    )
    start = repeated(
        config, "starting config", output / "verdict" / "start", fresh, metric, say, options
    )
    tuned = repeated(
        best,
        f"best (trial {trial.number})",
        output / "verdict" / "best",
        fresh,
        metric,
        say,
        options,
    )
    gain, says = judge(start, tuned, metric.higher_is_better)
    return Verdict(trial.number, start, tuned, gain, says)


def repeated(
    config: ExperimentConfig,
    name: str,
    directory: Path,
    seeds: Sequence[int],
    metric: Metric,
    say: Callable[[str], None],
    options: RunOptions,
) -> RepeatedResult:
    scores, seconds, parameters = [], [], 0
    for seed in seeds:
        settings = with_value(config, {"train.seed": seed}, name)
        run_dir = directory / f"seed{seed}"

        def run(settings: ExperimentConfig = settings, run_dir: Path = run_dir) -> dict:
            with trial_output(run_dir.with_suffix(".log")):
                trained = train(settings, run_dir, options)
            return {"score": metric.value(trained.fit.best_score), "parameters": trained.parameters}

        record = run_or_reuse(run_dir, settings, run)
        scores.append(record["score"])
        seconds.append(record["seconds"])
        parameters = record["parameters"]
        say(f"{name} seed {seed}: {metric.name} {record['score']:.4g} ({record['seconds']:.0f}s)")
    return RepeatedResult(name, scores, parameters, statistics.fmean(seconds))


def format_value(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)
