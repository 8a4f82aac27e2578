"""A transformer backbone's section of a config (``backbone``): which encoder, how texts are cut
into its windows, whether it trains (frozen, its top K layers, or the whole of it) and at what
precision its frozen pass runs; and what a config over one says of it (:class:`OverBackbone`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import bistack.config.machine as machine
from bistack.errors import ConfigError


@dataclass
class BackboneConfig:
    # A local HuggingFace encoder folder, or a hub id (org/name[@revision]) read from the
    # hub's cache (nothing is downloaded); "default": all-MiniLM-L6-v2, shipped as a package.
    path: str = "default"
    max_length: int | None = None  # subwords per window; None: the model's own limit
    long_texts: Literal["truncate", "sliding_window"] = "truncate"  # texts over max_length
    stride: int = 64  # subwords consecutive windows share (sliding_window only)
    # False: frozen, per-layer vectors from the feature cache; true: the whole encoder trains;
    # a number K: its top K layers train, the layers below stay frozen and their output, the
    # states entering layer L - K + 1, is computed once and cached (bistack.models.top_layers;
    # classifiers and regressors over layers). K equal to the encoder's layers is true.
    finetune: bool | int = False
    lr: float = 2e-5  # backbone learning rate when fine-tuned (optimizer.lr is the head's)
    cache_dir: str = "runs/feature-cache"  # where the frozen backbone's vectors are cached
    batch_size: int = 32  # texts per backbone forward when computing cached vectors
    # Taggers: subwords of the neighbouring sentences of the same document read on each side of
    # a sentence (FLERT's document context), whose own words' states alone are kept; 0: alone.
    context: int = 0
    # Fine-tuned: each layer's learning rate is the one above it times this (the top layer
    # backbone.lr, the embeddings the lowest); 1: one learning rate for the whole backbone.
    layer_lr_decay: float = 1.0
    # Fine-tuned: recompute each layer's activations in the backward pass instead of keeping
    # them (HuggingFace's gradient checkpointing): far less memory for a large encoder, at
    # about a third more compute.
    gradient_checkpointing: bool = False
    # A frozen backbone's pass: "32" (its weights' own), "bf16-mixed" (its matrix products in
    # bfloat16 under torch.autocast: about twice as fast on a CPU with AVX-512 BF16 or AMX, its
    # layers' states within 1e-3 cosine of float32's; dev scores within float32's seed spread),
    # or "auto": bf16-mixed where this machine runs bfloat16 natively (such a CPU, or a GPU
    # with bfloat16), else 32; with backbone.finetune: K, its frozen bottom's pass (the top K
    # layers train in float32); a backbone fine-tuned whole: 32. Settled when the config is read,
    # and a trained model's config.json keeps the settled value. The cache is keyed by it, and
    # the model predicts and serves under it, so training and serving read the same vectors.
    precision: Literal["auto", "32", "bf16-mixed"] = "auto"

    @property
    def pass_precision(self) -> Literal["32", "bf16-mixed"]:
        """The frozen pass's precision, settled (``auto`` is when a config is read; one built
        in code and never checked settles here by the same rule)."""
        if self.precision == "auto":
            has_bottom = not self.finetune or self.top_layers is not None
            return "bf16-mixed" if has_bottom and machine.native_bfloat16() else "32"
        return self.precision

    def named(self, folder: Path) -> str:
        """How a run's lines name it: a hub id as the user wrote it (not its snapshot's
        folder, a cache's long path), else the ``folder`` it was read from."""
        from bistack.config.hub import is_hub_id

        return self.path if is_hub_id(self.path) else str(folder)

    @property
    def top_layers(self) -> int | None:
        """The number of top layers that train, where ``finetune`` gives one (else None)."""
        tuned = self.finetune
        return None if isinstance(tuned, bool) else tuned

    def described(self) -> str:
        """How it trains, in words, for a run's first line: frozen, or fine-tuned at its rate
        (and each layer's decay, and gradient checkpointing, where set)."""
        if not self.finetune:  # and its pass's precision, which auto may have chosen
            return "frozen" if self.pass_precision == "32" else "frozen, its pass in bf16-mixed"
        top = self.top_layers
        said = f"{'' if top is None else f'its top {top} layers '}fine-tuned at lr {self.lr:g}"
        if top is not None and self.pass_precision != "32":
            said += f", the frozen bottom's pass in {self.pass_precision}"
        if self.layer_lr_decay != 1.0:
            said += f", each layer below at x{self.layer_lr_decay:g} (backbone.layer_lr_decay)"
        return said + (", gradient checkpointing" if self.gradient_checkpointing else "")

    def check(self, source: str) -> None:
        """Settings of a fine-tuned backbone are refused for a frozen one: they would do
        nothing. ``auto`` precision is settled here (``bistack.config.machine``)."""
        if self.top_layers is not None and self.top_layers < 1:
            raise ConfigError(
                f"{source}: backbone.finetune {self.top_layers}: a number of top layers to train "
                "is at least 1 (false: none, the backbone frozen; true: all of them)"
            )
        self.precision = self.pass_precision
        if self.precision != "32" and self.finetune and self.top_layers is None:
            raise ConfigError(
                f"{source}: backbone.precision {self.precision} is a frozen backbone's pass (or a "
                "frozen bottom's, with backbone.finetune: K); this one is fine-tuned whole "
                "(backbone.finetune: true) and trains at --precision"
            )
        if self.gradient_checkpointing and not self.finetune:
            raise ConfigError(
                f"{source}: backbone.gradient_checkpointing saves a fine-tuned backbone's "
                "memory; this backbone is frozen (backbone.finetune: false), so it would do "
                "nothing"
            )


class OverBackbone:
    """What a config over a transformer (its ``backbone`` section) says of it, for the shared
    code that asks every config (:class:`ExperimentConfig`)."""

    backbone: BackboneConfig  # the config's own field (a dataclass field there)

    @property
    def fine_tunes_transformer(self) -> bool:
        return bool(self.backbone.finetune)

    @property
    def frozen_backbone(self) -> BackboneConfig | None:
        return None if self.backbone.finetune else self.backbone
