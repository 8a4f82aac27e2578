"""``bistack blend CV_DIR CV_DIR ... --output DIR``: several cross-validated runs as one model,
weighted on their out-of-fold predictions, as :mod:`bistack.blends` fits and scores it."""

from __future__ import annotations

import argparse
from typing import Any

from bistack.cli.flags import ranged
from bistack.folds.weights import MAX_ROUNDS, METHODS, ROUNDS


def add(commands: Any) -> None:
    blend = commands.add_parser(
        "blend",
        help="several cross-validations of one table and split as one model, weighted on "
        "their out-of-fold predictions (scored nested: no fold's weights see its rows)",
    )
    blend.add_argument(
        "runs", nargs="+", metavar="CV_DIR", help="the --output folders of finished bistack cv runs"
    )
    blend.add_argument("--output", required=True, help="folder for blend.json and model/")
    blend.add_argument(
        "--method",
        choices=METHODS,
        default="simplex",
        help="simplex (default): the non-negative weights summing to one that minimise the "
        "squared error (regressors) or log loss (classifiers), or (taggers) the point of a "
        "grid over them at step 0.1 with the best entity F1; greedy: Caruana's selection "
        "with replacement",
    )
    blend.add_argument(
        "--rounds",
        type=ranged(int, 1, MAX_ROUNDS),
        metavar="N",
        help=f"the greedy method's rounds ({ROUNDS}; at most {MAX_ROUNDS:,})",
    )
    blend.add_argument(
        "--overwrite", action="store_true", help="replace an earlier blend in --output"
    )
    blend.set_defaults(run=run_blend)


def run_blend(args: argparse.Namespace) -> int:
    from bistack.blends.run import blend

    blend(args.runs, args.output, method=args.method, rounds=args.rounds, overwrite=args.overwrite)
    return 0
