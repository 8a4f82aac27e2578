"""``bistack info`` and ``export``: what a model directory holds, and its ONNX form."""

from __future__ import annotations

import argparse
import json
from typing import Any

from bistack.cli.flags import add_model, add_threads_flag
from bistack.tasks import TASKS


def add(commands: Any) -> None:
    info = commands.add_parser(
        "info", help="what a model directory or an exported one holds (kind, labels, metrics)"
    )
    add_model(info)
    info.add_argument("--json", action="store_true", help="print one JSON object")
    info.set_defaults(run=run_info)

    export = commands.add_parser(
        "export", help="export a model to ONNX, to predict without PyTorch (onnxruntime)"
    )
    exporting = ", ".join(card.kind for card in TASKS.values() if card.exporting is not None)
    add_model(export, f"model directory of a kind that exports ({exporting})")
    export.add_argument("--format", choices=["onnx"], default="onnx", help="onnx (the only one)")
    export.add_argument("--output", required=True, help="directory to write")
    export.add_argument(
        "--overwrite", action="store_true", help="replace what --output holds (when done)"
    )
    add_threads_flag(export)
    export.set_defaults(run=run_export)


def run_info(args: argparse.Namespace) -> int:
    from bistack.reports.info import described, model_info

    info = model_info(args.model)
    print(json.dumps(info) if args.json else described(info))
    return 0


def run_export(args: argparse.Namespace) -> int:
    from bistack.export.onnx_export import export_model

    output = export_model(args.model, args.output, overwrite=args.overwrite)
    files = ", ".join(sorted(path.name for path in output.iterdir()))
    print(f"exported {args.model} to {output} ({files})")
    return 0
