"""Corpus prediction: records read lazily, predicted a chunk at a time, written in input order.

A chunk is predicted in this process, or by ``workers`` processes that each load the model
once and run one torch thread (two processes of two threads each on two cores run 5-10x
slower than one: threads must not outnumber cores). Within a chunk the model batches texts by
length, so a chunk of 1,024 records costs about what batch prediction of them costs. At most
two chunks per worker are in flight, and the reader runs at most two chunks ahead, so memory
does not grow with the input.

A record that cannot be read, or that the model refuses, is skipped (listed in the
skipped-records file with its line or row) or stops the run, as ``on_error`` says; a chunk that
fails is retried one record at a time, so one bad record never costs the others.
"""

from __future__ import annotations

import os
import queue
import sys
import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from bistack.corpus.sources import Record
from bistack.errors import BistackError, DataError
from bistack.files.formats import FORMATS
from bistack.inputs import Input, described, unicode_problem
from bistack.models.precision import InferencePrecision, autocast_for
from bistack.models.spelling_cache import each_batch_alone
from bistack.system.processes import die_with
from bistack.tasks import Opened, open_model

CHUNK_SIZE = 1024
IDLE_SECONDS = 0.05  # a pipe that has said nothing for this long gets what came so far


@dataclass(frozen=True)
class Spec:
    """What to open and how to predict: the model directory (PyTorch or exported), the output
    format (``jsonl``, ``conll``...), the device, the options its ``predict`` takes, the
    threads of an exported model's session (None: one per core), and the precision of a PyTorch
    model's passes."""

    model: str
    fmt: str
    device: str = "cpu"
    options: dict[str, Any] = field(default_factory=dict)
    threads: int | None = None
    # Records of an --input file carry their place (line, row) and id into their predictions.
    placed: bool = False
    precision: InferencePrecision = "32"  # a PyTorch model's forward passes (autocast)


@dataclass(frozen=True)
class Failed:
    """Why a record has no prediction."""

    reason: str


Outcome = str | Failed  # a record's formatted prediction, or why it has none


class Output(Protocol):
    records_done: int

    def write(self, predictions: str, skipped: str, records: int) -> None: ...
    def finish(self) -> None: ...


@dataclass
class Counts:
    predicted: int = 0
    skipped: int = 0


def open_spec(spec: Spec) -> Opened:
    """The model ``spec`` names, opened once per process."""
    return open_model(spec.model, spec.device, spec.threads)


def predict_records(opened: Opened, spec: Spec, records: list[Record]) -> list[Outcome]:
    """Each record's formatted prediction, or why it has none, in order. Records are predicted
    together by the input of the model's card that takes them (texts, token lists...), and
    from this chunk alone: a resumed run writes each chunk's bytes as the first run did."""
    with each_batch_alone(), autocast_for(spec.device, spec.precision):
        return _predict_records(opened, spec, records)


def _predict_records(opened: Opened, spec: Spec, records: list[Record]) -> list[Outcome]:
    write = FORMATS[spec.fmt]
    outcomes: list[Outcome] = [Failed(r.error) if r.error is not None else "" for r in records]
    groups: dict[str, tuple[Input, list[int]]] = {}
    values: dict[int, Any] = {}  # each record's value as its input reads it
    for index, record in enumerate(records):
        if record.error is not None:
            continue
        chosen = opened.card.input_of(record.value)
        if chosen is None:
            outcomes[index] = Failed(refusal(record, opened))
            continue
        problem = unicode_problem(record.value)
        if problem is not None:
            outcomes[index] = Failed(f"{record.what}: {problem}")
            continue
        try:
            values[index] = chosen.read(record.value)
        except ValueError as error:
            outcomes[index] = Failed(str(error))
            continue
        groups.setdefault(chosen.name, (chosen, []))[1].append(index)
    for chosen, indices in groups.values():
        try:
            predictions = chosen.predict(opened.model, [values[i] for i in indices], **spec.options)
            for i, prediction in zip(indices, predictions, strict=True):
                outcomes[i] = write(prediction, place(records[i], spec))
        except (BistackError, ValueError, RuntimeError):
            for i in indices:  # find the record at fault
                try:
                    one = chosen.predict(opened.model, [values[i]], **spec.options)
                    outcomes[i] = write(one[0], place(records[i], spec))
                except (BistackError, ValueError, RuntimeError) as error:
                    outcomes[i] = Failed(str(error) or type(error).__name__)
    return outcomes


def place(record: Record, spec: Spec) -> dict[str, Any]:
    """What a prediction carries of its record: its line or row and its id (--id-field), for
    records of an --input file."""
    return {**record.where, **record.ids} if spec.placed else {}


def refusal(record: Record, opened: Opened) -> str:
    """Why a record's value is not one the model takes."""
    value = record.value
    shown = "null" if value is None else type(value).__name__
    if opened.card.takes("tokens") or not isinstance(value, list):
        return f"{record.what} is {shown}, not {described(opened.card.inputs)}"
    return f"{record.what} is a list of tokens, which only a tagger takes; give a text"


def predict_corpus(
    records: Iterable[Record],
    spec: Spec,
    output: Output,
    *,
    model: Any = None,
    source: str,
    on_error: str = "stop",
    workers: int = 1,
    chunk_size: int = CHUNK_SIZE,
    progress: Progress | None = None,
) -> Counts:
    """Predict every record after the ``output.records_done`` already written, with ``model``
    (loaded from ``spec`` when not given) or ``workers`` processes; a record that fails stops
    the run with a DataError naming it (``on_error="stop"``, after the records before it are
    written) or is listed in the skipped-records file (``"skip"``)."""
    import json

    counts = Counts()
    chunks = chunked(records, chunk_size, skip=output.records_done)
    if workers == 1:
        model = model if model is not None else open_spec(spec)
        results: Iterator[tuple[list[Record], list[Outcome]]] = (
            (chunk, predict_records(model, spec, chunk)) for chunk in chunks if chunk
        )
    else:
        results = pooled(chunks, spec, workers)
    try:
        for chunk, outcomes in results:
            written, skipped = [], []
            for count, (record, outcome) in enumerate(zip(chunk, outcomes, strict=True)):
                if isinstance(outcome, str):
                    written.append(outcome)
                    counts.predicted += 1
                elif on_error == "skip":
                    line = {"input": source, **record.where, **record.ids, "error": outcome.reason}
                    skipped.append(json.dumps(line, ensure_ascii=False) + "\n")
                    counts.skipped += 1
                else:
                    output.write("".join(written), "".join(skipped), count)
                    raise DataError(source, outcome.reason, record.line, record.row)
            output.write("".join(written), "".join(skipped), len(chunk))
            if progress is not None:
                progress.update(len(chunk))
    finally:
        if progress is not None:
            progress.close()
    output.finish()
    return counts


_END = object()


def chunked(records: Iterable[Record], size: int, skip: int = 0) -> Iterator[list[Record]]:
    """Lists of up to ``size`` records, after the first ``skip``. The records are read on a
    thread at most two chunks ahead; when the source has said nothing for a moment (a pipe
    waiting for its writer) what came so far is a chunk, and an empty list says "idle"."""
    ahead: queue.Queue[Any] = queue.Queue(maxsize=2 * size)

    def read() -> None:
        try:
            for record in records:
                ahead.put(record)
        except BaseException as error:
            ahead.put(error)
        ahead.put(_END)

    threading.Thread(target=read, daemon=True, name="bistack-reader").start()
    chunk: list[Record] = []
    while True:
        try:
            item = ahead.get(timeout=IDLE_SECONDS)
        except queue.Empty:
            yield chunk
            chunk = []
            continue
        if item is _END:
            break
        if isinstance(item, BaseException):
            raise item
        if skip:
            skip -= 1
            continue
        chunk.append(item)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


_WORKER_MODEL: Any = None


def _start_worker(spec: Spec, parent: int) -> None:
    """Open the model once in a worker process, with one thread for torch or onnxruntime.
    torch is set only where opening the model imported it (an exported model's worker runs
    without it, and without its memory). The worker ends with its run (``parent``), however
    that run ends: killed too, it leaves no worker behind holding a model's memory."""
    global _WORKER_MODEL
    die_with(parent)
    _WORKER_MODEL = open_spec(replace(spec, threads=1))
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)


def _predict_in_worker(spec: Spec, records: list[Record]) -> list[Outcome]:
    return predict_records(_WORKER_MODEL, spec, records)


def pooled(
    chunks: Iterator[list[Record]], spec: Spec, workers: int
) -> Iterator[tuple[list[Record], list[Outcome]]]:
    """Chunks predicted by ``workers`` processes (spawned: no forked torch state), in order,
    at most two per worker in flight; an idle source drains what is done."""
    import multiprocessing
    from concurrent.futures import Future, ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(workers, context, _start_worker, (spec, os.getpid())) as pool:
        pending: deque[tuple[list[Record], Future[list[Outcome]]]] = deque()
        try:
            for chunk in chunks:
                if chunk:
                    pending.append((chunk, pool.submit(_predict_in_worker, spec, chunk)))
                while pending and (
                    len(pending) >= 2 * workers or not chunk or pending[0][1].done()
                ):
                    done, future = pending.popleft()
                    yield done, future.result()
            while pending:
                done, future = pending.popleft()
                yield done, future.result()
        except BrokenProcessPool:
            raise BistackError(
                "a worker process died (out of memory, or killed); the records before its "
                "chunk are written, and --resume continues an --output file from there"
            ) from None


class Progress:
    """Records per second: a bar on a terminal, else a line on stderr every ``every`` seconds
    at most (a log shows the run is alive without filling up)."""

    def __init__(
        self, bar: bool, every: float = 30.0, already: int = 0, total: int | None = None
    ) -> None:
        self.started = self.said = time.monotonic()
        self.every, self.done, self.already = every, 0, already
        self.bar = None
        if bar:
            from tqdm import tqdm

            self.bar = tqdm(
                desc="predicting", unit=" records", initial=already, total=total, leave=False
            )

    def update(self, records: int) -> None:
        self.done += records
        if self.bar is not None:
            self.bar.update(records)
            return
        now = time.monotonic()
        if now - self.said >= self.every:
            self.said = now
            rate = self.done / (now - self.started)
            print(f"predicted {self.already + self.done:,} records ({rate:,.0f}/s)",
                  file=sys.stderr, flush=True)  # fmt: skip

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()

    @property
    def rate(self) -> float:
        return self.done / max(time.monotonic() - self.started, 1e-9)
