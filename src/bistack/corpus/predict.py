"""Corpus prediction: records read lazily, predicted a chunk at a time, written in input order.

A chunk is predicted in this process, or by ``workers`` processes that each load the model
once and run one torch thread (two processes of two threads each on two cores run 5-10x
slower than one: threads must not outnumber cores). Within a chunk the model batches texts by
length, so a chunk of 1,024 records costs about what batch prediction of them costs. At most
two chunks per worker are in flight, and the reader runs at most two chunks ahead, so memory
does not grow with the input.

Each chunk goes through the opened model's own per-record prediction
(``bistack.predictor.Predictor.predict_records``, where a chunk that fails is retried one record
at a time, so one bad record never costs the others). A record that cannot be read, or that the
model refuses, is skipped (listed in the skipped-records file with its line or row) or stops
the run, as ``on_error`` says.
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

from bistack.errors import BistackError, DataError
from bistack.inputs import Record
from bistack.predictor import ModelSource, Outcome, Predictor
from bistack.system.processes import die_with

CHUNK_SIZE = 1024
IDLE_SECONDS = 0.05  # a pipe that has said nothing for this long gets what came so far


@dataclass(frozen=True)
class PredictionJob:
    """What to predict with and how to write it: the model (``source``: its directory, device,
    threads and precision), the output format (``jsonl``, ``conll``...) and the options its
    ``predict`` takes (as its card checked them); ``keeps_place``: records of an --input file carry
    their place (line, row) and id (``id_field``) into their predictions."""

    source: ModelSource
    fmt: str
    options: dict[str, Any] = field(default_factory=dict)
    keeps_place: bool = False
    id_field: str | None = None

    def predict(self, model: Predictor, records: list[Record]) -> list[Outcome]:
        return model.predict_records(
            records, self.fmt, self.options, self.keeps_place, self.id_field
        )


class Output(Protocol):
    records_done: int

    def write(self, predictions: str, skipped: str, records: int) -> None: ...
    def finish(self) -> None: ...
    def stop(self) -> None: ...


@dataclass
class Counts:
    predicted: int = 0
    skipped: int = 0


def predict_corpus(
    records: Iterable[Record],
    job: PredictionJob,
    output: Output,
    *,
    model: Predictor | None = None,
    source: str,
    on_error: str = "stop",
    workers: int = 1,
    chunk_size: int = CHUNK_SIZE,
    progress: Progress | None = None,
) -> Counts:
    """Predict every record after the ``output.records_done`` already written, with ``model``
    (opened from ``job.source`` when not given) or ``workers`` processes; a record that fails stops
    the run with a DataError naming it (``on_error="stop"``, after the records before it are
    written) or is listed in the skipped-records file (``"skip"``)."""
    import json

    counts = Counts()
    chunks = chunked(records, chunk_size, skip=output.records_done)
    if workers == 1:
        predictor = model if model is not None else job.source.open()
        results: Iterator[tuple[list[Record], list[Outcome]]] = (
            (chunk, job.predict(predictor, chunk)) for chunk in chunks if chunk
        )
    else:
        results = pooled(chunks, job, workers)
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
    except BaseException:
        output.stop()
        raise
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


def _start_worker(job: PredictionJob, parent: int) -> None:
    """Open the model once in a worker process, with one thread for torch or onnxruntime.
    torch is set only where opening the model imported it (an exported model's worker runs
    without it, and without its memory). The worker ends with its run (``parent``), however
    that run ends: killed too, it leaves no worker behind holding a model's memory."""
    global _WORKER_MODEL
    die_with(parent)
    _WORKER_MODEL = replace(job.source, threads=1).open()
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)


def _predict_in_worker(job: PredictionJob, records: list[Record]) -> list[Outcome]:
    return job.predict(_WORKER_MODEL, records)


def pooled(
    chunks: Iterator[list[Record]], job: PredictionJob, workers: int
) -> Iterator[tuple[list[Record], list[Outcome]]]:
    """Chunks predicted by ``workers`` processes (spawned: no forked torch state), in order,
    at most two per worker in flight; an idle source drains what is done."""
    import multiprocessing
    from concurrent.futures import Future, ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(workers, context, _start_worker, (job, os.getpid())) as pool:
        pending: deque[tuple[list[Record], Future[list[Outcome]]]] = deque()
        try:
            for chunk in chunks:
                if chunk:
                    pending.append((chunk, pool.submit(_predict_in_worker, job, chunk)))
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
            print(
                f"predicted {self.already + self.done:,} records so far ({rate:,.0f}/s)",
                file=sys.stderr,
                flush=True,
            )

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()

    @property
    def rate(self) -> float:
        return self.done / max(time.monotonic() - self.started, 1e-9)
