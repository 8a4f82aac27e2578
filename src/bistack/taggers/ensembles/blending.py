"""Taggers blend as one CRF: a tagger CV keeps its out-of-fold log-potentials (each sentence's
emissions as the fold model that never saw it gives them, and that fold's CRF scores:
``bistack.taggers.ensembles.potentials``), and ``bistack blend`` weights the runs'
potentials. A weighted sum of CRFs is a CRF, decoded exactly by Viterbi: at weight 1 on one run
the blend tags each sentence as that run's fold did, and scores that run's CV.

Entity F1 is not differentiable in the weights: they are the point of a grid over the simplex
(step 0.1) with the best out-of-fold entity F1 (of equal ones, the one with fewest runs), or
Caruana's greedy selection scored by it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from bistack.errors import ConfigError
from bistack.folds.blending import check_oof_rows
from bistack.folds.contract import JSON
from bistack.folds.plan import FoldPlan
from bistack.folds.weights import BlendMethod, blended, greedy_weights, grid_weights
from bistack.kernels.crf_compiled import IMPOSSIBLE, viterbi_best
from bistack.metrics.entities import score_entities
from bistack.schemes import convert_tags, spans_from_tags
from bistack.taggers.emissions.confidence import CRFScores
from bistack.taggers.emissions.decoding import TagDecoder
from bistack.taggers.ensembles.potentials import POTENTIALS_FILE, read_potentials

if TYPE_CHECKING:
    from bistack.cards import Card
    from bistack.taggers.emissions.calibration import DevEmissions

DECODED_AT_ONCE = 512  # sentences decoded in one batch while the weights are searched


class TaggerBlendPart:
    """A tagger CV as a blend weighs it: each sentence's out-of-fold log-potentials packed
    ``(sentences, longest + tags + 2, tags)``: its emissions (IMPOSSIBLE past its end), then
    its fold's transitions [from, to], start and end scores, so that a weighted sum of runs'
    rows is the weighted sum of their CRFs; its gold tags, and how the blend decodes."""

    OBJECTIVE: ClassVar[str] = (
        "entity F1 of the weighted sum of the runs' CRF log-potentials, decoded exactly by "
        "Viterbi (a grid over the simplex at step 0.1, or the greedy selection)"
    )
    predicts = "token log-potentials"

    def __init__(
        self,
        predictions: np.ndarray,
        lengths: list[int],
        folds: list[int],
        gold: list[list[str]],
        names: list[str],
        scheme: str,
        output_scheme: str,
        metric: str,
    ) -> None:
        self.predictions = predictions
        self.lengths = lengths
        self.folds = folds
        self.gold = gold
        self.names = names
        self.scheme = scheme
        self.output_scheme = output_scheme
        self.metric = metric
        self.longest = predictions.shape[1] - len(names) - 2

    @classmethod
    def read(
        cls, card: Card, folder: Path, config: dict[str, Any], plan: FoldPlan, metric: str
    ) -> TaggerBlendPart:
        """The tagger CV in ``folder``: its ``oof.jsonl`` (each sentence's line, fold and
        gold tags, checked against ``plan``) and its potentials, the tags sorted so that runs'
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
        arrays, meta = read_potentials(folder / POTENTIALS_FILE)
        lengths = [len(tags) for tags in gold]
        offsets = arrays["offsets"]
        if offsets.tolist() != np.concatenate([[0], np.cumsum(lengths)]).tolist():
            raise ConfigError(
                f"{folder / POTENTIALS_FILE}: not the potentials of {oof}'s sentences (their "
                "lengths differ); was it edited? Run the same bistack cv again to write it anew"
            )
        labels = list(meta["labels"])
        order = sorted(range(len(labels)), key=labels.__getitem__)
        tags, longest = len(labels), max(lengths)
        packed = np.full((len(lengths), longest + tags + 2, tags), IMPOSSIBLE, dtype=np.float32)
        emissions, sentence_folds = arrays["emissions"], arrays["fold"].tolist()
        for sentence, fold in enumerate(sentence_folds):
            start, end = offsets[sentence], offsets[sentence + 1]
            packed[sentence, : end - start] = emissions[start:end][:, order]
            packed[sentence, longest : longest + tags] = arrays["transitions"][fold][
                np.ix_(order, order)
            ]
            packed[sentence, -2] = arrays["start"][fold][order]
            packed[sentence, -1] = arrays["end"][fold][order]
        names = [labels[i] for i in order]
        return cls(
            packed,
            lengths,
            sentence_folds,
            gold,
            names,
            meta["scheme"],
            meta["output_scheme"],
            metric,
        )

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

    def paths(self, predictions: np.ndarray, rows: Sequence[int] | None = None) -> list[list[str]]:
        """The tags (in the file's scheme) of ``rows`` decoded from their potentials
        ``predictions`` (one a row of ``rows``, in order), by Viterbi under each sentence's
        fold's CRF (sentences of one fold decoded together)."""
        chosen = list(range(len(self.lengths))) if rows is None else list(rows)
        tags = len(self.names)
        by_fold: dict[int, list[int]] = {}
        for position, row in enumerate(chosen):
            by_fold.setdefault(self.folds[row], []).append(position)
        found: dict[int, list[str]] = {}
        for positions in by_fold.values():
            first = predictions[positions[0]]
            crf = (first[self.longest : self.longest + tags], first[-2], first[-1])
            for start in range(0, len(positions), DECODED_AT_ONCE):
                part = positions[start : start + DECODED_AT_ONCE]
                lengths = np.asarray([self.lengths[chosen[p]] for p in part], dtype=np.int64)
                emissions = np.ascontiguousarray(predictions[part, : lengths.max()])
                best, _ = viterbi_best(emissions, lengths, *crf)
                for p, path, length in zip(part, best, lengths, strict=True):
                    labels = [self.names[tag] for tag in path[:length]]
                    found[p] = convert_tags(labels, self.output_scheme)
        return [found[p] for p in range(len(chosen))]

    def score(self, predictions: np.ndarray, rows: Sequence[int] | None = None) -> float:
        """The entity score (the CV's metric) of potentials ``predictions`` of ``rows``."""
        chosen = list(range(len(self.lengths))) if rows is None else list(rows)
        predicted = self.paths(predictions, chosen)
        found = score_entities([self.gold[row] for row in chosen], predicted).to_json()
        return float(found[self.metric])  # type: ignore[arg-type]

    def blend_calibration(
        self,
        stacked: np.ndarray,
        weights: np.ndarray,
        fold_weights: list[list[float]],
        assignment: Sequence[int],
    ) -> JSON:
        """The blend's temperature, fitted as a CV ensemble fits its own: on every sentence's
        out-of-fold potentials blended by ``weights``, the entity log-loss of its confidences
        minimised. Kept only where it makes held-out folds better calibrated, checked nested:
        each fold's entities at the temperature fitted on the other folds' sentences, blended
        by that fold's nested weights (fitted without it too), against those at 1."""
        from bistack.taggers.emissions.calibration import (
            entity_log_loss,
            pooled_outcomes,
            pooled_temperature,
        )

        every = list(range(len(self.lengths)))
        temperature = pooled_temperature(self.scored(blended(weights, stacked), every))
        before: tuple[list[float], list[bool]] = ([], [])
        after: tuple[list[float], list[bool]] = ([], [])
        for fold, chosen in enumerate(fold_weights):
            held = [i for i, f in enumerate(assignment) if f == fold]
            others = [i for i, f in enumerate(assignment) if f != fold]
            fold_blend = np.asarray(chosen)
            fitted = pooled_temperature(
                self.scored(blended(fold_blend, stacked[:, others]), others)
            )
            parts = self.scored(blended(fold_blend, stacked[:, held]), held)
            for outcomes, tempered in ((before, 1.0), (after, fitted or 1.0)):
                found = pooled_outcomes(parts, tempered)
                outcomes[0].extend(found[0])
                outcomes[1].extend(found[1])
        if temperature is None or len(set(before[1])) < 2:
            return {"calibration": {"note": "no plausible temperature fits: confidences as the "
                                    "blended CRF gives them"}}  # fmt: skip
        loss_before, loss_after = entity_log_loss(*before), entity_log_loss(*after)
        fitted_on = (
            "the blend's out-of-fold potentials: the log-loss of each predicted entity's "
            "confidence; checked nested, each fold at a temperature fitted without it"
        )
        found_fit = {
            "temperature": temperature,
            "fitted_on": fitted_on,
            "nested_log_loss_before": loss_before,
            "nested_log_loss_after": loss_after,
            "kept": loss_after < loss_before,
        }
        kept = {"temperature": temperature} if loss_after < loss_before else {}
        return {"out_of_fold_fit": found_fit, "calibration": kept | {"fitted_on": fitted_on}}

    def scored(
        self, predictions: np.ndarray, rows: Sequence[int]
    ) -> list[tuple[DevEmissions, TagDecoder]]:
        """The sentences ``rows`` (their potentials ``predictions``, in order) as a tagger's
        held-out emissions and the decoder that reads them, a pair per fold's CRF, with their
        gold entities (what a temperature is fitted on)."""
        from bistack.taggers.emissions.calibration import DevEmissions
        from bistack.taggers.models.tagging import EmissionBatch

        tags = len(self.names)
        by_fold: dict[int, list[int]] = {}
        for position, row in enumerate(rows):
            by_fold.setdefault(self.folds[row], []).append(position)
        pairs = []
        for positions in by_fold.values():
            first = np.asarray(predictions[positions[0]], dtype=np.float32)
            crf = CRFScores(first[self.longest : self.longest + tags], first[-2], first[-1])
            lengths = [self.lengths[rows[p]] for p in positions]
            emissions = np.ascontiguousarray(predictions[positions, : max(lengths)], np.float32)
            gold = [
                {(s.start, s.end, s.label) for s in spans_from_tags(self.gold[rows[p]])}
                for p in positions
            ]
            batch = EmissionBatch(list(range(len(positions))), lengths, emissions)
            decoder = TagDecoder(self.names, self.scheme, crf)
            pairs.append((DevEmissions([batch], gold), decoder))
        return pairs

    @staticmethod
    def kept_calibration(ensemble: JSON) -> JSON:
        """Nothing: a tagger blend's confidences are its blended CRF's, at the temperature the
        blend fits of its own (see ``blend_calibration``)."""
        return {}
