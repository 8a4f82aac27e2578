"""What the server serves: a model opened by the task table (``bistack.tasks.open_model``: a
model directory on PyTorch or an exported one on onnxruntime, alike), with what its card
offers."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from bistack.cards import PredictOption
from bistack.errors import BistackError
from bistack.tasks import Opened, open_model


@dataclass(frozen=True)
class Served:
    """An opened model and what the server says of it (``GET /info``)."""

    opened: Opened
    info: dict[str, Any]
    load_seconds: float = 0.0  # opening the model and its first pass

    @property
    def description(self) -> str:
        return self.opened.description

    @property
    def view(self) -> str:
        return self.opened.card.view

    @property
    def options(self) -> tuple[PredictOption, ...]:
        return self.opened.card.predict_options

    def checked_options(self, options: dict[str, Any]) -> dict[str, Any]:
        """``options`` as its card checks them for a JSON record (``bistack.cards``)."""
        return self.opened.card.checked_request("jsonl", options, spelled=str)[1]

    @property
    def samples(self) -> bool:
        return self.opened.card.samples

    def predict(self, texts: Sequence[Any], options: dict[str, Any]) -> list[dict[str, Any]]:
        """The records ``bistack predict --format jsonl`` writes, one per input."""
        return [p.to_json() for p in self.opened.predict(list(texts), **options)]

    def sample(self, prompt: str, tokens: int, temperature: float, seed: int | None) -> str:
        continuation = self.opened.model.sample(prompt, tokens, temperature, seed)
        return " ".join(continuation)

    def warm(self) -> None:
        """One pass on the card's example input (a one-token sample for a language model)."""
        if self.samples:
            self.sample("", 1, 1.0, 0)
        else:
            self.predict([self.opened.card.inputs[0].example], {})


def load_served(path: str | Path, threads: int | None = None) -> Served:
    """Open ``path`` as the server will run it, and run it once, so that a model that cannot
    predict fails here, before the port is bound."""
    started = time.perf_counter()
    opened = open_model(path, threads=threads)
    served = Served(opened, opened.info())
    served.warm()
    return replace(served, load_seconds=time.perf_counter() - started)


def checked_apart(path: str | Path, threads: int) -> str:
    """The description of the model at ``path``, after ``load_served`` opened and ran it in a
    spawned process that then exits: a parent that serves it from other processes (its workers,
    Ray replicas) learns that it loads, and what it is, without holding a copy of it (and of
    torch) for as long as it serves. The error that stops the model is raised here. A process
    and a pipe, not a pool: a pool's queues hold named semaphores that the parent would leave
    behind when a signal ends it."""
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    answers, sender = context.Pipe(duplex=False)
    checker = context.Process(target=_check_into, args=(str(path), threads, sender))
    checker.start()
    sender.close()  # the child holds the only writing end: its exit ends the pipe
    try:
        answer = answers.recv()
    except EOFError:
        answer = None
    finally:
        answers.close()
        checker.join()
    if answer is None:
        raise BistackError(
            f"{path}: the process that loads the model ended without an answer "
            f"(exit code {checker.exitcode})"
        )
    problem, description = answer
    if problem:
        raise BistackError(problem)
    return description


def _check_into(path: str, threads: int, answer: Any) -> None:
    """In the checking process: ``_checked``'s answer, sent down the pipe."""
    answer.send(_checked(path, threads))
    answer.close()


def _checked(path: str, threads: int) -> tuple[str, str]:
    """In the checking process: (the error, "") or ("", the description)."""
    try:
        return "", load_served(path, threads).description
    except BistackError as error:  # its message is what the user reads, whatever its class
        return str(error), ""
