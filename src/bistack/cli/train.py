"""``bistack train``: a model from a YAML config, on the one training driver."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from bistack.cli.flags import (
    Processes,
    add_config_file,
    add_log_format,
    add_matmul_flag,
    add_overrides,
    add_progress_flags,
    add_threads_flag,
    add_training_device,
    ranged,
    say_cpu_warning,
    show_progress,
)
from bistack.errors import ConfigError
from bistack.files.paths import refuse_overlap, refuse_shared_folder
from bistack.system.threads import gpu_present


def add(commands: Any) -> None:
    train = commands.add_parser("train", help="train a model from a YAML config")
    add_config_file(train, "YAML config file")
    add_overrides(train)
    train.add_argument("--output", help="run directory (default: runs/<config name>)")
    train.add_argument(
        "--overwrite",
        action="store_true",
        help="replace a model already in the run directory (it stays until the new run has "
        "its first best model)",
    )
    train.add_argument(
        "--resume",
        action="store_true",
        help="go on from the checkpoint of a stopped run in --output (same config), as if it "
        "had never stopped",
    )
    add_training_device(train)
    train.add_argument("--devices", default="1", help="number of processes/devices (default 1)")
    train.add_argument(
        "--num-nodes",
        type=ranged(int, 1),
        default=1,
        metavar="N",
        help="machines, each running --devices processes (launch: see the README's "
        "'Large corpora'; default 1)",
    )
    train.add_argument("--strategy", default="auto", help="Fabric strategy, e.g. ddp")
    add_matmul_flag(train)
    add_progress_flags(train)
    add_log_format(train)
    add_threads_flag(train, "the CPUs this process may use, shared among --devices processes")
    train.set_defaults(run=run, processes=processes)
    add_config(commands)


def processes(args: argparse.Namespace, cpus: int) -> Processes:
    """``--devices`` processes on the CPU share it; on an accelerator, one uses the CPU."""
    on_cpu = args.accelerator == "cpu" or (args.accelerator == "auto" and not gpu_present())
    sharing = int(args.devices) if args.devices.isdigit() and on_cpu else 1
    return Processes(sharing, log=args.log_format)


def run(args: argparse.Namespace) -> int:
    from bistack.runs.driver import RunOptions
    from bistack.tasks import load_config
    from bistack.training import train_config

    config = load_config(args.config, args.set)
    output = args.output or str(Path("runs") / Path(args.config).stem)
    refuse_overlap(output, [("the config", args.config)], "--output")
    refuse_shared_folder(output, "--output")
    options = RunOptions(
        devices=int(args.devices) if args.devices.isdigit() else args.devices,
        num_nodes=args.num_nodes,
        strategy=args.strategy,
        accelerator=args.accelerator,
        precision=args.precision,
        matmul_precision=args.matmul_precision,
        progress=show_progress(args),
        overwrite=args.overwrite,
        resume=args.resume,
        log_format=args.log_format,
    )
    say_cpu_warning(args)
    for key in config.data.unused_in_training():
        print(
            f"data.{key} {getattr(config.data, key)!r} is read by bistack cv only: bistack "
            "train leaves it unused",
            file=sys.stderr,
        )
    train_config(config, output, options)
    return 0


def add_config(commands: Any) -> None:
    from bistack.tasks import TASKS

    config = commands.add_parser(
        "config",
        help="print every config key of a model kind with its default and what it does",
        description="Print a kind's whole config as YAML, every key at its default with its "
        "comment: a file to start from (bistack config tagger > my.yaml).",
    )
    config.add_argument("kind", nargs="?", choices=sorted(TASKS), help="the model kind")
    config.add_argument(
        "--recipe",
        metavar="NAME",
        help="print the packaged recipe NAME instead (bistack recipes lists them)",
    )
    config.set_defaults(run=run_config)
    recipes = commands.add_parser(
        "recipes",
        help="list the configs bistack ships (train one as recipe:NAME)",
        description="The recipes bistack ships, one line each: train one as bistack train "
        "recipe:NAME (with your data files), or print it to start a config of your own from "
        "(bistack config).",
    )
    recipes.set_defaults(run=run_recipes)


def run_recipes(args: argparse.Namespace) -> int:
    from bistack.config.recipes import about, recipe_names

    names = recipe_names()
    width = max(map(len, names))
    for name in names:
        print(f"{name:<{width}}  {about(name)}")
    return 0


def run_config(args: argparse.Namespace) -> int:
    from bistack.config.recipes import recipe_path
    from bistack.config.schema import as_yaml, keys_of
    from bistack.tasks import task_of

    if (args.kind is None) == (args.recipe is None):
        raise ConfigError("give a model kind (bistack config tagger) or --recipe NAME, not both")
    if args.recipe is not None:
        print(recipe_path(args.recipe).read_text(encoding="utf-8"), end="")
        return 0
    card = task_of(args.kind)
    title = (
        f"{card.description} (kind: {card.kind}): every key at its default.\n"
        "Paths are relative to this file's folder; bistack train FILE trains it."
    )
    print(as_yaml(list(keys_of(card.config_class())), title), end="")
    return 0
