"""A CRF tagger on a GPU decodes where its emissions are (the parallel scan): the same tags,
token confidences and entity probabilities as the compiled kernels give on the host. This
machine has no GPU, so the device path runs here on CPU tensors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bistack.taggers.emissions import device_decoding
from bistack.taggers.emissions.decoding import TagDecoder
from bistack.taggers.models.tagger import Tagger
from tests.conftest import tiny_sentences
from tests.taggers.emissions.test_confidence import LABELS, make_crf, scores_of


def decoder_and_emissions(
    scheme: str, temperature: float, seed: int
) -> tuple[TagDecoder, np.ndarray, list[int]]:
    """A constrained CRF with random scores, and a batch of random emissions of mixed lengths,
    one token's every emission far below a forbidden move."""
    crf, _ = make_crf(scheme, seed)
    labels = LABELS[scheme]
    lengths = [7, 1, 4, 7, 2, 5]
    emissions = (torch.randn(len(lengths), 7, len(labels)) * 3).numpy()
    emissions[2, 1] -= 2e4
    return TagDecoder(labels, scheme, scores_of(crf), temperature), emissions, lengths


DEVICES = [
    "cpu",
    pytest.param(
        "cuda",
        marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here"),
    ),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("scheme", list(LABELS))
@pytest.mark.parametrize("temperature", [1.0, 0.4, 2.5])
def test_the_device_gives_the_hosts_tags_and_confidences(scheme, temperature, device):
    decoder, emissions, lengths = decoder_and_emissions(scheme, temperature, seed=len(scheme))
    on_host = decoder.analyse(emissions, lengths, confidence=True)
    placed = torch.from_numpy(emissions).to(device)
    on_device = device_decoding.device_analyses(decoder, placed, lengths)
    assert [a.path for a in on_device] == [a.path for a in on_host]
    assert sum(len(a.entities) for a in on_host) >= 3  # the entity math is exercised
    for host, device in zip(on_host, on_device, strict=True):
        np.testing.assert_allclose(device.token_confidence, host.token_confidence, atol=1e-6)
        assert device.entities.keys() == host.entities.keys()
        for span, chance in host.entities.items():
            assert device.entities[span] == pytest.approx(chance, abs=1e-6), span


def test_the_device_scores_every_entity_of_a_batch_from_one_partition(monkeypatch):
    """One pass of the scan and its backward a batch, whatever the entities: each entity's
    runs come from the marginals it gives (no clamped copy of a sentence, no partition more)."""
    from bistack.kernels import crf_scan

    decoder, emissions, lengths = decoder_and_emissions("BIO", 1.0, seed=3)
    calls: list[str] = []
    for name in ("posterior_scan", "log_partition_scan"):
        real = getattr(crf_scan, name)
        counted = lambda *args, name=name, real=real: calls.append(name) or real(*args)  # noqa: E731
        monkeypatch.setattr(crf_scan, name, counted)
        if hasattr(device_decoding, name):
            monkeypatch.setattr(device_decoding, name, counted)
    analyses = device_decoding.device_analyses(decoder, torch.from_numpy(emissions), lengths)
    assert sum(len(a.entities) for a in analyses) >= 3
    assert calls == ["posterior_scan"]


def test_a_tagger_whose_emissions_are_on_an_accelerator_decodes_them_there(
    small_tagger, monkeypatch
):
    """A trained tagger's emissions taken for a GPU's: the confidences of every batch of at
    least ``device_rows`` sentences computed by the scan, with the answers the host's kernels
    give; tags alone, smaller batches and k-best lists stay on the host."""
    tagger = Tagger.load(small_tagger)
    sentences = [[t for t, _ in s] for s in tiny_sentences(30, seed=5)]
    on_host = tagger.analyse_tokens(sentences, batch_size=8)
    ran = []
    real = device_decoding.device_analyses
    monkeypatch.setattr(device_decoding, "on_accelerator", lambda scores: True)
    monkeypatch.setattr(
        device_decoding, "device_analyses", lambda *args: ran.append(1) or real(*args)
    )
    tagger.device_rows = 7
    on_device = tagger.analyse_tokens(sentences, batch_size=8)
    assert len(ran) == 3  # the batches of 8; the last, of 6, on the host
    assert sum(len(a.entities) for a in on_host) >= 10
    for host, device in zip(on_host, on_device, strict=True):
        assert device.tags == host.tags
        np.testing.assert_allclose(device.confidences, host.confidences, atol=1e-6)
        assert device.entities.keys() == host.entities.keys()
        for span, chance in host.entities.items():
            assert device.entities[span] == pytest.approx(chance, abs=1e-6), span
    tagger.analyse_tokens(sentences[:8], top_k=3)
    assert tagger.tag_tokens(sentences, batch_size=8) == [a.tags for a in on_host]
    assert len(ran) == 3
