"""One temperature for a tagger's confidences, fitted on dev after training.

A tagger trained to its best dev F1 is overconfident on text it has not seen (the stacked
CoNLL-2003 tagger's top confidence bin claims 0.995 where 94% of its entities are right). The
remedy the classifiers already have, temperature scaling (Guo et al. 2017), carries over: the
emissions and the CRF's transition, start and end scores are all divided by one T, so every
path's score is divided by T and the best path, and the order of the k best, stay as they were;
the confidences soften (T > 1) or sharpen (T < 1).

T minimises the log-loss of each predicted entity's confidence against whether that entity is
in the gold annotation: the number a user reads and thresholds (``--min-confidence``), rather
than the token marginals it is computed from. The loss is one-dimensional and smooth in log T,
so a golden-section search finds it; the predicted entities do not move with T, only their
probabilities, so each step reruns the output math alone on emissions computed once.

Dev is also what training early-stopped on, so an error measured on the data T was fitted on
flatters it: ``calibrate`` also fits on each half of dev (its first and second halves: different
documents) and measures the other half, and reports that held-out error beside the error before.

Document consistency (``bistack.taggers.emissions.consistency``) reads these calibrated
probabilities, so it is settled here too, after T: its threshold is the config's (not fitted on
dev), and ``check_consistency`` says what it does to dev (entities retyped, F1 before and
after).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from bistack.data.conll import Sentence
from bistack.metrics.entities import PRF
from bistack.metrics.text import (
    MAX_TEMPERATURE,
    MIN_TEMPERATURE,
    expected_calibration_error,
    plausible_temperature,
)
from bistack.schemes import PLAIN, spans_from_tags
from bistack.taggers.emissions.consistency import consistent
from bistack.taggers.emissions.decoding import TagDecoder
from bistack.taggers.models.tagging import EmissionBatch, Emitter, Tagging

LOG_BOUNDS = (math.log(MIN_TEMPERATURE), math.log(MAX_TEMPERATURE))  # the temperatures searched
STEPS = 30  # golden-section steps: the bracket shrinks to 0.618**30 of its width (~2e-6)


@dataclass(frozen=True)
class DevEmissions:
    """A tagger's emissions of every dev sentence (computed once) and its gold entities."""

    batches: list[EmissionBatch]
    gold: list[set[tuple[int, int, str]]]

    def tensors(self) -> dict[str, np.ndarray]:
        """The emissions as arrays to save (each batch's ``N.emissions`` ``(batch, seq_len,
        num_tags)`` float32, ``N.lengths`` and ``N.indices``); the gold entities are the
        sentences', read again with them."""
        tensors = {}
        for number, batch in enumerate(self.batches):
            tensors[f"{number}.emissions"] = np.ascontiguousarray(batch.emissions, np.float32)
            tensors[f"{number}.lengths"] = np.asarray(batch.lengths, np.int64)
            tensors[f"{number}.indices"] = np.asarray(batch.indices, np.int64)
        return tensors

    @classmethod
    def from_tensors(
        cls, tensors: dict[str, np.ndarray], sentences: Sequence[Sentence]
    ) -> DevEmissions | None:
        """What :meth:`tensors` gave of ``sentences``' emissions (other arrays beside them
        left), or None where they are not of these sentences (another version's, cut short)."""
        batches, seen = [], []
        for number in range(len(tensors)):
            if f"{number}.emissions" not in tensors:
                break
            try:
                emissions = tensors[f"{number}.emissions"]
                lengths = tensors[f"{number}.lengths"].tolist()
                indices = tensors[f"{number}.indices"].tolist()
            except KeyError:
                return None
            if len(indices) != emissions.shape[0] or lengths != [
                len(sentences[i].tokens) if 0 <= i < len(sentences) else -1 for i in indices
            ]:
                return None
            batches.append(EmissionBatch(indices, lengths, emissions))
            seen += indices
        if sorted(seen) != list(range(len(sentences))):
            return None
        return cls(batches, gold_entities(sentences))

    def replayed(self) -> Emitter:
        """These emissions served again to a pass over the same sentences in the same batches
        (``emission_batches``' own, as ``predict_tokens`` makes them): their tags decoded
        without running the network again."""
        by_batch = {tuple(batch.indices): batch.scores for batch in self.batches}
        return lambda indices, _: by_batch[tuple(indices)]

    def outcomes(
        self, decoder: TagDecoder, chosen: set[int] | None = None
    ) -> tuple[list[float], list[bool]]:
        """(confidence, is it gold) of every entity ``decoder`` predicts in the sentences
        ``chosen`` (all when None)."""
        confidences, correct = [], []
        for batch in self.batches:
            analyses = decoder.analyse(batch.emissions, batch.lengths, confidence=True)
            for index, analysis in zip(batch.indices, analyses, strict=True):
                if chosen is not None and index not in chosen:
                    continue
                for span, confidence in analysis.entities.items():
                    confidences.append(confidence)
                    correct.append(span in self.gold[index])
        return confidences, correct


@dataclass(frozen=True)
class TemperatureFit:
    """The temperature fitted on all of dev, and how calibrated the entity confidences are:
    ECE on all of dev before and after, and held out (fitted on one half, measured on the
    other, both ways)."""

    temperature: float
    entities: int
    ece_before: float
    ece_after: float
    held_out: list[dict[str, float]]

    @property
    def kept(self) -> bool:
        """Whether the model keeps it: not a fit that ran into the search's bounds (the tagger
        near chance on dev, or separating it perfectly, not how sure it should be), and only
        where it made the held-out halves better calibrated."""
        return plausible_temperature(self.temperature) and self.held_out_improves

    @property
    def held_out_improves(self) -> bool:
        return self.held_out_after < self.held_out_before

    @property
    def held_out_before(self) -> float:
        return sum(h["ece_before"] for h in self.held_out) / len(self.held_out)

    @property
    def held_out_after(self) -> float:
        return sum(h["ece_after"] for h in self.held_out) / len(self.held_out)

    def to_json(self) -> dict[str, Any]:
        """What the model directory keeps (config.json's ``calibration``)."""
        return {
            "temperature": self.temperature,
            "fitted_on": "dev: the log-loss of each predicted entity's confidence",
            "entities": self.entities,
            "ece_before": self.ece_before,
            "ece_after": self.ece_after,
            "held_out": self.held_out,
        }

    def summary(self, on: str = "dev", halves_of: str = "dev") -> str:
        """What was fitted, in words: ``on`` what (dev, or a CV's out-of-fold marginals), its
        check on held-out halves ``halves_of`` what."""
        if not plausible_temperature(self.temperature):
            bound, meaning = (
                (MAX_TEMPERATURE, f"a tagger near chance on {on}")
                if self.temperature > 1
                else (MIN_TEMPERATURE, "dev too small or too easy to say how sure to be")
            )
            return (
                f"entity confidences kept as trained: the temperature fitted on {on} "
                f"({self.temperature:.3g}) reached {bound:g}, a bound of the search ({meaning})"
            )
        if not self.held_out_improves:
            return (
                f"entity confidences kept as trained: the temperature fitted on {on} "
                f"({self.temperature:.3f}) made the held-out halves worse calibrated "
                f"({self.held_out_before:.4f} -> {self.held_out_after:.4f}, fitted on one half "
                f"of {halves_of}, measured on the other)"
            )
        return (
            f"entity confidences: temperature {self.temperature:.3f} fitted on {on} "
            f"({self.entities} predicted entities); expected calibration error "
            f"{self.ece_before:.4f} -> {self.ece_after:.4f}, held out (fitted on one half of "
            f"{halves_of}, measured on the other) {self.held_out_before:.4f} -> "
            f"{self.held_out_after:.4f}"
        )


def dev_emissions(
    tagging: Tagging, sentences: Sequence[Sentence], emitter: Emitter | None = None
) -> DevEmissions:
    """The emissions of ``sentences`` (from ``emitter`` when given: cached features; else each
    read with its document's context, as the tagger predicts) and their gold entities, read
    from their tags as conlleval reads them."""
    tokens = [s.tokens for s in sentences]
    documents = [s.document for s in sentences]
    batches = list(tagging.emission_batches(tokens, emitter=emitter, documents=documents))
    return DevEmissions(batches, gold_entities(sentences))


def gold_entities(sentences: Sequence[Sentence]) -> list[set[tuple[int, int, str]]]:
    """Each sentence's gold entities ``(start, end, type)``, read from its tags as conlleval
    reads them."""
    return [{(s.start, s.end, s.label) for s in spans_from_tags(s.tags)} for s in sentences]


def entity_log_loss(confidences: Sequence[float], correct: Sequence[bool]) -> float:
    """Mean binary log-loss of the confidences against the outcomes (0 and 1 clipped away)."""
    total = 0.0
    for confidence, right in zip(confidences, correct, strict=True):
        p = min(max(confidence, 1e-7), 1 - 1e-7)
        total -= math.log(p if right else 1 - p)
    return total / max(len(confidences), 1)


def fit_temperature(dev: DevEmissions, decoder: TagDecoder, chosen: set[int] | None) -> float:
    """The temperature minimising the entity log-loss on the ``chosen`` sentences."""

    def loss(log_temperature: float) -> float:
        tempered = replace(decoder, temperature=math.exp(log_temperature))
        return entity_log_loss(*dev.outcomes(tempered, chosen))

    return minimising_temperature(loss)


def pooled_outcomes(
    parts: Sequence[tuple[DevEmissions, TagDecoder]], temperature: float
) -> tuple[list[float], list[bool]]:
    """(confidence, is it gold) of every entity each decoder predicts on its own sentences, at
    ``temperature``: several taggers' predictions (cross-validation's fold models, each on its
    held-out sentences) pooled."""
    confidences: list[float] = []
    correct: list[bool] = []
    for dev, decoder in parts:
        found = dev.outcomes(replace(decoder, temperature=temperature, consistency=0.0))
        confidences += found[0]
        correct += found[1]
    return confidences, correct


def pooled_temperature(parts: Sequence[tuple[DevEmissions, TagDecoder]]) -> float | None:
    """The one temperature minimising the entity log-loss of ``parts`` pooled; None where they
    cannot say how sure to be (their entities all right, all wrong, or none) or where the fit
    is implausible (see ``plausible_temperature``)."""
    if len(set(pooled_outcomes(parts, 1.0)[1])) < 2:
        return None
    fitted = minimising_temperature(
        lambda log_temperature: entity_log_loss(*pooled_outcomes(parts, math.exp(log_temperature)))
    )
    return fitted if plausible_temperature(fitted) else None


def minimising_temperature(loss: Callable[[float], float]) -> float:
    """The temperature whose log minimises ``loss``, by golden-section search over
    ``LOG_BOUNDS``."""
    low, high = LOG_BOUNDS
    ratio = (math.sqrt(5) - 1) / 2
    a, b = high - ratio * (high - low), low + ratio * (high - low)
    loss_a, loss_b = loss(a), loss(b)
    for _ in range(STEPS):
        if loss_a <= loss_b:
            high, b, loss_b = b, a, loss_a
            a = high - ratio * (high - low)
            loss_a = loss(a)
        else:
            low, a, loss_a = a, b, loss_b
            b = low + ratio * (high - low)
            loss_b = loss(b)
    return math.exp((low + high) / 2)


def ece(
    dev: DevEmissions, decoder: TagDecoder, temperature: float, chosen: set[int] | None
) -> float:
    """Expected calibration error of the entity confidences at ``temperature``."""
    tempered = replace(decoder, temperature=temperature)
    return expected_calibration_error(*dev.outcomes(tempered, chosen))


def calibrate(
    tagging: Tagging,
    sentences: Sequence[Sentence],
    emitter: Emitter | None = None,
    dev: DevEmissions | None = None,
) -> TemperatureFit | None:
    """Fit the tagger's temperature on dev ``sentences`` (their emissions ``dev``, when already
    computed), with its held-out measure. None where dev cannot say how sure to be: a tagger of
    plain tags (no entities), or one whose predicted dev entities are all right (or all wrong),
    where the log-loss falls without end as the confidences go to 1 (or 0)."""
    decoder = replace(tagging.decoder, temperature=1.0, consistency=0.0)
    if decoder.scheme == PLAIN:  # tags of their own (parts of speech): no entities
        return None
    dev = dev or dev_emissions(tagging, sentences, emitter)
    confidences, correct = dev.outcomes(decoder)
    if len(set(correct)) < 2:
        return None
    half = len(sentences) // 2
    halves = [set(range(half)), set(range(half, len(sentences)))]
    held_out = []
    for fitted_on, measured_on in (halves, halves[::-1]):
        temperature = fit_temperature(dev, decoder, fitted_on)
        held_out.append(
            {
                "temperature": temperature,
                "ece_before": ece(dev, decoder, 1.0, measured_on),
                "ece_after": ece(dev, decoder, temperature, measured_on),
            }
        )
    temperature = fit_temperature(dev, decoder, None)
    return TemperatureFit(
        temperature=temperature,
        entities=len(confidences),
        ece_before=ece(dev, decoder, 1.0, None),
        ece_after=ece(dev, decoder, temperature, None),
        held_out=held_out,
    )


@dataclass(frozen=True)
class ConsistencyCheck:
    """What document consistency at ``threshold`` does to dev: entity F1 (0-100) before and
    after, the entities it retyped, how many of them were right before and are after, and the
    expected calibration error of the entity confidences before and after."""

    threshold: float
    f1_before: float
    f1_after: float
    retyped: int
    right_before: int
    right_after: int
    ece_before: float
    ece_after: float

    def to_json(self) -> dict[str, Any]:
        """What the model keeps (config.json's ``calibration``): the threshold its decoder
        uses, and this measure of it."""
        measured = {key: value for key, value in asdict(self).items() if key != "threshold"}
        return {"consistency": self.threshold, "consistency_dev": measured}

    def summary(self, measured: str = "on dev") -> str:
        """What the check found, ``measured`` where (on dev, or out of fold)."""
        return (
            f"document consistency: entities under {self.threshold:g} sure take the type of the "
            f"same words at least as sure in their document; {measured} {self.retyped} retyped "
            f"({self.right_before} right before, {self.right_after} after), entity F1 "
            f"{self.f1_before:.2f} -> {self.f1_after:.2f}, expected calibration error "
            f"{self.ece_before:.4f} -> {self.ece_after:.4f}"
        )


def check_consistency(
    dev: DevEmissions,
    decoder: TagDecoder,
    sentences: Sequence[Sentence],
    threshold: float,
) -> ConsistencyCheck:
    """Dev entity F1 of ``decoder`` (calibrated) each sentence alone, and with document
    consistency at ``threshold`` (each sentence's document: ``Sentence.document``)."""
    alone = replace(decoder, consistency=0.0)
    analyses: list[Any] = [None] * len(sentences)
    emissions = {}  # each sentence's own ``(length, num_tags)``
    for batch in dev.batches:
        found = alone.analyse(batch.emissions, batch.lengths, confidence=True)
        for row, (index, analysis) in enumerate(zip(batch.indices, found, strict=True)):
            analyses[index] = analysis
            emissions[index] = batch.emissions[row, : batch.lengths[row]]
    tokens = [s.tokens for s in sentences]
    documents = [s.document for s in sentences]
    rule = replace(alone, consistency=threshold)
    after = consistent(rule, analyses, tokens, documents, emissions)
    before_spans = [set(a.entities) for a in analyses]
    after_spans = [set(a.entities) for a in after]
    retyped = [  # (sentence, its span before, after)
        (index, old, new)
        for index, (a, b) in enumerate(zip(analyses, after, strict=True))
        for old, new in zip(a.entities, b.entities, strict=True)
        if old != new
    ]
    return ConsistencyCheck(
        threshold,
        _entity_f1(before_spans, dev.gold),
        _entity_f1(after_spans, dev.gold),
        len(retyped),
        sum(old in dev.gold[index] for index, old, _ in retyped),
        sum(new in dev.gold[index] for index, _, new in retyped),
        _entity_ece(analyses, dev.gold),
        _entity_ece(after, dev.gold),
    )


def _entity_ece(analyses: Sequence[Any], gold: Sequence[set[Any]]) -> float:
    """Expected calibration error of the analyses' entity confidences against ``gold``."""
    pairs = [
        (confidence, span in gold[index])
        for index, analysis in enumerate(analyses)
        for span, confidence in analysis.entities.items()
    ]
    return expected_calibration_error([c for c, _ in pairs], [r for _, r in pairs])


def _entity_f1(predicted: Sequence[set[Any]], gold: Sequence[set[Any]]) -> float:
    """Micro-averaged entity F1 (0-100), as conlleval counts: exact span and type."""
    right = sum(len(p & g) for p, g in zip(predicted, gold, strict=True))
    return PRF.from_counts(sum(map(len, gold)), sum(map(len, predicted)), right).f1
