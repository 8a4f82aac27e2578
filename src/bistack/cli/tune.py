"""``bistack tune``: a hyperparameter search (Optuna) and its verdict against the seed noise
(``bistack.studies.tune``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from bistack.cli.flags import (
    Processes,
    add_config_file,
    add_overrides,
    add_threads_flag,
    add_training_device,
    fail,
    ranged,
    say_cpu_warning,
)
from bistack.errors import BistackError, needs_extra
from bistack.files.paths import refuse_overlap, refuse_shared_folder


def add(commands: Any) -> None:
    tune = commands.add_parser(
        "tune",
        help="search hyperparameters (Optuna), then judge the best against the seed noise",
        description="Search the config keys of a space file with Optuna's TPE sampler, pruning "
        "hopeless trials after each epoch; then retrain the best trial's config and the "
        "starting config with --seeds seeds each and say whether the gain beats the noise. "
        "Each trial is an ordinary training run; an interrupted search goes on when run again.",
    )
    add_config_file(tune, "YAML config to start from (any model kind)")
    tune.add_argument(
        "--space",
        required=True,
        help="YAML file: config keys with [low, high], {log: [low, high]}, "
        "{range: [low, high], step: s} or {choice: [...]}",
    )
    tune.add_argument(
        "--trials", type=ranged(int, 1), default=20, help="trials in all (default 20)"
    )
    add_overrides(tune)
    tune.add_argument("--output", help="folder (default runs/tune-<config name>)")
    tune.add_argument(
        "--seeds",
        type=ranged(int, 0),
        default=3,
        help="seeds for each of the best and the starting config in the verdict (default 3; "
        "0: no verdict, as on the helper machines of a shared study)",
    )
    tune.add_argument(
        "--verdict-set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a setting of both configs in the verdict only, such as the full epoch budget "
        "(train.max_epochs=40) after trials on a short one; best.yaml has it too",
    )
    tune.add_argument(
        "--storage",
        metavar="URL",
        help="the study's database, any URL Optuna takes (postgresql://..., mysql://...) for "
        "a study several machines share; default an SQLite file in --output",
    )
    tune.add_argument("--study-name", default="tune", help="the study's name in the database")
    tune.add_argument(
        "--workers",
        type=ranged(int, 1),
        default=1,
        help="trial processes on this machine, sharing the CPUs (default 1)",
    )
    tune.add_argument(
        "--startup-trials",
        type=ranged(int, 1),
        default=5,
        help="trials drawn at random before TPE models the space, and complete before pruning "
        "starts (default 5)",
    )
    tune.add_argument("--no-prune", action="store_true", help="let every trial train to its end")
    tune.add_argument(
        "--sampler-seed", type=int, help="seed of the sampler, for a search that repeats"
    )
    add_training_device(tune)
    add_threads_flag(tune, "the CPUs shared among the --workers trial processes")
    tune.set_defaults(run=run, processes=processes)


def processes(args: argparse.Namespace, cpus: int) -> Processes:
    """``--workers`` trial processes share the CPUs."""
    return Processes(sharing=args.workers, log="text")


def run(args: argparse.Namespace) -> int:
    from bistack.studies.search_space import read_space
    from bistack.studies.tune import TuneSettings, tune
    from bistack.tasks import load_config

    try:
        quiet_optuna()
    except ImportError as error:
        return fail(needs_extra("tune", "tune", error))
    config = load_config(args.config, args.set)
    space = read_space(args.space, config)
    output = Path(args.output or Path("runs") / f"tune-{Path(args.config).stem}")
    inputs = [("the config", args.config), ("the space", args.space)]
    refuse_overlap(output, inputs, "--output")
    refuse_shared_folder(output, "--output")
    settings = TuneSettings(
        trials=args.trials,
        seeds=args.seeds,
        storage=args.storage,
        study_name=args.study_name,
        startup=args.startup_trials,
        prune=not args.no_prune,
        sampler_seed=args.sampler_seed,
        verdict_set=tuple(args.verdict_set),
        accelerator=args.accelerator,
        precision=args.precision,
    )
    say_cpu_warning(args)
    tune(
        config,
        space,
        output,
        settings,
        workers=args.workers,
        threads=args.threads,
        worker=search_worker,
    )
    return 0


def quiet_optuna() -> None:
    """The trials' lines are bistack's: Optuna's own per-trial lines would repeat them."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)


def search_worker(
    config: dict[str, Any],
    space: list[Any],
    output: Path,
    settings: Any,
    threads: int,
    parent: int,
) -> None:
    """One of ``tune --workers``' spawned processes: its trials on the study, with ``threads``
    threads, ending with the search's process (``parent``); an error is said as the command
    line says one, and Ctrl-C ends it quietly (its running trial recorded as interrupted)."""
    import torch

    from bistack.studies.tune import tune
    from bistack.system.processes import die_with
    from bistack.tasks import config_from_dict

    die_with(parent)
    torch.set_num_threads(threads)
    quiet_optuna()
    try:
        tune(config_from_dict(config), space, output, settings, report=False)
    except BistackError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        sys.exit(130)
