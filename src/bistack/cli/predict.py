"""``bistack predict``, ``evaluate`` and ``sample``: a trained model on raw text, labelled data
or a prompt. The output formats and options a model kind offers are its card's
(``bistack.cards``): the flags here are built from the registered cards, and the opened
model's card checks each request."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bistack.cards import Card, PredictOption, RequestError
from bistack.cli.flags import (
    Processes,
    add_card_options,
    add_device,
    add_inference_precision,
    add_matmul_flag,
    add_model,
    add_progress_flags,
    add_threads_flag,
    on_device,
    ranged,
    show_progress,
)
from bistack.corpus.predict import CHUNK_SIZE
from bistack.corpus.sources import INPUT_FORMATS
from bistack.errors import ConfigError
from bistack.files.paths import refuse_overlap
from bistack.tasks import (
    TASKS,
    asked_options,
    kinds_offering,
    offered_formats,
    offered_options,
)

if TYPE_CHECKING:
    from bistack.predictor import Predictor

OPTION = "option:"  # the namespace of a kind's options among the parsed arguments


def add(commands: Any) -> None:
    add_predict(commands)
    add_evaluate(commands)
    add_sample(commands)


def add_predict(commands: Any) -> None:
    predict = commands.add_parser("predict", help="tag, classify or score raw text")
    add_model(predict)
    predict.add_argument("text", nargs="*", help="texts (one argument each)")
    predict.add_argument(
        "--input",
        metavar="PATH",
        help="what to predict, read as it streams: a file, or - for stdin (default format: "
        "one text a line; .jsonl, .csv, .tsv, .parquet, .conll and .conllu files by their suffix)",
    )
    predict.add_argument(
        "--input-format",
        choices=INPUT_FORMATS,
        help="read --input as this format instead of by its suffix",
    )
    predict.add_argument(
        "--tokenized",
        action="store_true",
        help="taggers: one sentence a line, tokens split on whitespace, one tag per given token",
    )
    predict.add_argument(
        "--text-field",
        metavar="NAME",
        help="JSON lines, CSV, TSV, Parquet: the field or column holding the text (default: the "
        "model's data.text_column where the input has it, else text)",
    )
    predict.add_argument(
        "--id-field",
        metavar="NAME",
        help="JSON lines, CSV, TSV, Parquet: copy this field of each record into its prediction "
        "(each prediction of an --input already carries its line or row)",
    )
    predict.add_argument(
        "--output",
        metavar="PATH",
        help="write predictions to PATH (default: stdout), in the format its suffix names "
        "(.jsonl, .csv, .tsv, .conll, .conllu); a suffix naming no format needs --format",
    )
    predict.add_argument("--overwrite", action="store_true", help="replace an --output that exists")
    predict.add_argument(
        "--resume",
        action="store_true",
        help="continue an --output whose run was stopped or killed, after its last whole record",
    )
    predict.add_argument(
        "--on-error",
        choices=["stop", "skip"],
        default="stop",
        help="a record that cannot be read or predicted: stop there (default), or skip it and "
        "list it in the skipped-records file",
    )
    predict.add_argument(
        "--skipped",
        metavar="PATH",
        help="the skipped-records file (default: OUTPUT.skipped.jsonl; needed with stdout)",
    )
    predict.add_argument(
        "--workers",
        type=ranged(int, 1),
        default=1,
        metavar="N",
        help="N processes with one torch thread each (default 1: this process, all threads)",
    )
    predict.add_argument(
        "--chunk-size",
        type=ranged(int, 1),
        default=CHUNK_SIZE,
        metavar="N",
        help=f"records predicted together, batched by length (default {CHUNK_SIZE})",
    )
    predict.add_argument(
        "--log-every",
        type=ranged(float, 0.0),
        default=30.0,
        metavar="SECONDS",
        help="off a terminal: a progress line at most this often (default 30)",
    )
    add_device(predict)
    predict.add_argument("--format", choices=list(offered_formats()), help=formats_help())
    add_kind_options(predict)
    predict.add_argument(
        "--stream",
        action="store_true",
        help="taggers: read tokens from stdin (whitespace-separated, a blank line ends a "
        "sentence) and print each tag as soon as it is final",
    )
    add_progress_flags(predict)
    add_matmul_flag(predict)
    add_inference_precision(predict)
    add_threads_flag(predict, "the CPUs this process may use; with --workers, 1 each")
    predict.set_defaults(run=run_predict, processes=predict_processes)


def formats_help() -> str:
    """Each format of the registered kinds: what it writes, and whose default it is."""
    parts = []
    for name, fmt in offered_formats().items():
        default = [card.kind for card in TASKS.values() if card.predict_formats[:1] == (name,)]
        said = f"; default of {', '.join(default)}" if default else ""
        parts.append(f"{name} ({fmt.about}{said})")
    return "the output: " + ", ".join(parts)


def add_kind_options(predict: argparse.ArgumentParser) -> None:
    """A flag for each option the registered kinds' cards declare, with its range and help."""

    def help(option: PredictOption) -> str:
        kinds = ", ".join(card.kind for card in kinds_offering(option.name))
        carried = f"; in --format {' or '.join(option.formats)}" if option.formats else ""
        return f"{option.help} (kinds {kinds}{carried})"

    add_card_options(predict, list(offered_options().values()), lambda o: OPTION + o.name, help)


def chosen_options(args: argparse.Namespace) -> dict[str, Any]:
    """The kinds' options given on the command line, by their ``predict`` keywords."""
    flags = {k.removeprefix(OPTION): v for k, v in vars(args).items() if k.startswith(OPTION)}
    return asked_options(flags)


def as_flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def predict_processes(args: argparse.Namespace, cpus: int) -> Processes:
    """``--workers`` processes of one thread each, or this process alone."""
    if args.workers > 1:
        return Processes(running=args.workers, one_thread=True)
    return Processes()


def run_predict(args: argparse.Namespace) -> int:
    from bistack.corpus.command import CorpusRequest, predict_command
    from bistack.corpus.predict import PredictionJob
    from bistack.predictor import ModelSource, refuse_unmet_precision

    device = on_device(args.device, args)
    source = ModelSource(args.model, device, args.threads, args.precision or "32")
    model = source.open()
    refuse_unmet_precision(model, args.precision)
    if args.stream:
        from bistack.taggers.networks.streaming import stream_lines

        with model.running():
            stream_lines(model.streamer(), sys.stdin, lambda line: print(line, flush=True))
        return 0
    if args.output and not names_a_folder(args.output):  # an input named before its suffix
        refuse_overlap(
            args.output, [("the input", args.input), ("the model", args.model)], "--output"
        )
    fmt = format_of_output(args.format, args.output, model.card)
    fmt, options = model.card.checked_request(fmt, chosen_options(args), spelled=as_flag)
    request = CorpusRequest(
        texts=list(args.text),
        input=args.input,
        input_format=args.input_format,
        tokenized=args.tokenized,
        text_field=args.text_field,
        id_field=args.id_field,
        output=args.output,
        overwrite=args.overwrite,
        resume=args.resume,
        on_error=args.on_error,
        skipped=args.skipped,
        workers=args.workers,
        chunk_size=args.chunk_size,
        log_every=args.log_every,
        progress=show_progress(args),
    )
    job = PredictionJob(source, fmt, options, id_field=args.id_field)
    return predict_command(request, job, model)


# Data formats no kind writes (a Parquet table, one JSON document): an --output file named
# for one is refused rather than filled with another format under that name.
UNWRITTEN_SUFFIXES = {".parquet": "parquet", ".json": "json"}


def output_suffixes() -> dict[str, str]:
    """What an ``--output`` file's suffix names: the formats the cards declare it for, and the
    data formats no kind writes."""
    named = {suffix: f.name for f in offered_formats().values() for suffix in f.suffixes}
    return named | UNWRITTEN_SUFFIXES


def format_of_output(given: str | None, output: str | None, card: Card) -> str | None:
    """The format predictions are written in: ``--format`` (``given``), else the one the
    ``--output`` file's suffix names (``runs/tags.jsonl``: jsonl); None: the model's default,
    for stdout. Refused, before anything is written: a suffix naming a format the model does
    not write, a suffix naming no format without ``--format`` (never JSON lines under a name
    that says otherwise), and a ``--format`` that contradicts the suffix."""
    if output is None or names_a_folder(output):
        return given  # a folder: refused as one, by the request's checks
    suffix = Path(output).suffix.lower()
    named = output_suffixes().get(suffix)
    if given is not None:
        if named is not None and named != given:
            raise ConfigError(
                f"--format {given} and --output {output}, whose suffix names {named}: give a "
                f"file name for {given} (such as {Path(output).with_suffix(suffix_of(given))}), or "
                "leave out --format"
            )
        return given
    formats = card.predict_formats
    if named is not None and named not in formats:
        raise ConfigError(
            f"--output {output}: its suffix names {named}, which predict does not write for this "
            f"model (it writes {', '.join(formats)}); name the file for one of those, or give "
            "--format"
        )
    if named is None:
        offered = ", ".join(
            f"{fmt.name} ({', '.join(fmt.suffixes)})" if fmt.suffixes else fmt.name
            for fmt in card.formats
        )
        what = f"its suffix {suffix}" if suffix else "a name without a suffix"
        raise ConfigError(
            f"--output {output}: {what} names no format; this model writes {offered}: name the "
            "file for one of them, or give --format"
        )
    return named


def names_a_folder(output: str) -> bool:
    """Whether ``--output`` names a folder (refused as such by the request's checks)."""
    return Path(output).is_dir() or Path(output).name in ("", ".", "..")


def suffix_of(fmt: str) -> str:
    """The first suffix of the format ``fmt`` (``.txt`` for one that has none)."""
    found = offered_formats().get(fmt)
    return found.suffixes[0] if found is not None and found.suffixes else ".txt"


def add_evaluate(commands: Any) -> None:
    evaluate = commands.add_parser("evaluate", help="score a model on labelled data")
    add_model(evaluate)
    evaluate.add_argument(
        "data", nargs="+", help="labelled data: CoNLL files, or tables for text models"
    )
    evaluate.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object (with several data files: one per file, by its path)",
    )
    evaluate.add_argument(
        "--report",
        metavar="DIR",
        help="write DIR/report.html (offline), its charts and report.json: what the scores mean",
    )
    evaluate.add_argument(
        "--overwrite", action="store_true", help="replace the report an earlier --report wrote"
    )
    add_device(evaluate)
    add_matmul_flag(evaluate)
    add_inference_precision(evaluate)
    add_threads_flag(evaluate)
    evaluate.set_defaults(run=run_evaluate)


def run_evaluate(args: argparse.Namespace) -> int:
    from bistack.predictor import open_model, refuse_unmet_precision

    if args.overwrite and not args.report:
        raise ConfigError("--overwrite replaces an earlier --report; give --report DIR with it")
    device = on_device(args.device, args)
    opened = open_model(args.model, device, args.threads, args.precision or "32")
    refuse_unmet_precision(opened, args.precision)
    found = evaluations(opened, args)
    if args.json:
        scores = {path: json_scores for path, (json_scores, _) in found.items()}
        print(json.dumps(scores[args.data[0]] if len(scores) == 1 else scores))
    else:
        for path, (_, report) in found.items():
            print(f"== {path}\n{report}" if len(found) > 1 else report)
    return 0


def evaluations(model: Predictor, args: argparse.Namespace) -> dict[str, tuple[Any, str]]:
    """Each data file's scores, as JSON and as text; with ``--report``, the report written."""
    if not args.report:
        found = {}
        for path in args.data:
            report = model.evaluate(path)
            found[path] = (report.to_json(), str(report))
        return found
    from bistack.reports.write import write_report

    sections = write_report(model, args.data, args.report, overwrite=args.overwrite)
    print(f"wrote {Path(args.report) / 'report.html'}, its charts and report.json", file=sys.stderr)
    return {s["data"]: (s["scores"], s["summary"]) for s in sections}


def add_sample(commands: Any) -> None:
    sample = commands.add_parser("sample", help="generate text with a language model")
    add_model(sample, "model directory of a language model")
    sample.add_argument("prompt", nargs="?", default="", help="text to continue")
    options = [o for card in TASKS.values() for o in card.sample_options]
    add_card_options(sample, list({o.name: o for o in options}.values()), sample_dest, help_of)
    sample.add_argument(
        "--count", type=ranged(int, 1), default=1, help="how many samples (seeds SEED, SEED+1...)"
    )
    add_threads_flag(sample)
    sample.set_defaults(run=run_sample)


def sample_dest(option: PredictOption) -> str:
    return "sample:" + option.name


def help_of(option: PredictOption) -> str:
    return option.help


def run_sample(args: argparse.Namespace) -> int:
    from bistack.predictor import open_model

    model = open_model(args.model, threads=args.threads)
    asked = {k.removeprefix("sample:"): v for k, v in vars(args).items() if k.startswith("sample:")}
    options = model.card.checked_sample(asked, spelled=as_flag)  # before any sample is drawn
    seed = options["seed"]
    if seed is not None and seed + args.count - 1 > 2**63 - 1:  # SEED, SEED+1...
        raise RequestError(f"--seed {seed} with --count {args.count}: the last seed passes 2^63-1")
    for index in range(args.count):
        seed = None if options["seed"] is None else options["seed"] + index
        tokens = model.sample(args.prompt, **(options | {"seed": seed}))
        print(" ".join([args.prompt, *tokens]).strip())
    return 0
