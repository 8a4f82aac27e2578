"""What the server serves: a model opened at the one door (``bistack.predictor.open_model``: a
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
from bistack.models.precision import InferencePrecision
from bistack.predictor import Predictor, open_model, refuse_unmet_precision
from bistack.serve.settings import ServeSettings


@dataclass(frozen=True)
class ServedModel:
    """A model behind the door and what the server says of it (``GET /info``)."""

    opened: Predictor
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
        """The options a served JSON record carries."""
        return tuple(o for o in self.opened.card.predict_options if o.carried_by("jsonl"))

    def checked_options(self, options: dict[str, Any]) -> dict[str, Any]:
        """``options`` as its card checks them for a JSON record (``bistack.cards``)."""
        return self.opened.card.checked_request("jsonl", options, spelled=str)[1]

    @property
    def samples(self) -> bool:
        return self.opened.card.samples

    def predict(self, texts: Sequence[Any], options: dict[str, Any]) -> list[dict[str, Any]]:
        """The records ``bistack predict --format jsonl`` writes, one per input."""
        return [p.to_json() for p in self.opened.predict(list(texts), **options)]

    @property
    def sample_options(self) -> tuple[PredictOption, ...]:
        return self.opened.card.sample_options

    def checked_sample(self, options: dict[str, Any]) -> dict[str, Any]:
        """``options`` as its card checks sampling's (RequestError out of range)."""
        return self.opened.card.checked_sample(options)

    def sample(self, prompt: str, options: dict[str, Any]) -> str:
        """A continuation of ``prompt``, its tokens joined by spaces; ``options`` are the
        card's sample options (checked there)."""
        return " ".join(self.opened.sample(prompt, **options))

    def warm(self) -> None:
        """One pass on the card's example input (a one-token sample for a language model)."""
        if self.samples:
            self.sample("", {"tokens": 1, "seed": 0})
        else:
            self.predict([self.opened.card.inputs[0].example], {})


def load_served(
    path: str | Path,
    threads: int | None = None,
    device: str = "cpu",
    precision: InferencePrecision | None = None,
) -> ServedModel:
    """Open ``path`` as the server will run it (on ``device``, at ``precision``: None, as
    trained), and run it once, so that a model that cannot predict fails here, before the
    port is bound."""
    started = time.perf_counter()
    opened = open_model(path, device, threads, precision or "32")
    refuse_unmet_precision(opened, precision)
    served = ServedModel(opened, opened.info())
    served.warm()
    return replace(served, load_seconds=time.perf_counter() - started)


def served_from(settings: ServeSettings) -> ServedModel:
    """:func:`load_served` of the model, threads, device and precision ``settings`` name."""
    return load_served(settings.model, settings.threads, settings.device, settings.precision)


def checked_apart(settings: ServeSettings) -> str:
    """The description of the model ``settings`` name, after ``load_served`` opened and ran it in a
    spawned process that then exits: a parent that serves it from other processes (its workers,
    Ray replicas) learns that it loads, and what it is, without holding a copy of it (and of
    torch) for as long as it serves. The error that stops the model is raised here. A process
    and a pipe, not a pool: a pool's queues hold named semaphores that the parent would leave
    behind when a signal ends it."""
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    answers, sender = context.Pipe(duplex=False)
    checker = context.Process(target=_check_into, args=(settings, sender))
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
            f"{settings.model}: the process that loads the model ended without an answer "
            f"(exit code {checker.exitcode})"
        )
    problem, description = answer
    if problem:
        raise BistackError(problem)
    return description


def _check_into(settings: ServeSettings, answer: Any) -> None:
    """In the checking process: ``_checked``'s answer, sent down the pipe."""
    answer.send(_checked(settings))
    answer.close()


def _checked(settings: ServeSettings) -> tuple[str, str]:
    """In the checking process: (the error, "") or ("", the description)."""
    try:
        return "", served_from(settings).description
    except BistackError as error:  # its message is what the user reads, whatever its class
        return str(error), ""
