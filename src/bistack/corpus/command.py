"""``bistack predict`` on TEXT arguments or a streamed ``--input``, to stdout or a resumable
``--output``: the orchestration behind the command line's flags (which input format, where the
output and the skipped records go, progress, workers)."""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from pathlib import Path

from bistack.corpus.outputs import FileOutput, StdoutOutput
from bistack.corpus.predict import PredictionJob, Progress, predict_corpus
from bistack.corpus.sources import (
    BY_SUFFIX,
    TOKEN_FORMATS,
    count_records,
    input_fields,
    input_format,
    read_records,
)
from bistack.errors import ConfigError
from bistack.files.fingerprints import content_digest
from bistack.files.paths import refuse_overlap
from bistack.inputs import PLACE_FIELDS, Record
from bistack.predictor import Predictor


@dataclass(frozen=True)
class CorpusRequest:
    """What to predict and where to write it, as ``bistack predict``'s flags say."""

    texts: list[str]
    input: str | None = None
    input_format: str | None = None
    tokenized: bool = False
    # The field holding each text: None, the model's data.text_column where the input has
    # it, else "text".
    text_field: str | None = None
    id_field: str | None = None  # copied from each record into its prediction
    output: str | None = None
    overwrite: bool = False
    resume: bool = False
    on_error: str = "stop"
    skipped: str | None = None
    workers: int = 1
    chunk_size: int = 1024
    log_every: float = 30.0
    progress: bool = False  # a bar, for an --input on a terminal


def check_request(request: CorpusRequest, job: PredictionJob) -> None:
    """Refuse flags that do not go together, and outputs that are inputs, before anything is
    opened or written."""
    if request.texts and request.input:
        raise ConfigError("give TEXT arguments or --input PATH, not both")
    if not request.texts and not request.input:
        raise ConfigError("nothing to predict: give TEXT arguments or --input PATH")
    if request.workers < 1 or request.chunk_size < 1:
        raise ConfigError("--workers and --chunk-size must be >= 1")
    if request.workers > 1 and job.source.device != "cpu":
        raise ConfigError("--workers runs processes on the CPU; use one process for --device")
    if request.resume and (not request.input or request.input == "-" or not request.output):
        raise ConfigError("--resume continues an --output file predicted from an --input file")
    if request.id_field in PLACE_FIELDS:
        raise ConfigError(
            f"--id-field {request.id_field}: each output record keeps its input's "
            f"{request.id_field} under that name; copy the id under another name"
        )
    for flag, named in (("--output", request.output), ("--skipped", request.skipped)):
        if named and (Path(named).is_dir() or Path(named).name in ("", ".", "..")):
            raise ConfigError(f"{flag} {named} is a folder; give a file name")
        if named and not Path(named).parent.is_dir():
            raise ConfigError(
                f"{flag} {named}: the folder {Path(named).parent} does not exist; create it, or "
                "give a file in a folder that does"
            )
    reads = [("the input", request.input), ("the model", job.source.path)]
    if request.output:
        refuse_overlap(request.output, reads, "--output")
        reads.append(("--output", request.output))
    if request.skipped:
        refuse_overlap(request.skipped, reads, "--skipped")
    if not request.output and request.on_error == "skip" and request.skipped is None:
        raise ConfigError(
            "--on-error skip lists what it skips in a file: give --skipped PATH "
            "(or --output PATH, beside which it goes)"
        )


def say_format(request: CorpusRequest, fmt: str, takes_tokens: bool) -> None:
    """Say on stderr, once, how an ``--input`` file whose suffix names no format is read, where
    its lines decided it (a model that takes tokens reads CoNLL columns or one text a line), and
    how to read it otherwise."""
    if (
        request.input_format is not None
        or request.tokenized
        or not takes_tokens
        or request.input in (None, "-")
        or Path(request.input or "-").suffix.lower() in BY_SUFFIX
    ):
        return
    if fmt == "conll":
        said = (
            "CoNLL columns (a token and its tags a line, a blank line between sentences); "
            "--input-format lines reads each line as a text"
        )
    else:
        said = "one text a line; --input-format conll reads CoNLL columns"
    print(f"reading {request.input} as {said}", file=sys.stderr)


def predict_command(request: CorpusRequest, job: PredictionJob, model: Predictor) -> int:
    """Predict what ``request`` names with ``model`` (opened from ``job.source``), writing as
    ``job`` says; returns the exit status."""
    check_request(request, job)
    card = model.card
    if job.options.get("attention") and card.offers("attention"):
        refusal = model.model.attention_refusal()  # an ensemble, or pooling that weighs no token
        if refusal is not None:
            said = f"{job.source.path} holds {model.description}: {refusal}"
            raise ConfigError(f"--attention: {said}")
    if request.input:
        fmt = input_format(
            request.input, request.input_format, request.tokenized, card.takes("tokens")
        )
        if fmt in TOKEN_FORMATS and not card.takes("tokens"):
            raise ConfigError(
                f"{fmt} input gives tokens, which only a tagger takes; {job.source.path} holds "
                f"{card.description}"
            )
        given = request.input
        request, job = with_model_columns(request, job, model, fmt)
        records = read_records(given, fmt, request.text_field or "text", request.id_field)
        source = given if given != "-" else "<stdin>"
        total = count_records(given, fmt) if request.progress else None
        job = replace(job, keeps_place=True)
    else:
        say_file_like(request.texts)
        fmt, source, total = "arguments", "argument", None
        if card.output_format(job.fmt).table:  # a table's rows name their argument
            job = replace(job, keeps_place=True)
        records = iter(
            Record(value=t, what="the argument", line=n) for n, t in enumerate(request.texts, 1)
        )
    skipped = Path(request.skipped) if request.skipped else None
    output: FileOutput | StdoutOutput
    if request.output:
        path = Path(request.output)
        settings = {
            "model": str(Path(job.source.path).resolve()),
            "model_content": content_digest(job.source.path),
            "input": str(Path(request.input).resolve()) if request.input else None,
            "input_content": content_digest(request.input) if request.input else None,
            "input_format": fmt,
            "text_field": request.text_field,
            "id_field": request.id_field,
            "format": job.fmt,
            "options": job.options,
        }
        skipped = skipped or path.with_name(path.name + ".skipped.jsonl")
        output = FileOutput(path, skipped, settings, request.resume, request.overwrite)
    else:
        output = StdoutOutput(skipped)
    output.begin(model.output_head(job.fmt, request.id_field, job.options))
    if request.input:  # how the input reads, once the run is sure to go ahead
        say_format(request, fmt, card.takes("tokens"))
    progress = Progress(
        bar=bool(request.input) and request.progress,
        every=request.log_every,
        already=output.records_done,
        total=total,
    )
    try:
        counts = predict_corpus(
            records,
            job,
            output,
            model=model if request.workers == 1 else None,  # each worker opens its own
            source=source,
            on_error=request.on_error,
            workers=request.workers,
            chunk_size=request.chunk_size,
            progress=progress,
        )
    except KeyboardInterrupt:
        print(f"\ninterrupted: {interrupted(request, output)}", file=sys.stderr)
        raise
    if request.output:
        listed = f", listed in {skipped}" if counts.skipped else ""
        print(
            f"predicted {counts.predicted:,} records into {request.output} ({counts.skipped:,} "
            f"skipped{listed}; {progress.rate:,.0f} records/s)",
            file=sys.stderr,
        )
        if card.output_format(job.fmt).table and not request.id_field:
            _, id_column = model.model.config.data.table_columns()
            hint = (
                f"the input has no column {id_column!r}, the model's data.id_column"
                if id_column
                else "no id: give --id-field, or train with data.id_column"
            )
            print(
                f"{request.output}'s first column is row: each record's place in the input, "
                f"counted from 1 ({hint})",
                file=sys.stderr,
            )
    return 0


DATA_SUFFIXES = (".csv", ".tsv", ".jsonl", ".json", ".txt", ".conll", ".conllu", ".parquet")


def say_file_like(texts: list[str]) -> None:
    """A TEXT argument that names a file (or looks like a file's name) is predicted as the text
    it is, as asked; said once (with the flag that reads a file, where there is one), in case a
    file was meant."""
    for text in texts:
        if " " in text or not text.lower().endswith(DATA_SUFFIXES):
            continue
        if Path(text).is_file():
            said = f"names a file: it is predicted as a text; --input {text} reads its records"
        else:
            said = "looks like a file's name, and no such file is there: it is predicted as a text"
        print(f"the argument {text!r} {said}", file=sys.stderr)


def with_model_columns(
    request: CorpusRequest, job: PredictionJob, model: Predictor, fmt: str
) -> tuple[CorpusRequest, PredictionJob]:
    """The input's columns as the model's training table named them, where the flags name
    none and the input has them (a competition's test file has the training file's text and
    id columns): the texts from ``data.text_column`` (else ``text``), and, for a table's
    output, the ids from ``data.id_column``."""
    text_column, id_column = model.model.config.data.table_columns()
    fields = input_fields(request.input or "-", fmt) if text_column or id_column else set()
    if request.text_field is None:
        found = text_column is not None and text_column in fields
        if found and text_column != "text":
            print(
                f"texts from the input's column {text_column!r} (the model's data.text_column)",
                file=sys.stderr,
            )
        request = replace(request, text_field=text_column if found else "text")
    table = model.card.output_format(job.fmt).table
    if request.id_field is not None or not table or not id_column or id_column not in fields:
        return request, job
    print(
        f"ids from the input's column {id_column!r} (the model's data.id_column)", file=sys.stderr
    )
    return replace(request, id_field=id_column), replace(job, id_field=id_column)


def interrupted(request: CorpusRequest, output: FileOutput | StdoutOutput) -> str:
    """What an interrupted prediction leaves, in words."""
    done = f"{output.records_done:,} records predicted"
    if not request.output:
        return done
    if output.records_done == 0:
        return f"{done}; nothing was written to {request.output}"
    return f"{done}; the same command with --resume goes on from there"
