"""The studies over the task table: ``bistack ladder`` (the build order, one change at a
time), ``compare-poolers`` (every layer pooler on one cached backbone), ``explain`` (a text
model's attention) and ``demo`` (a Twitter NER tagger, trained and tried)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from bistack.cli.flags import (
    Processes,
    add_config_file,
    add_log_format,
    add_model,
    add_overrides,
    add_progress_flags,
    add_threads_flag,
    add_training_device,
    fail,
    ranged,
    say_as,
    say_cpu_warning,
    show_progress,
)
from bistack.files.claim import claim_folder, files_only, output_folder
from bistack.files.paths import refuse_overlap, refuse_shared_folder
from bistack.studies.pooler_variants import POOLER_VARIANTS

if TYPE_CHECKING:
    from bistack.text_models.config import LayerPoolingTextConfig

EXPLAIN_FILES = ("explain.html", "explain.png")  # what explain writes into its folder


def add(commands: Any) -> None:
    explain = commands.add_parser("explain", help="show a text model's attention (HTML + PNG)")
    add_model(explain, "model directory of a classifier or regressor")
    explain.add_argument("text", nargs="+", help="texts to explain")
    explain.add_argument(
        "--output",
        default="runs/explain",
        help="a folder of its own for explain.html and explain.png (default runs/explain)",
    )
    explain.add_argument(
        "--overwrite", action="store_true", help="replace what an earlier explain wrote there"
    )
    explain.set_defaults(run=run_explain)
    add_compare_poolers(commands)
    add_ladder_and_demo(commands)


def add_compare_poolers(commands: Any) -> None:
    compare = commands.add_parser(
        "compare-poolers", help="train every layer pooler on the same cached backbone vectors"
    )
    add_config_file(compare, "YAML config with a backbone section")
    add_overrides(compare)
    add_training_device(compare)
    compare.add_argument(
        "--poolers",
        help=f"comma-separated subset (default all: {', '.join(POOLER_VARIANTS)}); a pooler sets "
        "layer_pooling.type (and an LSTM's summary), the rest comes from the config",
    )
    compare.add_argument(
        "--vectors",
        help="comma-separated vectors each layer gives the poolers that read them: cls, mean or "
        "cls,mean (each such pooler runs once for each, named POOLER-VECTORS; default: the "
        "config's layer_pooling.vectors)",
    )
    compare.add_argument(
        "--seeds",
        type=ranged(int, 1),
        help="seeds per pooler (default 3; not with --folds), each scored on the dev rows "
        "(data.dev, else the share of data.train a run holds out): each pooler's seeds are one "
        "bistack cv in OUTPUT/POOLER",
    )
    compare.add_argument(
        "--folds",
        type=ranged(int, 2),
        metavar="K",
        help="K-fold CV over data.train (K >= 2) instead of seeds: each pooler's folds are one "
        "bistack cv in OUTPUT/POOLER, every pooler on the same folds",
    )
    compare.add_argument("--output", help="folder (default runs/compare-<config name>)")
    add_progress_flags(compare)
    add_log_format(compare)
    compare.add_argument(
        "--finished-only",
        action="store_true",
        help="train nothing: the table of the runs finished so far (of a running or interrupted "
        "comparison)",
    )
    compare.add_argument(
        "--runs",
        nargs="+",
        default=[],
        metavar="RUN",
        help="train only these runs (fold<K> or seed<N>), then show every finished run: lets "
        "processes or machines share one comparison",
    )
    compare.add_argument(
        "--blend",
        action="store_true",
        help="with --folds: blend the poolers' cross-validations, weighted on their "
        "out-of-fold predictions, into OUTPUT/blend (as bistack blend does)",
    )
    add_threads_flag(compare)
    compare.set_defaults(run=run_compare_poolers, processes=trains)


def add_ladder_and_demo(commands: Any) -> None:
    ladder = commands.add_parser(
        "ladder", help="the build order, one change at a time, each over several seeds"
    )
    add_config_file(ladder, "YAML config of a recurrent tagger, classifier or regressor")
    add_overrides(ladder)
    ladder.add_argument(
        "--seeds", type=ranged(int, 1), default=3, help="seeds per rung (default 3)"
    )
    ladder.add_argument("--output", help="folder (default runs/ladder-<config name>)")
    ladder.add_argument(
        "--transformer-states",
        nargs="?",
        const="default",
        metavar="BACKBONE",
        help="taggers: a sixth rung that stacks a transformer's word states beside the "
        "tagger's features (a local model folder; default all-MiniLM-L6-v2)",
    )
    add_progress_flags(ladder)
    add_log_format(ladder)
    add_threads_flag(ladder)
    ladder.set_defaults(run=run_ladder, processes=trains)

    demo = commands.add_parser("demo", help="train and try a Twitter NER tagger (WNUT-2016)")
    demo.add_argument("--output", default="runs/demo", help="run directory")
    demo.add_argument(
        "--minutes", type=ranged(float, 0.1), default=3.0, help="training time budget"
    )
    add_progress_flags(demo)
    add_threads_flag(demo)
    demo.set_defaults(run=run_demo, processes=trains)


def trains(args: argparse.Namespace, cpus: int) -> Processes:
    """One process training run after run, saying a warning in its log."""
    return Processes(log=getattr(args, "log_format", "text"))


def run_explain(args: argparse.Namespace) -> int:
    from bistack.predictor import open_model
    from bistack.studies.explain import explain

    model = open_model(args.model)
    if not model.card.offers("attention"):
        return fail(
            f"{args.model} holds {model.description}, which has no token attention weights to "
            "show; explain needs a classifier or regressor with 'additive' or 'dot' pooling"
        )
    refusal = model.model.attention_refusal()
    if refusal is not None:
        return fail(f"{args.model} holds {model.description}: {refusal}")
    for written in EXPLAIN_FILES:  # what it writes: never into the model
        refuse_overlap(Path(args.output) / written, [("the model directory", args.model)])
    output = output_folder(args.output, "--output")
    claim_folder(
        output,
        "--output",
        overwrite=args.overwrite,
        signature=EXPLAIN_FILES[0],
        layout=files_only(*EXPLAIN_FILES),
    )
    page, chart = explain(model.model, args.text, output)
    print(f"wrote {page} and {chart}")
    return 0


def run_compare_poolers(args: argparse.Namespace) -> int:
    from bistack.runs.driver import RunOptions
    from bistack.studies.compare_poolers import PoolerStudy, compare_poolers
    from bistack.tasks import load_config, task_of

    config = load_config(args.config, args.set)
    if not task_of(config.kind).compares_poolers:
        return fail(f"{args.config}: compare-poolers needs a config with a backbone section")
    poolers = args.poolers.split(",") if args.poolers else list(POOLER_VARIANTS)
    output = args.output or str(Path("runs") / f"compare-{Path(args.config).stem}")
    refuse_overlap(output, [("the config", args.config)], "--output")
    refuse_shared_folder(output, "--output")
    say_cpu_warning(args)
    study = PoolerStudy(
        poolers=poolers,
        vectors=args.vectors.split(",") if args.vectors else None,
        seeds=args.seeds,
        folds=args.folds,
        finished_only=args.finished_only,
        only_runs=args.runs,
        blend=args.blend,
    )
    options = RunOptions(
        progress=show_progress(args),
        log_format=args.log_format,
        accelerator=args.accelerator,
        precision=args.precision,
    )
    config = cast("LayerPoolingTextConfig", config)  # compares_poolers: a config over layers
    compare_poolers(config, output, study, options, say_as(args.log_format))
    say_as(args.log_format)(f"table and chart in {output}/compare-poolers.{{md,json,png}}")
    return 0


def run_ladder(args: argparse.Namespace) -> int:
    from bistack.studies.ladder import run_ladder as ladder
    from bistack.tasks import load_config

    config = load_config(args.config, args.set)
    output = args.output or str(Path("runs") / f"ladder-{Path(args.config).stem}")
    refuse_overlap(output, [("the config", args.config)], "--output")
    refuse_shared_folder(output, "--output")
    say_cpu_warning(args)
    ladder(
        config,
        output,
        seeds=args.seeds,
        transformer=args.transformer_states,
        progress=show_progress(args),
        log_format=args.log_format,
        say=say_as(args.log_format),
    )
    say_as(args.log_format)(f"table and chart in {output}/ladder.{{md,json,png}}")
    return 0


def run_demo(args: argparse.Namespace) -> int:
    from bistack.studies.demo import run_demo as demo

    say_cpu_warning(args)
    demo(args.output, args.minutes, progress=show_progress(args))
    return 0
