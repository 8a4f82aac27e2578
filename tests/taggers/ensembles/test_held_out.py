"""A fold's held-out pass, saved beside its run, replays as the fold's model decodes: the same
tags, confidences and calibration, without the model; a file of other sentences or none at
all is not taken (the model is opened and read instead)."""

from __future__ import annotations

from bistack.data.conll import read_conll
from bistack.taggers.emissions.calibration import dev_emissions
from bistack.taggers.ensembles.held_out import load_held_out, save_held_out
from bistack.taggers.models.tagger import Tagger


def test_a_saved_fold_replays_its_models_tags_and_confidences(small_tagger, tmp_path):
    model = Tagger.load(small_tagger)
    model.calibration = {"temperature": 1.3}
    sentences = read_conll(small_tagger.parent.parent / "dev.txt")
    emissions = dev_emissions(model, sentences)
    path = tmp_path / "held_out.safetensors"
    save_held_out(path, model, emissions)
    loaded = load_held_out(path, sentences, model.config)
    assert loaded is not None
    fold, replayed = loaded
    assert fold.calibration == {"temperature": 1.3} and fold.output_scheme == model.output_scheme
    tokens = [s.tokens for s in sentences]
    expected = model.predict_tokens(tokens, emitter=emissions.replayed())
    got = fold.predict_tokens(tokens, emitter=replayed.replayed())
    assert [t.to_json() for t in got] == [t.to_json() for t in expected]
    assert replayed.gold == emissions.gold
    assert load_held_out(path, sentences[:-1], model.config) is None  # other sentences
    assert load_held_out(tmp_path / "none.safetensors", sentences, model.config) is None
