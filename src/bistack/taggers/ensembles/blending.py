"""Taggers blend: a tagger CV keeps its out-of-fold token marginals (each sentence's tags'
probabilities, as the fold model that never saw it gives them, in the fold ensemble's tags),
and ``bistack blend`` weights the runs' marginals, decoding the weighted mean under the
scheme's constraints as the tagger ensemble decodes its mean.

Entity F1 is not differentiable in the weights: they are the point of a grid over the simplex
(step 0.1) with the best out-of-fold entity F1 (of equal ones, the one with fewest runs), or
Caruana's greedy selection scored by it.

``oof_marginals.safetensors`` holds ``marginals`` ``(tokens, tags)`` (every sentence's tokens
end to end, in the file's order) and ``offsets`` ``(sentences + 1,)`` (where each sentence's
tokens start), with the tags, the scheme they are decoded in and the file's scheme as
metadata.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from bistack.errors import ConfigError
from bistack.files.modeldir import atomic_write
from bistack.folds.blending import check_oof_rows
from bistack.folds.contract import JSON
from bistack.folds.plan import FoldPlan
from bistack.folds.weights import BlendMethod, blended, greedy_weights, grid_weights
from bistack.kernels.crf_compiled import IMPOSSIBLE
from bistack.metrics.entities import score_entities
from bistack.schemes import convert_tags
from bistack.taggers.emissions.decoding import TagDecoder

if TYPE_CHECKING:
    from bistack.cards import Card

MARGINALS_FILE = "oof_marginals.safetensors"
DECODED_AT_ONCE = 512  # sentences decoded in one batch while the weights are searched


def save_marginals(
    path: Path,
    marginals: Sequence[np.ndarray],
    labels: Sequence[str],
    scheme: str,
    output_scheme: str,
) -> None:
    """Each sentence's marginals ``(tokens, tags)`` (in the file's order, over ``labels`` in
    ``scheme``), written whole or not at all."""
    from safetensors.numpy import save_file

    lengths = [len(m) for m in marginals]
    tensors: dict[str, np.ndarray] = {
        "marginals": np.ascontiguousarray(np.concatenate(marginals), dtype=np.float32),
        "offsets": np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),
    }
    meta = {"labels": list(labels), "scheme": scheme, "output_scheme": output_scheme}
    metadata = {"tags": json.dumps(meta)}
    atomic_write(path, lambda temporary: save_file(tensors, temporary, metadata=metadata))


class TaggerBlendPart:
    """A tagger CV as a blend weighs it: each sentence's out-of-fold marginals ``(sentences,
    longest, tags)`` (0 past a sentence's end), its gold tags, and how the blend decodes."""

    OBJECTIVE: ClassVar[str] = (
        "entity F1 of the weighted mean of token marginals, decoded under the scheme's "
        "constraints (a grid over the simplex at step 0.1, or the greedy selection)"
    )
    predicts = "token marginals"

    def __init__(
        self,
        predictions: np.ndarray,
        lengths: list[int],
        gold: list[list[str]],
        names: list[str],
        scheme: str,
        output_scheme: str,
        metric: str,
    ) -> None:
        self.predictions = predictions
        self.lengths = lengths
        self.gold = gold
        self.names = names
        self.output_scheme = output_scheme
        self.metric = metric
        self.decoder = TagDecoder.constrained(names, scheme)

    @classmethod
    def read(
        cls, card: Card, folder: Path, config: dict[str, Any], plan: FoldPlan, metric: str
    ) -> TaggerBlendPart:
        """The tagger CV in ``folder``: its ``oof.jsonl`` (each sentence's line, fold and
        gold tags, checked against ``plan``) and its marginals, the tags sorted so that runs'
        columns align; an error naming what is missing or was edited."""
        oof = folder / "oof.jsonl"
        lines, folds, gold = [], [], []
        try:
            with oof.open(encoding="utf-8") as handle:
                for line in handle:
                    record = json.loads(line)
                    folds.append(record["fold"])
                    gold.append([str(tag) for tag in record["gold"]])
                    lines.append(int(record["line"]))
        except (ValueError, KeyError, TypeError) as error:
            raise ConfigError(
                f"{oof}, line {len(lines) + 1}: not an out-of-fold tagging bistack cv wrote "
                f"({error}); was it edited?"
            ) from None
        check_oof_rows(oof, lines, folds, plan)
        marginals, offsets, meta = read_marginals(folder / MARGINALS_FILE)
        lengths = [len(tags) for tags in gold]
        if offsets.tolist() != np.concatenate([[0], np.cumsum(lengths)]).tolist():
            raise ConfigError(
                f"{folder / MARGINALS_FILE}: not the marginals of {oof}'s sentences (their "
                "lengths differ); was it edited? Run the same bistack cv again to write it anew"
            )
        labels = list(meta["labels"])
        order = sorted(range(len(labels)), key=labels.__getitem__)
        padded = np.zeros((len(lengths), max(lengths), len(labels)), dtype=np.float32)
        for sentence, (start, end) in enumerate(itertools.pairwise(offsets)):
            padded[sentence, : end - start] = marginals[start:end][:, order]
        names = [labels[i] for i in order]
        return cls(padded, lengths, gold, names, meta["scheme"], meta["output_scheme"], metric)

    def fit(
        self, stacked: np.ndarray, rows: list[int], method: BlendMethod, rounds: int
    ) -> np.ndarray:
        """The weights with the best entity F1 on ``rows``: the grid's, or the greedy
        selection's over ``rounds`` rounds."""
        chosen = stacked[:, rows]
        if method == "greedy":
            return greedy_weights(lambda blend: (-self.score(blend, rows), blend), chosen, rounds)
        return grid_weights(
            lambda weights: -self.score(blended(weights, chosen), rows), len(stacked)
        )

    def score(self, predictions: np.ndarray, rows: Sequence[int] | None = None) -> float:
        """The entity score (the CV's metric) of marginals ``predictions`` of ``rows``, each
        sentence decoded as the tagger ensemble decodes its mean marginals."""
        chosen = list(range(len(self.lengths))) if rows is None else list(rows)
        predicted = []
        for start in range(0, len(chosen), DECODED_AT_ONCE):
            part = chosen[start : start + DECODED_AT_ONCE]
            lengths = [self.lengths[row] for row in part]
            values = predictions[start : start + len(part), : max(lengths)]
            with np.errstate(divide="ignore"):
                logs = np.maximum(np.log(values), IMPOSSIBLE).astype(np.float32)
            for analysis in self.decoder.analyse(logs, lengths, confidence=False):
                tags = [self.names[tag] for tag in analysis.path]
                predicted.append(convert_tags(tags, self.output_scheme))
        found = score_entities([self.gold[row] for row in chosen], predicted).to_json()
        return float(found[self.metric])  # type: ignore[arg-type]

    @staticmethod
    def kept_calibration(ensemble: JSON) -> JSON:
        """Nothing: a tagger blend's confidences are its weighted mean marginals' (a run's
        temperature was fitted on its own mean, not on the blend's)."""
        return {}


def read_marginals(path: Path) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """``oof_marginals.safetensors``: the marginals, the offsets and what they are over; an
    error naming the file where it is missing or damaged."""
    from safetensors import SafetensorError, safe_open

    if not path.is_file():
        raise ConfigError(
            f"{path}: missing: a blend of taggers weighs the out-of-fold token marginals a "
            "tagger CV keeps there (a CV of plain tags, which have no entities to score a "
            "blend by, keeps none; one of an earlier version neither: run the same bistack cv "
            "again with --overwrite)"
        )
    try:
        with safe_open(str(path), framework="numpy") as opened:
            marginals = opened.get_tensor("marginals")
            offsets = opened.get_tensor("offsets")
            meta = json.loads((opened.metadata() or {})["tags"])
        finite = bool(np.isfinite(marginals).all()) and marginals.min(initial=0.0) >= 0.0
        if not finite or marginals.ndim != 2 or marginals.shape[1] != len(meta["labels"]):
            raise ValueError("marginals that are not probabilities over its tags")
    except (SafetensorError, OSError, KeyError, ValueError) as error:
        raise ConfigError(
            f"{path}: not the out-of-fold marginals bistack cv wrote ({error}); was it edited? "
            "Run the same bistack cv again to write it anew"
        ) from None
    return marginals, offsets, meta
