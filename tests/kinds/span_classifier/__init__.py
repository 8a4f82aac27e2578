"""Span classification, a kind bistack does not ship: a text with one character span marked,
labelled by a class (is "Paris" in "I love [Paris] in May" a place or a person?).

Everything the kind is lives in this folder: its input (a text with the span in brackets, or
``{"text", "start", "end"}``), config, network, the model a user loads, its recipe and its card.
:func:`register` adds it to the task table with one call; the command line, the server and
corpus prediction then work for it without an edit anywhere else.
"""

from bistack import tasks
from bistack.cards import Card
from tests.kinds.span_classifier.kind import CARD


def register() -> Card:
    """Add the kind to the task table (once per process)."""
    return tasks.register(CARD)


def unregister() -> None:
    del tasks.TASKS[CARD.kind]
