"""A transformer's top layers run from the states its bottom layers gave, one small table of how
each family's layers are called.

Training only the top K layers leaves the bottom ones frozen: their output at the boundary (the
states entering layer L - K + 1) is the same in every epoch, fold and seed, so it is computed
once and cached, and each step runs the K layers alone. What a layer needs besides its input
differs by family: the attention mask as the model builds it (BERT-like encoders), a relative
position bias the encoder computes from the sequence (MPNet), relative position embeddings
and indices (DeBERTa-v2/v3). A family not in the table is refused by name, with those that are.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from torch import Tensor, nn

from bistack.errors import ConfigError


def _bert_like(
    model: Any, layers: Sequence[nn.Module], states: Tensor, mask: Tensor
) -> list[Tensor]:
    """BERT, RoBERTa, ELECTRA, MiniLM: each layer reads the states and the attention mask as
    the model builds it from the 2-D one."""
    from transformers.masking_utils import create_bidirectional_mask

    full = create_bidirectional_mask(config=model.config, inputs_embeds=states, attention_mask=mask)
    found = []
    for layer in layers:
        output = layer(states, full)
        states = output[0] if isinstance(output, tuple) else output
        found.append(states)
    return found


def _mpnet(model: Any, layers: Sequence[nn.Module], states: Tensor, mask: Tensor) -> list[Tensor]:
    """MPNet: the mask as BERT's, and the relative position bias its encoder computes from the
    sequence's length (the same for every layer)."""
    from transformers.masking_utils import create_bidirectional_mask

    full = create_bidirectional_mask(config=model.config, inputs_embeds=states, attention_mask=mask)
    bias = model.encoder.compute_position_bias(states)
    found = []
    for layer in layers:
        states = layer(states, full, bias)[0]
        found.append(states)
    return found


def _deberta_v2(
    model: Any, layers: Sequence[nn.Module], states: Tensor, mask: Tensor
) -> list[Tensor]:
    """DeBERTa-v2/v3: its encoder's own mask, relative positions and relative embeddings (its
    convolution follows the first layer alone, which is never a top layer here)."""
    encoder = model.encoder
    attention = encoder.get_attention_mask(mask)
    positions = encoder.get_rel_pos(states, None, None)
    embeddings = encoder.get_rel_embedding()
    found = []
    for layer in layers:
        states, _ = layer(
            states, attention, query_states=None, relative_pos=positions, rel_embeddings=embeddings
        )
        found.append(states)
    return found


@dataclass(frozen=True)
class LayerCall:
    """How a family's encoder layers are listed and called from a boundary's states."""

    layers: Callable[[Any], Sequence[nn.Module]]
    run: Callable[[Any, Sequence[nn.Module], Tensor, Tensor], list[Tensor]]


def _encoder_layers(model: Any) -> Sequence[nn.Module]:
    return model.encoder.layer


BERT_LIKE = LayerCall(_encoder_layers, _bert_like)
FAMILIES: dict[str, LayerCall] = {
    "bert": BERT_LIKE,
    "roberta": BERT_LIKE,
    "xlm-roberta": BERT_LIKE,
    "electra": BERT_LIKE,
    "mpnet": LayerCall(_encoder_layers, _mpnet),
    "deberta-v2": LayerCall(_encoder_layers, _deberta_v2),
}


def layer_call(model: Any) -> LayerCall:
    """The table's entry for ``model``'s family; a ConfigError naming the families that work."""
    family = str(getattr(model.config, "model_type", "?"))
    if family not in FAMILIES:
        raise ConfigError(
            f"backbone.finetune as a number of top layers: a {family} encoder's layers cannot be "
            f"run from a cached boundary here; the families that can: {', '.join(FAMILIES)} "
            "(or backbone.finetune: true, the whole encoder)"
        )
    return FAMILIES[family]


def top_states(model: Any, boundary: int, states: Tensor, mask: Tensor) -> list[Tensor]:
    """The states after each layer above ``boundary`` (layers ``boundary + 1`` to the last,
    counted from 1), from ``states`` ``(rows, seq, hidden)`` entering layer ``boundary + 1``
    and the rows' 2-D ``mask`` ``(rows, seq)`` (True or 1 where a subword is real)."""
    call = layer_call(model)
    layers = list(call.layers(model))[boundary:]
    return call.run(model, layers, states, mask)
