"""``bistack cv``: K-fold cross-validation of a classifier, regressor or tagger (its
out-of-fold predictions, its CV score, and its fold models as one ensemble), as
:mod:`bistack.cv` runs it."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from bistack.cli.flags import (
    Processes,
    add_config_file,
    add_log_format,
    add_overrides,
    add_progress_flags,
    add_threads_flag,
    add_training_device,
    ranged,
    say_as,
    say_cpu_warning,
    show_progress,
)
from bistack.files.claim import claim_folder, output_folder
from bistack.files.paths import refuse_overlap, refuse_shared_folder
from bistack.folds.settings import SPLITS, CVSettings, RayCluster


def add(commands: Any) -> None:
    cv = commands.add_parser(
        "cv",
        help="K-fold cross-validation: out-of-fold predictions, the CV score, and the fold "
        "models as one ensemble",
    )
    add_config_file(
        cv, "YAML config of a classifier, regressor or tagger (recurrent or layer-pooling)"
    )
    add_overrides(cv)
    add_training_device(cv)
    cv.add_argument("--folds", type=int, default=5, metavar="K", help="folds (default 5)")
    cv.add_argument(
        "--repeats", type=int, default=1, metavar="R", help="repeat with R shuffles (default 1)"
    )
    cv.add_argument(
        "--split",
        choices=SPLITS,
        default="auto",
        help="auto (default): stratified by class (classifiers), binned target (regressors) or "
        "rarest entity type (taggers), grouped by data.group_column when the config names one, "
        "stratified too (a tagger's documents always); plain: a shuffle, or groups alone; "
        "time: blocks in the order of data.order_column, each fold trained on the blocks before "
        "the one it holds out; data.fold_column gives the folds as they are",
    )
    cv.add_argument(
        "--inner-dev",
        action="store_true",
        help="stop each fold early on a dev split of its training folds, so the held-out fold "
        "chooses nothing (an unbiased CV score); default: on its held-out fold",
    )
    cv.add_argument(
        "--workers",
        type=ranged(int, 1),
        default=1,
        metavar="N",
        help="train N folds at once, each in its own process (and on its own GPU when "
        "several are there); results as with 1",
    )
    cv.add_argument(
        "--ray",
        nargs="?",
        const="",
        metavar="ADDRESS",
        help="train each fold as a Ray task (bistack[ray]): on the cluster at ADDRESS, else the "
        "one RAY_ADDRESS names, else a local Ray; every node must see --output",
    )
    cv.add_argument("--output", help="folder (default runs/cv-<config name>)")
    cv.add_argument(
        "--runs",
        nargs="+",
        default=[],
        metavar="FOLD",
        help="train only these folds (fold0 fold3 ...; repeat2-fold1 with --repeats): "
        "processes or machines share one CV, each fold under its own lock, and whichever "
        "finds every fold finished pools them, once",
    )
    cv.add_argument(
        "--overwrite",
        action="store_true",
        help="start again, replacing an earlier CV there once the new one has finished",
    )
    add_progress_flags(cv)
    add_log_format(cv)
    add_threads_flag(cv)
    cv.set_defaults(run=run_cv, processes=trains_in_workers)


def trains_in_workers(args: argparse.Namespace, cpus: int) -> Processes:
    """``--workers`` processes training at once, sharing the CPUs."""
    return Processes(sharing=args.workers, log=args.log_format)


def run_cv(args: argparse.Namespace) -> int:
    from bistack.cv.family import fold_files_of_every_kind, oof_files_of_every_kind
    from bistack.cv.folder import SETTINGS_FILE, cv_files, cv_layout
    from bistack.cv.run import run_cv
    from bistack.runs.driver import RunOptions
    from bistack.tasks import load_config

    config = load_config(args.config, args.set)
    output = output_folder(args.output or Path("runs") / f"cv-{Path(args.config).stem}", "--output")
    refuse_overlap(output, [("the config", args.config)], "--output")
    if args.overwrite:  # checked here; the earlier CV stays until the new one has finished
        written = cv_files(oof_files_of_every_kind())
        claim_folder(
            output,
            "--output",
            overwrite=True,
            signature=SETTINGS_FILE,
            layout=cv_layout(output, written, whole=True, kept=fold_files_of_every_kind()),
        )
    refuse_shared_folder(output, "--output")
    say_cpu_warning(args)
    settings = CVSettings(
        args.folds,
        args.repeats,
        args.split,
        args.inner_dev,
        args.workers,
        None if args.ray is None else RayCluster(args.ray or None),
    )
    options = RunOptions(
        accelerator=args.accelerator,
        precision=args.precision,
        progress=show_progress(args),
        log_format=args.log_format,
    )
    run_cv(config, output, settings, options, say_as(args.log_format), args.overwrite, args.runs)
    return 0
