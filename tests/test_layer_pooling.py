"""Layer poolers against hand-computed cases on tiny tensors (second seed)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from bistack.layer_pooling import (
    LAYER_POOLERS,
    AttentionLayerPooling,
    ConcatLastLayersPooling,
    LastLayerPooling,
    RecurrentLayerPooling,
    WeightedLayerPooling,
    build_layer_pooler,
    select_layers,
)

BATCH, LAYERS, HIDDEN = 3, 6, 5


def make_layers(batch: int = BATCH, seed: int = 0) -> torch.Tensor:
    return torch.randn(batch, LAYERS, HIDDEN, generator=torch.Generator().manual_seed(seed))


def manual_recurrent(pooler: RecurrentLayerPooling, layers: torch.Tensor) -> torch.Tensor:
    """Both directions stepped by hand with LSTMCell/GRUCell sharing the pooler's weights.

    Returns (forward outputs, backward outputs), each ``(batch, num_layers, hidden)``.
    """
    rnn = pooler.rnn
    is_lstm = isinstance(rnn, nn.LSTM)
    outputs = []
    for suffix, steps in (("", range(LAYERS)), ("_reverse", reversed(range(LAYERS)))):
        cell = (nn.LSTMCell if is_lstm else nn.GRUCell)(HIDDEN, rnn.hidden_size)
        cell.weight_ih.data = getattr(rnn, f"weight_ih_l0{suffix}").data
        cell.weight_hh.data = getattr(rnn, f"weight_hh_l0{suffix}").data
        cell.bias_ih.data = getattr(rnn, f"bias_ih_l0{suffix}").data
        cell.bias_hh.data = getattr(rnn, f"bias_hh_l0{suffix}").data
        h = torch.zeros(layers.shape[0], rnn.hidden_size)
        c = torch.zeros_like(h)
        out = [torch.empty(0)] * LAYERS
        for t in steps:
            if is_lstm:
                h, c = cell(layers[:, t], (h, c))
            else:
                h = cell(layers[:, t], h)
            out[t] = h
        outputs.append(torch.stack(out, dim=1))
    return torch.cat(outputs, dim=-1)  # (batch, num_layers, 2 * hidden)


@pytest.mark.parametrize("cell", ["lstm", "gru"])
@pytest.mark.parametrize("summary", ["final_states", "last_output"])
def test_recurrent_pooling_equals_a_manual_loop_over_cells(cell, summary):
    torch.manual_seed(0)
    pooler = RecurrentLayerPooling(HIDDEN, 4, cell=cell, summary=summary).eval()
    layers = make_layers()
    out = manual_recurrent(pooler, layers)
    if summary == "last_output":  # the seed's out[:, -1, :]: backward half saw the last layer only
        expected = out[:, -1]
    else:  # forward after layer N, backward after layer 1: both read every layer
        expected = torch.cat([out[:, -1, :4], out[:, 0, 4:]], dim=-1)
    torch.testing.assert_close(pooler(layers), expected, atol=1e-6, rtol=1e-5)


def test_last_output_backward_half_sees_only_the_last_layer():
    torch.manual_seed(0)
    pooler = RecurrentLayerPooling(HIDDEN, 4, summary="last_output").eval()
    layers = make_layers()
    changed = layers.clone()
    changed[:, :-1] += 1.0  # every layer but the last
    before, after = pooler(layers), pooler(changed)
    torch.testing.assert_close(before[:, 4:], after[:, 4:])  # backward half blind to them
    assert not torch.allclose(before[:, :4], after[:, :4])
    final = RecurrentLayerPooling(HIDDEN, 4, summary="final_states").eval()
    final.load_state_dict(pooler.state_dict())
    assert not torch.allclose(final(layers)[:, 4:], final(changed)[:, 4:])


def test_weighted_pooling_with_fixed_weights():
    pooler = WeightedLayerPooling(LAYERS, HIDDEN, start_layer=3)
    with torch.no_grad():
        pooler.weights.copy_(torch.log(torch.tensor([1.0, 2.0, 3.0, 4.0])))  # softmax -> /10
        pooler.gamma.fill_(2.0)
    layers = make_layers()
    expected = 2.0 * (
        0.1 * layers[:, 2] + 0.2 * layers[:, 3] + 0.3 * layers[:, 4] + 0.4 * layers[:, 5]
    )
    torch.testing.assert_close(pooler(layers), expected)


def test_depth_order_matters_for_lstm_pooling_but_not_for_mean_over_layers():
    torch.manual_seed(0)
    layers = make_layers()
    reversed_layers = layers.flip(1)
    lstm = RecurrentLayerPooling(HIDDEN, 4).eval()
    assert not torch.allclose(lstm(layers), lstm(reversed_layers), atol=1e-4)
    mean_over_layers = WeightedLayerPooling(LAYERS, HIDDEN)  # zero logits: the plain mean
    torch.testing.assert_close(mean_over_layers(layers), layers.mean(dim=1))
    torch.testing.assert_close(mean_over_layers(layers), mean_over_layers(reversed_layers))


def test_attention_over_layers_by_hand():
    torch.manual_seed(0)
    pooler = AttentionLayerPooling(HIDDEN, attention_size=3)
    layers = make_layers()
    scores = (layers @ pooler.key.weight.T) @ pooler.query / 3**0.5  # (batch, layers)
    weights = torch.softmax(scores, dim=1)
    torch.testing.assert_close(pooler.weights(layers), weights)
    torch.testing.assert_close(pooler(layers), (weights.unsqueeze(-1) * layers).sum(dim=1))


def test_last_layer_and_concatenated_last_four():
    layers = make_layers()
    torch.testing.assert_close(LastLayerPooling(HIDDEN)(layers), layers[:, -1])
    concat = ConcatLastLayersPooling(HIDDEN, 4)(layers)
    expected = torch.cat([layers[:, 5], layers[:, 4], layers[:, 3], layers[:, 2]], dim=-1)
    torch.testing.assert_close(concat, expected)
    every = build_layer_pooler("concat_all", LAYERS, HIDDEN)(layers)
    assert every.shape == (layers.shape[0], LAYERS * HIDDEN)
    torch.testing.assert_close(every, layers.flip(1).flatten(1))


@pytest.mark.parametrize("name", LAYER_POOLERS)
def test_every_pooler_takes_a_batch_of_one_and_reports_its_output_size(name):
    torch.manual_seed(0)
    pooler = build_layer_pooler(name, LAYERS, HIDDEN, lstm_hidden=4).eval()
    layers = make_layers(batch=2)
    single = pooler(layers[:1])
    assert single.shape == (1, pooler.output_size)
    torch.testing.assert_close(single, pooler(layers)[:1], atol=1e-6, rtol=1e-5)


def test_concatenating_the_last_four_needs_four_layers():
    with pytest.raises(ValueError, match="concat_last4 reads the last 4 layers; it is given 3"):
        build_layer_pooler("concat_last4", 3, HIDDEN)


def test_layer_selection():
    assert select_layers(6, "all") == [1, 2, 3, 4, 5, 6]
    assert select_layers(6, "every_other") == [2, 4, 6]
    assert select_layers(5, "every_other") == [1, 3, 5]
    assert select_layers(12, [4, 8, 12]) == [4, 8, 12]
    with pytest.raises(ValueError, match=r"layer 0 is not a transformer layer of this model"):
        select_layers(6, [0, 3])
    with pytest.raises(ValueError, match=r"layer 7 is not a transformer layer"):
        select_layers(6, [7])
    with pytest.raises(ValueError, match="distinct and in depth order"):
        select_layers(6, [4, 2])


def test_wrong_shapes_are_clear_errors():
    expected = r"expected per-layer vectors \(batch_size, num_layers, 5\)"
    with pytest.raises(ValueError, match=expected):
        RecurrentLayerPooling(HIDDEN, 4)(torch.randn(2, 6, 7))
    with pytest.raises(ValueError, match="expected 6 layers, got 4"):
        WeightedLayerPooling(LAYERS, HIDDEN)(torch.randn(2, 4, HIDDEN))
