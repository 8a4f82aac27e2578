"""Prediction reuses each word's character encoding, and never a stale or a wrong one."""

import copy
import pickle
import threading

import pytest
import torch

from bistack.config import OptimizerConfig
from bistack.data.batching import collate_tagging
from bistack.models.mode import predicting
from bistack.models.spelling_cache import SpellingCache, each_batch_alone
from bistack.runs.optimizers import build_optimizer
from tests.taggers.networks.test_network import make

SENTENCES = [
    ["Anna", "visited", "New", "York", "."],
    ["Paul", "left", "Zürich", "in", "1999", "."],
    ["Anna", "left", "."],
    ["Rome", "praised", "Anna", "and", "Paul", "yesterday", "!"],
]


def batch_of(vocabularies, sentences):
    """The sentences' batch, every word tagged O (for a loss to step on)."""
    encoded = [vocabularies.encode(tokens, ["O"] * len(tokens)) for tokens in sentences]
    return collate_tagging(encoded, vocabularies)


def direct(embedder, batch) -> torch.Tensor:
    """The char encoder run on every word of ``batch``: what the cache must answer."""
    with torch.no_grad():
        return embedder.char_encoder(batch.chars, batch.char_lengths)


def test_cached_encodings_equal_computed_ones_and_later_calls_only_read_them():
    model, vocabularies = make()
    embedder = model.embedder
    with predicting(model):
        for sentences in (SENTENCES[:2], SENTENCES, SENTENCES[2:], SENTENCES):
            batch = batch_of(vocabularies, sentences)
            torch.testing.assert_close(embedder.spelled(batch), direct(embedder, batch))
        distinct = {token for sentence in SENTENCES for token in sentence}
        assert len(embedder.spelling_cache) == len(distinct)
        runs = []
        original = embedder.char_encoder.forward
        embedder.char_encoder.forward = lambda *args: runs.append(args) or original(*args)
        embedder.spelled(batch_of(vocabularies, SENTENCES[::-1]))
        assert runs == []  # every word was spelled before: the char BiLSTM did not run
        embedder.spelled(batch_of(vocabularies, [["Anna", "met", "Zoë"]]))
        assert [len(chars) for chars, _ in runs] == [2]  # only the new words ran


def test_within_each_batch_alone_the_cache_is_neither_read_nor_filled():
    """What a resumable corpus run needs: each chunk's predictions from that chunk alone."""
    model, vocabularies = make()
    embedder = model.embedder
    with predicting(model):
        embedder.spelled(batch_of(vocabularies, SENTENCES[:2]))
        cached = len(embedder.spelling_cache)
        with each_batch_alone():
            batch = batch_of(vocabularies, SENTENCES)
            assert torch.equal(embedder.spelled(batch), direct(embedder, batch))
        assert len(embedder.spelling_cache) == cached
        embedder.spelled(batch)
        assert len(embedder.spelling_cache) > cached  # on again after the block


@pytest.mark.parametrize("name", ["adam", "adamw", "sgd"])
def test_a_weight_update_is_never_answered_with_older_encodings(name):
    """Each epoch's dev score reads the char encoder as it is now: the training loop's own
    optimisers (Adam's fused step moves no version counter), a ``.data`` write and a
    ``load_state_dict`` each empty the cache."""
    model, vocabularies = make()
    embedder = model.embedder
    batch = batch_of(vocabularies, SENTENCES)
    optimiser = build_optimizer(OptimizerConfig(name=name, lr=0.1), model)
    for _ in range(2):  # the dev pass after each of two epochs
        with predicting(model):
            before = embedder.spelled(batch)
        model.train()
        model(batch).backward()  # the tagger's loss
        optimiser.step()
        optimiser.zero_grad()
        with predicting(model):
            after = embedder.spelled(batch)
            torch.testing.assert_close(after, direct(embedder, batch))
        assert not torch.allclose(after, before)
    embedder.char_encoder.encoder.rnn.weight_hh_l0.data.mul_(2)
    with predicting(model):
        torch.testing.assert_close(embedder.spelled(batch), direct(embedder, batch))
    fresh, _ = make()  # other weights, loaded into the same modules
    model.load_state_dict(fresh.state_dict())
    with predicting(model):
        torch.testing.assert_close(embedder.spelled(batch), direct(embedder, batch))


def test_training_and_gradients_bypass_the_cache():
    model, vocabularies = make()
    batch = batch_of(vocabularies, SENTENCES)
    model.eval()  # evaluation mode, gradients on: a loss computed to be differentiated
    encoded = model.embedder.spelled(batch)
    assert encoded.requires_grad
    model.train()
    with torch.no_grad():
        model.embedder.spelled(batch)
    assert len(model.embedder.spelling_cache) == 0


def test_a_full_cache_forgets_its_oldest_words_and_stays_right():
    model, vocabularies = make()
    embedder = model.embedder
    embedder.spelling_cache = SpellingCache(capacity=5)
    with predicting(model):
        for sentences in (SENTENCES, SENTENCES[1:2], SENTENCES[3:], SENTENCES[:1], SENTENCES):
            batch = batch_of(vocabularies, sentences)
            torch.testing.assert_close(embedder.spelled(batch), direct(embedder, batch))
            assert len(embedder.spelling_cache) <= 5


def test_threads_sharing_a_model_each_get_their_own_words():
    model, vocabularies = make()
    embedder = model.embedder
    embedder.spelling_cache = SpellingCache(capacity=8)  # small: threads evict each other's words
    batches = [batch_of(vocabularies, [sentence]) for sentence in SENTENCES]
    expected = [direct(embedder, batch) for batch in batches]
    wrong = []

    def predict(start: int) -> None:
        with torch.no_grad():
            for step in range(60):
                index = (start + step) % len(batches)
                if not torch.allclose(embedder.spelled(batches[index]), expected[index]):
                    wrong.append(index)

    model.eval()
    threads = [threading.Thread(target=predict, args=(start,)) for start in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert wrong == []


def test_a_copied_or_pickled_model_predicts_as_the_original():
    model, vocabularies = make()
    batch = batch_of(vocabularies, SENTENCES)
    with predicting(model):
        expected = model.emissions(batch)
    for copied in (copy.deepcopy(model), pickle.loads(pickle.dumps(model))):
        assert len(copied.embedder.spelling_cache) == 0
        with predicting(copied):
            torch.testing.assert_close(copied.emissions(batch), expected)
