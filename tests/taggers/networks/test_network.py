"""The tagger never counts padding, reaches every parameter, and reads pretrained vectors."""

import pytest
import torch

from bistack.data.batching import TaggingBatch, collate_tagging
from bistack.data.features import TokenVocabularies
from bistack.data.pretrained import load_vectors, read_word_vectors
from bistack.errors import DataError
from bistack.models.embeddings import CharCNNEncoder, CharLSTMEncoder
from bistack.runs.vocabularies import initialise_words
from bistack.taggers.networks.network import build_tagger
from bistack.tasks import config_from_dict
from tests.conftest import tiny_config

SENTENCES = [
    (["Anna", "visited", "New", "York", "."], ["S-PER", "O", "B-LOC", "E-LOC", "O"]),
    (["Paul", "left"], ["S-PER", "O"]),
]


def make(head="crf", char_encoder="lstm", num_layers=1, residual=False):
    config = config_from_dict(
        tiny_config(
            "train.txt",
            None,
            head={"type": head},
            features={"char_encoder": char_encoder},
            encoder={"num_layers": num_layers, "residual": residual},
        )
    )
    vocabularies = TokenVocabularies.build(
        SENTENCES, min_freq=1, lowercase=True, normalise_digits=True
    )
    torch.manual_seed(0)
    return build_tagger(config, vocabularies), vocabularies


def pad_further(batch: TaggingBatch, extra: int, tag: int) -> TaggingBatch:
    """The same batch with ``extra`` more padding positions, whose tags say ``tag``."""

    def widen(t, value):
        return torch.cat([t, torch.full((t.size(0), extra), value, dtype=t.dtype)], dim=1)

    tags = batch.tags.masked_fill(~batch.mask, tag)
    return TaggingBatch(
        widen(batch.words, 0),
        widen(batch.casing, 0),
        batch.chars,
        batch.char_lengths,
        widen(batch.char_index, 0),
        widen(batch.mask, False),
        batch.lengths,
        spellings=batch.spellings,
        tags=widen(tags, tag),
    )


@pytest.mark.parametrize("head", ["crf", "softmax"])
@pytest.mark.parametrize("char_encoder", ["lstm", "cnn", "none"])
def test_padding_never_counts_in_the_loss_or_the_prediction(head, char_encoder):
    model, vocabularies = make(head, char_encoder)
    model.eval()
    batch = collate_tagging([vocabularies.encode(*s) for s in SENTENCES], vocabularies)
    loss = model(batch)
    lengths = batch.mask.sum(dim=1).tolist()
    emissions = model.emissions(batch).detach()
    predicted = decode(model, batch)
    for tag in (-100, 0, 3):
        wider = pad_further(batch, extra=6, tag=tag)
        torch.testing.assert_close(model(wider), loss, atol=1e-6, rtol=0)
        assert decode(model, wider) == predicted
        wider_emissions = model.emissions(wider).detach()[:, : batch.mask.size(1)]
        for row, length in enumerate(lengths):
            torch.testing.assert_close(wider_emissions[row, :length], emissions[row, :length])


@pytest.mark.parametrize("char_encoder", ["lstm", "cnn"])
def test_the_gpu_path_forced_on_the_cpu_gives_the_cpu_paths_loss_and_emissions(
    char_encoder, monkeypatch
):
    """On a GPU the word and character encoders read packed sequences, ordered by the batch's
    lengths on the host, and the spelling cache is off: the same loss and emissions."""
    from bistack import encoders
    from bistack.models import embeddings

    model, vocabularies = make("crf", char_encoder, num_layers=2)
    model.eval()  # dropout draws differently when the layers run whole
    batch = collate_tagging([vocabularies.encode(*s) for s in SENTENCES * 3], vocabularies)
    loss, emissions = model(batch), model.emissions(batch)
    for module in (encoders, embeddings):
        monkeypatch.setattr(module, "reads_packed", lambda _: True)
    monkeypatch.setattr(embeddings, "beside_the_host", lambda _: True)
    torch.testing.assert_close(model(batch), loss, atol=1e-5, rtol=0)
    torch.testing.assert_close(model.emissions(batch), emissions, atol=1e-5, rtol=0)


def decode(model, batch) -> list[list[int]]:
    """The best tags of a batch, as every tagger decodes them (its head's decoder)."""
    scores = model.emissions(batch).detach().numpy()
    analyses = model.head.decoder().analyse(scores, batch.mask.sum(dim=1).tolist(), False)
    return [a.path for a in analyses]


@pytest.mark.parametrize(
    ("head", "char_encoder", "num_layers", "residual"),
    [
        ("crf", "lstm", 1, False),
        ("softmax", "cnn", 2, False),
        ("crf", "cnn", 3, True),
    ],
)
def test_gradients_reach_every_parameter(head, char_encoder, num_layers, residual):
    model, vocabularies = make(head, char_encoder, num_layers, residual)
    model.embedder.unk_replace = 0.0
    batch = collate_tagging([vocabularies.encode(*s) for s in SENTENCES], vocabularies)
    model(batch).backward()
    for name, parameter in model.named_parameters():
        if name == "embedder.word_embedding.weight":
            assert parameter.grad[2:].abs().sum() > 0
            continue
        assert parameter.grad is not None and parameter.grad.abs().sum() > 0, name


def test_char_cnn_ignores_padding_characters():
    torch.manual_seed(0)
    encoder = CharCNNEncoder(10, 4, 6)
    chars = torch.tensor([[3, 4, 5, 0, 0], [3, 4, 5, 7, 7]])
    out = encoder(chars, torch.tensor([3, 3]))
    torch.testing.assert_close(out[0], out[1])


def test_char_lstm_gives_each_word_what_it_gets_alone_whatever_the_length_groups():
    torch.manual_seed(0)
    encoder = CharLSTMEncoder(20, 4, 3).eval()
    encoder.words_per_group = 2  # three groups of these ten words
    lengths = torch.tensor([1, 9, 3, 3, 12, 2, 7, 5, 1, 4])
    chars = torch.randint(1, 20, (10, 12)) * (torch.arange(12) < lengths.unsqueeze(1))
    together = encoder(chars, lengths)
    for word, length in enumerate(lengths.tolist()):
        alone = encoder(chars[word : word + 1, :length], lengths[word : word + 1])
        torch.testing.assert_close(together[word], alone[0], atol=1e-6, rtol=0)
    encoder.length_groups = 1
    torch.testing.assert_close(encoder(chars, lengths), together, atol=1e-6, rtol=0)


def test_pretrained_vectors_are_copied_and_coverage_reported(tmp_path):
    model, vocabularies = make()
    dim = model.embedder.word_embedding.embedding_dim
    vectors = tmp_path / "vectors.txt"
    vectors.write_text(
        f"3 {dim}\n"
        + "".join(f"{w} " + " ".join(["0.5"] * dim) + "\n" for w in ["anna", "paul", "zebra"])
    )
    config = model_config(str(vectors))
    read = read_word_vectors(vectors, dim, vocabularies.key, set(vocabularies.words.items), 0)
    assert read.keys == ["anna", "paul"]  # zebra is beyond a cap of 0 extra words
    line = initialise_words(
        model.embedder, config.features, vocabularies, read, ["Anna", "Paul", "Bob"], ["Anna"]
    )
    assert line == (
        f"word embeddings: 2 vectors from {vectors} (fine-tuned); they cover 66.7% of tokens "
        "(66.7% of word types) of train and 100.0% of tokens (100.0% of word types) of dev; "
        "0 words known from the vectors alone"
    )
    row = model.embedder.word_embedding.weight[vocabularies.words.lookup("anna")]
    assert torch.all(row == 0.5)


def model_config(pretrained):
    return config_from_dict(tiny_config("train.txt", None, features={"pretrained": pretrained}))


def test_a_bad_vectors_line_names_file_and_line(tmp_path):
    _, vocabularies = make()
    vectors = tmp_path / "glove.txt"
    vectors.write_text("anna 0.1 0.2 0.3\npaul 0.1 0.2\n")
    with pytest.raises(DataError) as error:
        load_vectors(vectors, vocabularies.words, 3)
    assert str(error.value) == f"{vectors}:2: expected a word and 3 values, found 2 values"


def test_the_crf_decoder_is_copied_to_the_host_once_and_follows_the_weights():
    """Prediction reads the CRF's scores once, not at every call (three waits on a GPU); a
    training step, weights loaded or swapped in, and a move give the decoder the new scores."""
    model, vocabularies = make("crf")
    head = model.head
    model.eval()
    first = head.decoder()
    assert head.decoder() is first

    def now():
        return head.crf.constrained_scores()[0].detach().numpy()

    state = {k: v.clone() for k, v in model.state_dict().items()}
    state["head.crf.transitions"] += 1.0
    model.load_state_dict(state)
    assert (head.decoder().crf.transitions == now()).all()
    with torch.no_grad():  # as a weight average is swapped in
        head.crf.transitions.mul_(2.0)
    assert (head.decoder().crf.transitions == now()).all()
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1, fused=True)  # bumps no version
    model.train()
    batch = collate_tagging([vocabularies.encode(*s) for s in SENTENCES], vocabularies)
    model(batch).backward()
    optimizer.step()
    model.eval()
    assert (head.decoder().crf.transitions == now()).all()
    moved = head.decoder()
    model.double()
    assert head.decoder() is not moved
