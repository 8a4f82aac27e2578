"""The dev score a run reports at each epoch is the score of the weights it has then: the best
one in ``metrics.csv`` is what the saved model scores when loaded."""

import csv
import random

from bistack.api import Tagger
from bistack.tasks import config_from_dict
from tests.conftest import tiny_config, train_quietly, write_conll

NAMES = ["John", "Mary", "Paul", "Anna", "Peter", "Susan", "Oskar", "Ines", "Bram", "Dolores"]
PLACES = ["Paris", "London", "Berlin", "Rome", "Oslo", "Lima", "Quito", "Hanoi", "Accra"]


def sentences(count: int, seed: int, names: list[str], places: list[str]) -> list:
    """ "NAME met NAME in PLACE ." with IOB1 tags; names and places the caller chooses, so dev
    can hold words training never saw (only their characters tell them)."""
    rng = random.Random(seed)
    made = []
    for _ in range(count):
        first, second, place = rng.choice(names), rng.choice(names), rng.choice(places)
        tokens = [(first, "I-PER"), ("met", "O"), (second, "I-PER"), ("in", "O")]
        made.append([*tokens, (place, "I-LOC"), (".", "O")])
    return made


def test_the_best_dev_score_reported_is_the_saved_models_score(tmp_path):
    train = write_conll(tmp_path / "train.txt", sentences(60, 0, NAMES[:5], PLACES[:5]))
    # Dev names and places are mostly unseen words: the characters decide their tags, so a
    # dev pass that read stale character encodings would score other weights than these.
    dev = write_conll(tmp_path / "dev.txt", sentences(40, 1, NAMES[3:], PLACES[3:]))
    config = tiny_config(
        train, dev, train={"max_epochs": 6, "patience": 6, "seed": 3}, optimizer={"lr": 0.02}
    )
    model_dir = train_quietly(config_from_dict(config), tmp_path / "run")
    rows = list(csv.DictReader((tmp_path / "run" / "metrics.csv").open()))
    scores = [float(row["dev_f1"]) for row in rows]
    assert len(set(scores)) > 1  # the weights, and so the score, moved between epochs
    reloaded = Tagger.load(model_dir).evaluate(dev).micro.f1
    assert abs(max(scores) - reloaded) < 1e-6
