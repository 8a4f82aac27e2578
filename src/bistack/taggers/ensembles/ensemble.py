"""A fold ensemble of taggers, one tagger to every outlet: each member's token marginals
(its own CRF's over every path, or its softmax head's, at its own temperature) averaged over
the ensemble's tags, then the most probable path the scheme allows decoded from their logs
(``TagDecoder.constrained``), with token and entity confidences as any tagger gives them.
Averaging marginals rather than paths lets members that disagree on a span's edges still
agree on its tokens; the scheme's constraints keep every path well formed.

Where ``bistack cv`` fitted one, the ensemble's confidences divide those logs by a temperature
fitted on the out-of-fold marginals (``calibration`` in ``ensemble.json``): each member reads
its own held-out sentences there, decoded as the ensemble decodes. A blend of tagger CVs
(``bistack blend``) is one CRF: the weighted sum of its members' log-potentials (emissions and
CRF scores, each run's weight shared by its members: ``bistack.taggers.ensembles.potentials``),
decoded exactly, as the blend's weights were scored on the runs' out-of-fold potentials.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager, ExitStack
from pathlib import Path
from typing import Any

import numpy as np

from bistack.errors import ModelFileError
from bistack.files.ensemble_dir import EnsembleMeta
from bistack.kernels.crf_compiled import IMPOSSIBLE
from bistack.models.ensembles import OpenMember, open_members
from bistack.taggers.emissions.decoding import TagDecoder
from bistack.taggers.ensembles.potentials import aligned_crf, aligned_emissions, weighted_crf
from bistack.taggers.models.tagging import Emitter, Tagging, host_array


class TaggerEnsemble(Tagging):
    """K taggers trained in one scheme, tagging as one (``members``: loaded), their marginals
    averaged, or weighted by ``weights`` (one a member, summing to one: a blend's, each run's
    weight shared by its members)."""

    def __init__(
        self,
        members: Sequence[Tagging],
        meta: EnsembleMeta,
        weights: Sequence[float] | None = None,
    ) -> None:
        self.members = list(members)
        self.meta = meta
        self.weights = {
            id(member): weight
            for member, weight in zip(
                self.members, weights or [1.0] * len(self.members), strict=True
            )
        }
        self.config = self.members[0].config
        self.output_scheme = self.members[0].output_scheme
        schemes = {(m.decoder.scheme, m.output_scheme) for m in self.members}
        if len(schemes) > 1:
            raise ModelFileError(f"ensemble members tag in different schemes ({sorted(schemes)})")
        labels = list(self.members[0].decoder.labels)  # then any a fold alone learnt
        labels += sorted({t for m in self.members for t in m.decoder.labels} - set(labels))
        scheme = self.members[0].decoder.scheme
        self.blended = meta.blend
        if self.blended:  # one CRF: the weighted sum of the members'
            total = sum(self.weights.values())
            parts = [(self.weights[id(m)] / total, aligned_crf(m.decoder, labels)) for m in members]
            self._decoder = TagDecoder(labels, scheme, weighted_crf(parts))
        else:
            self._decoder = TagDecoder.constrained(labels, scheme)
        self.calibration = dict(meta.values.get("calibration") or {})

    @classmethod
    def open(cls, path: Path, meta: EnsembleMeta, open_member: OpenMember) -> TaggerEnsemble:
        """The ensemble directory at ``path`` (``meta``: its ensemble.json, read and checked),
        each member opened by ``open_member``, a frozen backbone loaded once; of a blend, each
        run's members given the run's weight, shared among them (a frozen backbone several
        runs share opened once)."""
        if not meta.blend:
            return cls(open_members(path, meta, open_member), meta)
        opened: dict[str, dict[str, Any]] = {}  # a frozen backbone's parts, by its fingerprint
        members: list[Tagging] = []
        weights: list[float] = []
        for run in meta.runs:
            backbone = run.backbone
            found = open_members(path, run, open_member, opened.get(backbone) if backbone else None)
            if backbone:
                opened.setdefault(backbone, found[0].shared_parts())
            members += found
            weights += [run.weight / len(found)] * len(found)
        return cls(members, meta, weights)

    @property
    def decoder(self) -> TagDecoder:
        return self.calibrated(self._decoder)

    @property
    def batch_size(self) -> int:
        return self.members[0].batch_size

    def predicting(self) -> AbstractContextManager[Any]:
        stack = ExitStack()
        for member in self.members:
            stack.enter_context(member.predicting())
        return stack

    @property
    def device(self) -> str:
        """Where its members run: an accelerator when any of them is on one."""
        return next((m.device for m in self.members if m.device != "cpu"), "cpu")

    def describe(self) -> dict[str, Any]:
        return super().describe() | {"ensemble": self.meta.described()}

    def emissions(self, indices: Sequence[int], sentences: Sequence[Sequence[str]]) -> np.ndarray:
        return self.emitter_of(sentences, None)(indices, sentences)

    def emitter_of(
        self, sentences: Sequence[Sequence[str]], documents: Sequence[Any] | None
    ) -> Emitter:
        """The log of the members' mean marginals, each member reading the sentences as it
        does alone (its document context included); members over one frozen backbone read
        alike share its pass (one a batch, not one a member)."""
        groups: dict[Any, list[Tagging]] = {}  # members that share a first stage, together
        for member in self.members:
            key = member.shared_stage_key()
            groups.setdefault(id(member) if key is None else key, []).append(member)
        emitters = [
            (group, group[0].shared_emitter(group, sentences, documents))
            if len(group) > 1
            else (group, group[0].emitter_of(sentences, documents))
            for group in groups.values()
        ]

        def emit(indices: Sequence[int], chosen: Sequence[Sequence[str]]) -> np.ndarray:
            lengths = [len(sentence) for sentence in chosen]
            width = max(lengths)
            parts = []
            for group, emitter in emitters:
                side_by_side, start = host_array(emitter(indices, chosen))[:, :width], 0
                for member in group:  # each member's tags, in order along the last axis
                    count = len(member.decoder.labels)
                    parts.append((member, side_by_side[:, :, start : start + count]))
                    start += count
            return self.log_mean_marginals(parts, lengths)

        return emit

    def log_mean_marginals(
        self, parts: Sequence[tuple[Tagging, np.ndarray]], lengths: Sequence[int]
    ) -> np.ndarray:
        """What the ensemble decodes, ``(batch, seq_len, ensemble's tags)``, from ``parts`` (a
        member, and its emissions ``(batch, seq_len, member's tags)`` of one batch): the log of
        the members' mean marginals (a tag no member gives: IMPOSSIBLE), or, of a blend, the
        weighted sum of their log-potentials (its decoder holds the sum of their CRFs)."""
        width = max(lengths)
        column = {tag: index for index, tag in enumerate(self._decoder.labels)}
        total = np.zeros((len(lengths), width, len(column)), dtype=np.float32)
        weights = [self.weights.get(id(member), 1.0) for member, _ in parts]
        if self.blended:
            labels = list(self._decoder.labels)
            for (member, scores), weight in zip(parts, weights, strict=True):
                total += weight * aligned_emissions(member.decoder, scores[:, :width], labels)
            return total / sum(weights)
        for (member, scores), weight in zip(parts, weights, strict=True):
            decoder = member.decoder
            columns = [column[tag] for tag in decoder.labels]
            total[:, :, columns] += weight * decoder.marginals(scores[:, :width], lengths)
        mean = total / sum(weights)
        with np.errstate(divide="ignore"):
            return np.maximum(np.log(mean), IMPOSSIBLE).astype(np.float32)
