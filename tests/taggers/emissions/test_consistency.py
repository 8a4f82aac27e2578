"""Document consistency: an entity the tagger is unsure of takes the type that the same words
carry, sure, elsewhere in its document. Sure entities never change, spans never move, nothing
is added or removed, documents never mix; a retyped entity's confidence is the exact
probability of its new type; and a tagger trained with it keeps it in every outlet."""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import ClassVar

import numpy as np
import pytest
import torch

from bistack import tasks
from bistack.predictor import load_model, open_model
from bistack.taggers.emissions.confidence import spans_of
from bistack.taggers.emissions.consistency import consistent, path_of, retyped_spans
from bistack.taggers.emissions.decoding import TagDecoder
from bistack.taggers.models.tagging import Tagging
from tests.conftest import tiny_config, tiny_sentences, train_quietly, write_conll
from tests.taggers.emissions.test_confidence import LABELS, make_crf, path_probabilities, scores_of

SURE, UNSURE = 0.95, 0.55


def test_an_unsure_entity_takes_the_sure_type_of_the_same_words_in_its_document():
    sentences = [["Leeds", "won"], ["in", "Leeds"], ["Leeds", "lost"], ["in", "Leeds"]]
    entities = [
        {(0, 1, "ORG"): SURE},
        {(1, 2, "LOC"): UNSURE},  # same document as the sure ORG: retyped
        {(0, 1, "LOC"): SURE},  # another document: sure, so never changes
        {(1, 2, "ORG"): UNSURE},  # ... and the unsure one there follows it
    ]
    changed = retyped_spans(entities, sentences, ["a", "a", "b", "b"], threshold=0.7)
    assert changed == {1: [(1, 2, "ORG")], 3: [(1, 2, "LOC")]}


def test_only_sure_entities_of_exactly_the_same_words_count():
    sentences = [["Leeds", "United"], ["in", "Leeds"], ["in", "leeds"], ["at", "York"]]
    entities = [
        {(0, 2, "ORG"): SURE},  # other words ("Leeds United"): no say over "Leeds"
        {(1, 2, "LOC"): UNSURE},
        {(1, 2, "ORG"): 0.69},  # below the threshold: no say either
        {(1, 2, "LOC"): UNSURE},
    ]
    assert retyped_spans(entities, sentences, [0, 0, 0, 0], threshold=0.7) == {}
    # At the threshold an entity is sure: it votes and keeps its type.
    entities[2] = {(1, 2, "ORG"): 0.7}
    sentences[2] = ["in", "Leeds"]
    assert retyped_spans(entities, sentences, [0, 0, 0, 0], threshold=0.7) == {1: [(1, 2, "ORG")]}


def test_the_sure_votes_are_summed_per_type():
    sentences = [["Jordan"], ["Jordan"], ["Jordan"], ["Jordan"]]
    entities = [{(0, 1, "PER"): 0.8}, {(0, 1, "LOC"): 0.75}, {(0, 1, "LOC"): 0.75}]
    entities.append({(0, 1, "PER"): 0.6})
    assert retyped_spans(entities, sentences, [0] * 4, threshold=0.7) == {3: [(0, 1, "LOC")]}


@pytest.mark.parametrize("scheme", ["BIOES", "BIO", "IOB1"])
def test_a_retyped_path_reads_back_as_its_spans(scheme):
    decoder = TagDecoder(LABELS[scheme], scheme)
    spans = [(0, 1, "PER"), (1, 3, "PER"), (3, 4, "LOC")]  # IOB1: the second opens with B-
    path = path_of(spans, 5, decoder)
    assert path is not None and spans_of(path, decoder.labels) == spans


def test_a_type_the_scheme_never_learnt_leaves_the_entity_as_it_was():
    decoder = TagDecoder(LABELS["BIO"], "BIO")  # PER and LOC only
    assert path_of([(0, 1, "ORG")], 2, decoder) is None


@pytest.mark.parametrize("scheme", ["BIOES", "BIO", "IOB1"])
def test_a_retyped_entity_s_confidence_is_the_exact_probability_of_its_new_type(scheme):
    """Two sentences of one document, the same four words: the first's emissions sharp, the
    second's the same with PER and LOC swapped and flattened, so the rule retypes the second
    where the first is sure; every confidence of the changed sentence is held to brute force
    over the CRF's paths."""
    labels = LABELS[scheme]
    swapped = list(range(len(labels)))
    for number, label in enumerate(labels):
        other = label.replace("PER", "@").replace("LOC", "PER").replace("@", "LOC")
        swapped[number] = labels.index(other) if other in labels else number
    retyped = 0
    for seed in range(12):
        crf, emissions = make_crf(scheme, seed)
        decoder = TagDecoder(labels, scheme, scores_of(crf), consistency=0.9)
        sharp = emissions.numpy() * 4
        rows = np.concatenate([sharp, sharp[:, :, swapped] / 8])
        alone = replace(decoder, consistency=0.0).analyse(rows, [4, 4])
        words = [["w", "x", "y", "z"]] * 2
        after = consistent(decoder, alone, words, [0, 0], {0: rows[0], 1: rows[1]})
        for row in (0, 1):
            if after[row] is alone[row]:
                continue
            retyped += 1
            before = [span[:2] for span in alone[row].entities]
            assert [span[:2] for span in after[row].entities] == before
            paths = path_probabilities(crf, torch.from_numpy(rows[row : row + 1]))
            for position, tag in enumerate(after[row].path):
                truth = sum(p for path, p in paths.items() if path[position] == tag)
                assert after[row].token_confidence[position] == pytest.approx(truth, abs=1e-4)
            for span, confidence in after[row].entities.items():
                truth = sum(p for path, p in paths.items() if span in spans_of(path, labels))
                assert confidence == pytest.approx(truth, abs=1e-4)
    assert retyped > 0  # the seeds above retype some sentences


class LookupTagging(Tagging):
    """A tagger whose emissions come from a table: a word's scores depend on the word before
    it, so one name can be sure in one sentence and unsure in another."""

    SCORES: ClassVar[
        dict[tuple[str, str], tuple[float, float, float]]
    ] = {  # (word before, word) -> (O, S-ORG, S-LOC) scores; anything else is O
        ("beat", "Leeds"): (0.0, 6.0, 3.0),  # sure: an organisation
        ("in", "Leeds"): (0.0, 2.8, 3.0),  # unsure: a place, barely
    }

    def __init__(self, consistency: float) -> None:
        self.config = SimpleNamespace(data=SimpleNamespace(tokenizer="text"))
        self.output_scheme = "BIOES"
        self.calibration = {"consistency": consistency} if consistency else {}

    @property
    def decoder(self) -> TagDecoder:
        return self.calibrated(TagDecoder(["O", "S-ORG", "S-LOC"], "BIOES"))

    @property
    def batch_size(self) -> int:
        return 2  # documents span batches

    def emissions(self, indices: Sequence[int], sentences: Sequence[Sequence[str]]) -> np.ndarray:
        rows = np.zeros((len(sentences), max(map(len, sentences)), 3), dtype=np.float32)
        rows[:, :, 0] = 1.0
        for row, words in enumerate(sentences):
            for position, word in enumerate(words):
                before = words[position - 1] if position else ""
                rows[row, position] = self.SCORES.get((before, word), rows[row, position])
        return rows


def types_of(results) -> list[list[tuple[str, str]]]:
    return [[(e.text, e.type) for e in r.entities] for r in results]


def test_the_sentences_of_one_text_are_one_document():
    text = "Arsenal beat Leeds . They played in Leeds . It rained in Leeds ."
    assert types_of(LookupTagging(0.7).predict([text])) == [
        [("Leeds", "ORG"), ("Leeds", "ORG"), ("Leeds", "ORG")]
    ]
    assert types_of(LookupTagging(0.0).predict([text])) == [
        [("Leeds", "ORG"), ("Leeds", "LOC"), ("Leeds", "LOC")]
    ]
    # Each text its own document: the second never hears of the first.
    alone = LookupTagging(0.7).predict(["Arsenal beat Leeds .", "They played in Leeds ."])
    assert types_of(alone) == [[("Leeds", "ORG")], [("Leeds", "LOC")]]


def test_a_retyped_entity_reports_its_own_sentence_s_probability():
    [result] = LookupTagging(0.7).predict(["Arsenal beat Leeds . They played in Leeds ."])
    retyped = result.entities[1]
    scores = np.array(LookupTagging.SCORES[("in", "Leeds")])
    assert retyped.confidence == pytest.approx(np.exp(scores[1]) / np.exp(scores).sum())
    [kept] = LookupTagging(0.7).predict(
        ["Arsenal beat Leeds . They played in Leeds ."], min_confidence=0.5
    )
    assert types_of([kept]) == [[("Leeds", "ORG")]]


def test_pre_tokenised_sentences_and_scores_follow_their_documents(tmp_path):
    sentences = [["Arsenal", "beat", "Leeds"], ["played", "in", "Leeds"], ["in", "Leeds"]]
    tagger = LookupTagging(0.7)
    tags = tagger.tag_tokens(sentences, documents=[0, 0, 1])
    assert tags == [["O", "O", "S-ORG"], ["O", "O", "S-ORG"], ["O", "S-LOC"]]
    assert tagger.tag_tokens(sentences)[1] == ["O", "O", "S-LOC"]  # each sentence alone
    results = tagger.predict_tokens(sentences, documents=[0, 0, 1])
    assert types_of(results) == [[("Leeds", "ORG")], [("Leeds", "ORG")], [("Leeds", "LOC")]]


@pytest.fixture(scope="module")
def consistent_tagger(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small tagger trained with document consistency, on a dev set whose annotation leaves
    out a place now and then, so the confidences have a temperature to fit first."""
    root = tmp_path_factory.mktemp("consistent-tagger")
    train = write_conll(root / "train.txt", tiny_sentences(120, seed=0))
    dev = [  # every fifth sentence's place not annotated: some dev entities wrong
        [(w, "O" if t == "I-LOC" and n % 5 == 0 else t) for w, t in sentence]
        for n, sentence in enumerate(tiny_sentences(40, seed=1))
    ]
    config = tiny_config(train, write_conll(root / "dev.txt", dev))
    config["head"] = {"document_consistency": 0.8}
    return train_quietly(tasks.config_from_dict(config), root / "run")


def test_a_trained_tagger_keeps_the_rule_and_its_dev_measure(consistent_tagger):
    calibration = json.loads((consistent_tagger / "config.json").read_text())["calibration"]
    assert calibration["consistency"] == 0.8
    measured = calibration["consistency_dev"]
    assert 0 <= measured["right_before"] <= measured["retyped"]
    assert 0 <= measured["right_after"] <= measured["retyped"]
    # Training scored dev each sentence alone (the rule never steers early stopping): its
    # best epoch's F1 is the F1 before the rule.
    with (consistent_tagger.parent / "metrics.csv").open() as handle:
        best = max(float(row["dev_f1"]) for row in csv.DictReader(handle))
    assert measured["f1_before"] == pytest.approx(best, abs=1e-6)
    # Measured over the calibrated confidences: before the rule, the temperature's own error.
    assert measured["ece_before"] == pytest.approx(calibration["ece_after"], abs=1e-9)
    assert 0 <= measured["ece_after"] <= 1
    tagger = load_model(consistent_tagger)
    assert tagger.decoder.consistency == 0.8
    assert tagger.describe()["document_consistency"] == 0.8
    card = (consistent_tagger / "README.md").read_text()
    assert "**Document consistency** at 0.8" in card
    # What it measured is what `bistack evaluate` scores.
    assert tagger.evaluate(tagger.config.data.dev).micro.f1 == pytest.approx(
        measured["f1_after"], abs=1e-6
    )


def test_an_exported_tagger_applies_the_rule_as_the_trained_one_does(consistent_tagger, tmp_path):
    pytest.importorskip("onnxruntime", reason="exported models run on onnxruntime")
    from bistack.cli import main

    tagger = load_model(consistent_tagger)
    assert main(["export", str(consistent_tagger), "--output", str(tmp_path / "onnx")]) == 0
    exported = open_model(tmp_path / "onnx").model
    assert exported.decoder.consistency == 0.8
    text = ["John visited Paris yesterday . Mary met John in Paris . Paris is big ."]
    mine, theirs = tagger.predict(text), exported.predict(text)
    assert types_of(mine) == types_of(theirs)
    for a, b in zip(mine[0].entities, theirs[0].entities, strict=True):
        assert a.confidence == pytest.approx(b.confidence, abs=1e-5)


def test_the_rule_is_off_unless_asked_for(small_tagger):
    assert load_model(small_tagger).decoder.consistency == 0.0
    decoder = TagDecoder(["O", "S-X"], "BIOES")
    assert "consistency" not in decoder.to_json()
    assert TagDecoder.from_json(replace(decoder, consistency=0.7).to_json()).consistency == 0.7
