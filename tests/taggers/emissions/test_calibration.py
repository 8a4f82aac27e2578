"""A tagger's temperature, fitted on dev after training: it never moves a predicted tag or the
order of the k best, its confidences are the brute-force probabilities at that temperature, the
fit finds the temperature data were drawn at, and a trained model keeps it in every outlet
(PyTorch, exported, the server)."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from bistack import tasks
from bistack.crf import CRF
from bistack.predictor import load_model, open_model
from bistack.schemes import allowed_transitions
from bistack.taggers.emissions.calibration import DevEmissions, fit_temperature
from bistack.taggers.emissions.confidence import spans_of
from bistack.taggers.emissions.decoding import TagDecoder
from bistack.taggers.models.tagging import EmissionBatch
from tests.conftest import tiny_config, tiny_sentences, train_quietly, write_conll
from tests.taggers.emissions.test_confidence import LABELS, make_crf, path_probabilities, scores_of

TEMPERATURES = (0.3, 1.7, 6.0)


def crf_decoder(scheme: str, seed: int) -> tuple[TagDecoder, CRF]:
    crf, _ = make_crf(scheme, seed)
    return TagDecoder(LABELS[scheme], scheme, scores_of(crf)), crf


@pytest.mark.parametrize("scheme", ["BIOES", "BIO"])
def test_the_temperature_leaves_every_path_and_the_k_best_order_unchanged(scheme):
    decoder, _ = crf_decoder(scheme, 0)
    generator = np.random.default_rng(0)
    emissions = (generator.normal(size=(64, 9, len(decoder.labels))) * 3).astype(np.float32)
    lengths = generator.integers(1, 10, size=64)
    plain = decoder.analyse(emissions, lengths, top_k=4)
    for temperature in TEMPERATURES:
        tempered = replace(decoder, temperature=temperature).analyse(emissions, lengths, top_k=4)
        for before, after in zip(plain, tempered, strict=True):
            assert after.path == before.path
            assert [p for p, _ in after.alternatives] == [p for p, _ in before.alternatives]
            assert list(after.entities) == list(before.entities)
    # ... and only the confidences move: softer above 1, sharper below.
    sure = [max(a.token_confidence) for a in plain]
    soft = replace(decoder, temperature=6.0).analyse(emissions, lengths)
    assert np.mean([max(a.token_confidence) for a in soft]) < np.mean(sure)


def test_a_sharp_temperature_never_buys_a_forbidden_move():
    """Emissions in the hundreds divided by a temperature near its lower bound outweigh the
    finite score of a forbidden move unless it is sharpened alike: ``O I-PER`` was decoded."""
    decoder = TagDecoder.constrained(["O", "B-PER", "I-PER"], "BIO")
    emissions = np.array([[[600.0, 0.0, 0.0], [0.0, -50.0, 600.0]]], dtype=np.float32)
    for temperature in (1.0, 0.06, 15.0):
        [analysis] = replace(decoder, temperature=temperature).analyse(emissions, [2], top_k=2)
        assert analysis.path == [0, 0]
        assert [path for path, _ in analysis.alternatives] == [[0, 0], [1, 2]]


@pytest.mark.parametrize("scheme", ["BIOES", "BIO", "IOB1"])
def test_tempered_entity_confidences_are_the_brute_force_probabilities(scheme):
    for seed in range(4):
        decoder, crf = crf_decoder(scheme, seed)
        emissions = torch.randn(1, 4, len(decoder.labels)) * 2
        for temperature in TEMPERATURES:
            with torch.no_grad():  # every path's score divided by T, enumerated
                hot = CRF(len(decoder.labels), allowed_transitions(scheme, decoder.labels))
                hot.load_state_dict({k: v / temperature for k, v in crf.state_dict().items()})
            paths = path_probabilities(hot, emissions / temperature)
            [analysis] = replace(decoder, temperature=temperature).analyse(emissions.numpy(), [4])
            for span, confidence in analysis.entities.items():
                truth = sum(
                    p for path, p in paths.items() if span in spans_of(path, decoder.labels)
                )
                assert confidence == pytest.approx(truth, abs=1e-4)


def test_the_fit_finds_the_temperature_the_outcomes_were_drawn_at():
    """One-token sentences whose entity is real with probability sigmoid(margin / 2.5): the
    tagger says sigmoid(margin), 2.5 times too sure; the fit should say about 2.5."""
    decoder = TagDecoder(["O", "B-X"], "BIO")
    generator = np.random.default_rng(1)
    margins = generator.uniform(0.5, 9.0, size=6000)  # B-X over O: an entity predicted each time
    emissions = np.stack([np.zeros_like(margins), margins], axis=-1)[:, None, :].astype(np.float32)
    real = generator.random(6000) < 1 / (1 + np.exp(-margins / 2.5))
    dev = DevEmissions(
        [EmissionBatch(list(range(6000)), [1] * 6000, emissions)],
        [{(0, 1, "X")} if r else set() for r in real],
    )
    assert fit_temperature(dev, decoder, None) == pytest.approx(2.5, rel=0.1)
    half = set(range(3000))
    assert fit_temperature(dev, decoder, half) == pytest.approx(2.5, rel=0.15)


def test_the_fit_copes_with_the_large_float16_emissions_of_a_16_true_tagger():
    """Trained in ``16-true``, a tagger's emissions can run to thousands, a token's every tag
    below the score of a forbidden move (-1e4) included (or pass it divided by the small
    temperatures the search tries). The fit ends on a temperature, every confidence a
    probability (it once ended in ``OverflowError``, after the model was saved)."""
    decoder, _ = crf_decoder("BIO", 0)
    generator = np.random.default_rng(2)
    emissions = generator.normal(size=(32, 6, len(decoder.labels))) * 300
    emissions[:, 2] = emissions[:, 2] / 10 - 12000  # every tag of one token far below
    emissions = emissions.astype(np.float16).astype(np.float32)  # as the model hands them over
    analyses = decoder.analyse(emissions, [6] * 32)
    predicted = [set(a.entities) for a in analyses]
    gold = [spans if i % 3 else set() for i, spans in enumerate(predicted)]  # a third wrong
    dev = DevEmissions([EmissionBatch(list(range(32)), [6] * 32, emissions)], gold)
    temperature = fit_temperature(dev, decoder, None)
    assert math.isfinite(temperature)
    confidences, _ = dev.outcomes(replace(decoder, temperature=temperature))
    assert confidences and all(0.0 <= c <= 1.0 for c in confidences)


@pytest.fixture(scope="module")
def noisy_dev_tagger(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small tagger whose dev annotation disagrees with it now and then (every fifth
    sentence's person is annotated a place), so dev has right and wrong entities to fit on."""
    root = tmp_path_factory.mktemp("calibrated-tagger")
    train = write_conll(root / "train.txt", tiny_sentences(120, seed=0))
    dev = [
        [(w, "I-LOC" if t == "I-PER" and n % 5 == 0 else t) for w, t in sentence]
        for n, sentence in enumerate(tiny_sentences(40, seed=1))
    ]
    config = tasks.config_from_dict(tiny_config(train, write_conll(root / "dev.txt", dev)))
    return train_quietly(config, root / "run")


def test_a_tagger_whose_dev_entities_are_all_right_keeps_its_confidences(small_tagger):
    assert "calibration" not in json.loads((small_tagger / "config.json").read_text())
    assert load_model(small_tagger).decoder.temperature == 1.0


def test_a_trained_tagger_keeps_its_temperature_in_every_outlet(noisy_dev_tagger, tmp_path):
    calibration = json.loads((noisy_dev_tagger / "config.json").read_text())["calibration"]
    assert math.isfinite(calibration["temperature"]) and calibration["temperature"] > 0
    assert calibration["entities"] > 0 and len(calibration["held_out"]) == 2
    tagger = load_model(noisy_dev_tagger)
    assert tagger.decoder.temperature == calibration["temperature"]
    text = ["John visited Paris yesterday with Mary ."]
    [calibrated] = tagger.predict(text)
    tagger.calibration = {}  # as trained: other confidences, the same entities
    [raw] = tagger.predict(text)
    assert [e.text for e in calibrated.entities] == [e.text for e in raw.entities]
    if calibration["temperature"] != pytest.approx(1.0, abs=1e-3) and raw.entities:
        assert [e.confidence for e in calibrated.entities] != [e.confidence for e in raw.entities]
    pytest.importorskip("onnxruntime", reason="exported models run on onnxruntime")
    from bistack.cli import main

    assert main(["export", str(noisy_dev_tagger), "--output", str(tmp_path / "onnx")]) == 0
    exported = open_model(tmp_path / "onnx").model
    assert exported.decoder.temperature == pytest.approx(calibration["temperature"])
    [got] = exported.predict(text)
    assert [e.text for e in got.entities] == [e.text for e in calibrated.entities]
    for mine, theirs in zip(got.entities, calibrated.entities, strict=True):
        assert mine.confidence == pytest.approx(theirs.confidence, abs=1e-5)


@pytest.mark.parametrize(
    ("temperature", "held_out", "kept", "said"),
    [
        (1.7, (0.10, 0.05), True, "temperature 1.700 fitted on dev"),
        (1.7, (0.05, 0.09), False, "made the held-out halves worse calibrated"),
        (0.0503, (0.30, 0.10), False, "reached 0.05, a bound of the search (dev too small"),
        (19.99, (0.30, 0.10), False, "reached 20, a bound of the search (a tagger near chance"),
    ],
)
def test_a_temperature_is_kept_only_inside_its_bounds_and_where_held_out_improves(
    temperature, held_out, kept, said
):
    """A collapsed temperature (every probability 1, unseen text too) or one that the run's own
    held-out check says made calibration worse is not kept, and the run says why."""
    from bistack.taggers.emissions.calibration import TemperatureFit

    before, after = held_out
    fit = TemperatureFit(
        temperature,
        entities=40,
        ece_before=0.2,
        ece_after=0.1,
        held_out=[{"temperature": temperature, "ece_before": before, "ece_after": after}] * 2,
    )
    assert fit.kept is kept
    assert said in fit.summary()
