"""The language model a user loads: perplexity of held-out text, and sampling."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from bistack.data.corpus import read_corpus
from bistack.data.tokenize import tokenize_text
from bistack.data.vocab import Vocabulary
from bistack.files.modeldir import (
    save_metadata,
)
from bistack.language_models.config import LanguageModelConfig
from bistack.language_models.network import LSTMLanguageModel, build_language_model, collate_lm
from bistack.metrics.text import PerplexityScores
from bistack.models.mode import evaluating
from bistack.models.saved import SavedKind, SavedModel

KIND = "language_model"
BOS, EOS = "<s>", "</s>"


class LanguageModel(SavedKind):
    """A trained causal LSTM language model with its vocabulary."""

    KIND = KIND
    CONFIG = LanguageModelConfig

    def __init__(
        self, model: LSTMLanguageModel, vocabulary: Vocabulary, config: LanguageModelConfig
    ) -> None:
        self.model = model.eval()
        self.vocabulary = vocabulary
        self.config = config

    @classmethod
    def from_saved(cls, saved: SavedModel) -> LanguageModel:
        vocabulary = Vocabulary.from_json(saved.vocab["words"])
        network = build_language_model(saved.config, len(vocabulary))
        return cls(saved.weights_into(network), vocabulary, saved.config)

    def save_metadata(self, path: str | Path) -> None:
        save_metadata(path, KIND, self.config.to_dict(), {"words": self.vocabulary.to_json()})

    def describe(self) -> dict[str, Any]:
        """What ``GET /info`` and ``bistack info`` say of it: the words it predicts."""
        return {"vocabulary": len(self.vocabulary)}

    def key(self, token: str) -> str:
        return token.lower() if self.config.features.lowercase else token

    def encode(self, tokens: Sequence[str]) -> list[int]:
        """``<s> tokens </s>`` as ids; unknown words map to ``<unk>``."""
        words = [self.vocabulary.lookup(self.key(t)) for t in tokens]
        return [self.vocabulary.lookup(BOS), *words, self.vocabulary.lookup(EOS)]

    @torch.inference_mode()
    def perplexity(
        self, sequences: Sequence[Sequence[str]], batch_size: int = 64
    ) -> PerplexityScores:
        """Teacher-forced perplexity: exp of the mean next-token negative log-likelihood, every
        token and the end of each sequence predicted."""
        total, count = 0.0, 0
        encoded = sorted((self.encode(s) for s in sequences), key=len)
        device = next(self.model.parameters()).device
        with evaluating(self.model):
            for start in range(0, len(encoded), batch_size):
                batch = collate_lm(encoded[start : start + batch_size]).to(device)
                logits = self.model.position_outputs(batch)
                nll = torch.nn.functional.cross_entropy(
                    logits.flatten(0, 1),
                    batch.targets.flatten(),
                    ignore_index=-100,
                    reduction="sum",
                )
                total += float(nll)
                count += int(batch.mask.sum())
        return PerplexityScores(
            {"perplexity": math.exp(total / count), "tokens": count, "sequences": len(encoded)}
        )

    def evaluate(self, path: str | Path) -> PerplexityScores:
        data = self.config.data
        return self.perplexity(read_corpus(path, data.tokenizer, data.max_length))

    @torch.inference_mode()
    def sample(
        self, prompt: str = "", length: int = 30, temperature: float = 1.0, seed: int | None = None
    ) -> list[str]:
        """Continue ``prompt`` by up to ``length`` tokens drawn from the softmax of the logits
        divided by ``temperature`` (lower: more conservative); stops at ``</s>``."""
        if temperature <= 0:
            raise ValueError(f"temperature must be > 0, got {temperature}")
        generator = torch.Generator()
        if seed is not None:
            generator.manual_seed(seed)
        tokens = [t.text for t in tokenize_text(prompt, self.config.data.tokenizer)]
        ids = self.encode(tokens)[:-1]  # <s> and the prompt, no </s>
        state, logits = None, None
        device = next(self.model.parameters()).device
        for word in ids:
            logits, state = self.model.step(torch.tensor([word], device=device), state)
        special = {self.vocabulary.lookup(s) for s in ("<pad>", "<unk>", BOS)}
        generated: list[str] = []
        eos = self.vocabulary.lookup(EOS)
        for _ in range(length):
            assert logits is not None
            scores = logits[0] / temperature
            scores[list(special)] = float("-inf")
            chances = torch.softmax(scores, dim=-1).cpu()  # the generator draws on the CPU
            word = int(torch.multinomial(chances, 1, generator=generator))
            if word == eos:
                break
            generated.append(self.vocabulary.items[word])
            logits, state = self.model.step(torch.tensor([word], device=device), state)
        return generated
