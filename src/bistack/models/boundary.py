"""Training a transformer's top K layers over its frozen bottom, the bottom's output cached once.

With ``backbone.finetune: K`` the embeddings and the layers below the boundary (layer L - K)
are frozen: what they give each text never changes, so it is computed once, before training,
and kept in the feature cache (keyed by text: every epoch, fold and seed reads it): each
window's states entering layer L - K + 1 (its real subwords) and, for the pooler over layers,
each text's vector of every frozen layer. A step runs the K layers alone from those states
(``bistack.models.top_layers``), forms the top layers' vectors as the whole encoder's pass
forms them, and puts them above the frozen ones. At prediction the whole encoder runs (no
cache holds a new text), the top layers with their trained weights.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import torch
from torch import Tensor, nn

from bistack.data.batching import TokenBatch
from bistack.errors import ConfigError
from bistack.models.backbone import SubwordBatch, TransformerBackbone, text_vectors
from bistack.models.feature_cache import cached_rows, model_fingerprint
from bistack.models.frozen_pass import FLOAT32, FrozenPass
from bistack.models.mode import evaluating
from bistack.models.top_layers import layer_call, top_states
from bistack.transfer import to_device

Kind = Literal["cls", "mean"]


@dataclass  # not frozen: mixed precision walks the batch (Fabric's convert_input)
class BoundaryBatch:
    """Texts as a top-K step reads them. states: ``(windows, seq, hidden)`` entering the first
    trained layer (0 past a window's end), attention_mask ``(windows, seq)``, window_text
    ``(windows,)`` each window's text; lower: ``(num_texts, frozen layers, hidden)`` each
    text's vectors of the frozen layers (of the kind the pooler reads); targets and a stacked
    model's tokens as in ``LayerBatch``."""

    states: Tensor
    attention_mask: Tensor
    window_text: Tensor
    num_texts: int
    lower: Tensor
    targets: Tensor | None = None
    tokens: TokenBatch | None = None

    def to(self, device: torch.device | str) -> BoundaryBatch:
        return BoundaryBatch(
            to_device(self.states, device),
            to_device(self.attention_mask, device),
            to_device(self.window_text, device),
            self.num_texts,
            to_device(self.lower, device),
            None if self.targets is None else to_device(self.targets, device),
            None if self.tokens is None else self.tokens.to(device),
        )


def boundary_layers(backbone: TransformerBackbone, batch: BoundaryBatch, kind: Kind) -> Tensor:
    """Every layer's vector of each text ``(num_texts, layers, hidden)``: the frozen layers'
    from ``batch.lower``, the trained ones' computed now from the boundary states."""
    boundary = batch.lower.shape[1]
    upper = top_states(backbone.model, boundary, batch.states, batch.attention_mask)
    return torch.cat([batch.lower, text_vectors(upper, batch, kind)], dim=1)


class BoundaryCache:
    """The frozen bottom of ``backbone`` below layer ``boundary + 1``, for ``windows`` (each
    text's subword windows, as ``TransformerBackbone.encode`` gives them; ``texts``: the texts
    themselves, the cache's keys; ``max_length``: the windows' width): computed once a text
    (``cache_dir``, keyed by the model, the boundary, the pooled kind and the windowing
    ``settings`` and the ``frozen`` pass's precision), held in memory for the run."""

    def __init__(
        self,
        backbone: TransformerBackbone,
        boundary: int,
        kind: Kind,
        texts: Sequence[str],
        windows: Sequence[Sequence[Sequence[int]]],
        settings: dict[str, object],
        cache_dir: str | Path,
        say: Callable[[str], None],
        *,
        max_length: int | None,
        frozen: FrozenPass = FLOAT32,
        batch_size: int = 32,
    ) -> None:
        layer_call(backbone.model)  # a family without a layer call refused before any pass
        self.backbone, self.boundary, self.kind = backbone, boundary, kind
        self.max_length, self.frozen = max_length, frozen

        def compute(indices: list[int]) -> dict[str, list[Tensor]]:
            return self._bottom([windows[i] for i in indices], batch_size)

        key = frozen.cache_settings(settings) | {
            "kind": "boundary",
            "boundary": boundary,
            "vectors": kind,
        }
        started = time.perf_counter()
        cached = cached_rows(cache_dir, model_fingerprint(backbone.folder), texts, key, compute)
        say(
            f"the frozen bottom (layers 1-{boundary}) of {len(texts)} texts {cached.said} "
            f"in {time.perf_counter() - started:.0f} s ({cached.path})"
        )
        self.states = cached.rows["states"]  # each text's windows' real subwords, end to end
        self.lengths = [lengths.tolist() for lengths in cached.rows["lengths"]]
        self.lower = cached.rows["lower"]  # each text's (1, boundary, hidden)

    @torch.no_grad()
    def _bottom(self, windows: list[Sequence[Sequence[int]]], size: int) -> dict[str, list[Tensor]]:
        """The bottom's output for these texts, a text's rows each: its windows' boundary
        states (real subwords only) and their lengths, and its frozen layers' vectors."""
        backbone = self.backbone
        device = next(backbone.parameters()).device
        found: dict[str, list[Tensor]] = {"states": [], "lengths": [], "lower": []}
        with evaluating(backbone):
            for start in range(0, len(windows), size):
                batch = backbone.batch_of(windows[start : start + size], self.max_length)
                batch = batch.to(device)
                hidden = backbone.hidden_states(batch.input_ids, batch.attention_mask, self.frozen)
                lower = text_vectors(hidden[1 : self.boundary + 1], batch, self.kind).cpu()
                states = hidden[self.boundary].cpu()
                lengths = batch.attention_mask.sum(dim=1).cpu()
                owners = batch.window_text.cpu()
                for text in range(batch.num_texts):
                    mine = (owners == text).nonzero().flatten().tolist()
                    found["states"].append(torch.cat([states[w, : int(lengths[w])] for w in mine]))
                    found["lengths"].append(lengths[mine].clone())
                    found["lower"].append(lower[text : text + 1].clone())
        return found

    def batch(
        self,
        indices: Sequence[int],
        targets: Tensor | None = None,
        tokens: TokenBatch | None = None,
    ) -> BoundaryBatch:
        """The texts at ``indices`` as a step reads them, their windows padded to the longest."""
        parts, owners, lengths = [], [], []
        for position, index in enumerate(indices):
            for window in self.states[index].split(self.lengths[index]):
                parts.append(window)
                owners.append(position)
                lengths.append(len(window))
        width = max(lengths)
        hidden = parts[0].shape[-1]
        states = parts[0].new_zeros((len(parts), width, hidden))
        mask = torch.zeros((len(parts), width), dtype=torch.long)
        for row, (part, length) in enumerate(zip(parts, lengths, strict=True)):
            states[row, :length] = part
            mask[row, :length] = 1
        lower = torch.cat([self.lower[index] for index in indices])
        return BoundaryBatch(
            states, mask, torch.tensor(owners), len(indices), lower, targets, tokens
        )


def check_boundary(backbone: TransformerBackbone, top: int) -> int:
    """The boundary (the frozen layers' count) when the top ``top`` layers of ``backbone``
    train: a ValueError where ``top`` exceeds its layers."""
    if top > backbone.num_layers:
        raise ValueError(
            f"backbone.finetune {top}: the encoder has {backbone.num_layers} layers; give at most "
            f"{backbone.num_layers} (or true: all of them)"
        )
    return backbone.num_layers - top


def freeze_below_top(backbone: TransformerBackbone, top: int | None) -> int | None:
    """With ``top`` (``backbone.finetune`` as a number K of top layers): the backbone's layers
    below them frozen (:func:`frozen_bottom`), and the boundary; None for a backbone frozen or
    fine-tuned whole (K its number of layers too). A ConfigError where K exceeds its layers."""
    if top is None:
        return None
    try:
        boundary = check_boundary(backbone, top)
    except ValueError as error:
        raise ConfigError(str(error)) from None
    if boundary == 0:
        return None
    frozen_bottom(backbone, boundary)
    return boundary


def frozen_bottom(backbone: TransformerBackbone, boundary: int) -> None:
    """Everything but the layers above ``boundary`` frozen: no gradient, no optimizer state.
    The embeddings and the bottom layers never run in training (their output is cached), and
    what every layer shares (MPNet's relative position bias, DeBERTa's relative embeddings)
    stays as the bottom read it, so that prediction's whole pass gives the cached states."""
    backbone.model.requires_grad_(False)
    for layer in list(layer_call(backbone.model).layers(backbone.model))[boundary:]:
        layer.requires_grad_(True)


def top_layer_names(model: nn.Module, boundary: int) -> list[str]:
    """The names (as ``model.state_dict()`` keys them) of the weights of its layers above
    ``boundary``: what a top-K model trains, and saves of its encoder."""
    top = {id(layer) for layer in list(layer_call(model).layers(model))[boundary:]}
    prefixes = tuple(f"{name}." for name, module in model.named_modules() if id(module) in top)
    return [name for name in model.state_dict() if name.startswith(prefixes)]


@dataclass(frozen=True)
class SplitPass:
    """A top-K model's whole pass at prediction (no cache holds a new text): its embeddings and
    bottom layers as the ``frozen`` pass runs them (their states at the ``boundary`` exactly
    what training cached), then its trained top layers in float32 from them."""

    boundary: int
    frozen: FrozenPass

    def layers(self, backbone: TransformerBackbone, batch: SubwordBatch, kind: Kind) -> Tensor:
        """Every layer's vector of each text ``(num_texts, layers, hidden)``."""
        hidden = backbone.hidden_states(batch.input_ids, batch.attention_mask, self.frozen)
        lower = text_vectors(hidden[1 : self.boundary + 1], batch, kind)
        upper = top_states(
            backbone.model, self.boundary, hidden[self.boundary], batch.attention_mask
        )
        return torch.cat([lower, text_vectors(upper, batch, kind)], dim=1)
