"""A fold ensemble of text classifiers or regressors, one model to every outlet: the members'
class probabilities averaged (then, where ``bistack cv`` fitted one on the out-of-fold
predictions, divided by the ensemble's temperature in log space), or their values averaged in
original units (then, where ``bistack cv`` fitted one, scaled and offset per target). A blend
(``bistack blend``, :class:`TextBlend`) is several such ensembles, weighted.

Members over one frozen backbone share its forward: the backbone reads each text once and
every member's head reads its per-layer vectors (a fine-tuned member runs its own backbone).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from bistack.files.ensemble_dir import EnsembleMeta
from bistack.models.ensembles import OpenMember, open_members
from bistack.text_models.base import TextModelBase
from bistack.text_models.outputs import ClassOutputs, RawOutputs, TargetOutputs


class TextEnsemble(TextModelBase):
    """K text models of one kind predicting as one (``members``: loaded models)."""

    def __init__(self, members: Sequence[TextModelBase], meta: EnsembleMeta) -> None:
        self.members = list(members)
        self.meta = meta
        self.config = self.members[0].config
        self.outputs = combined_outputs(self.members, meta)

    @classmethod
    def open(cls, path: Path, meta: EnsembleMeta, open_member: OpenMember) -> TextEnsemble:
        """The ensemble directory at ``path`` (``meta``: its ensemble.json, read and checked),
        each member opened by ``open_member``, a frozen backbone loaded once; a blend's (its
        ``runs``) as a :class:`TextBlend`."""
        if meta.blend:
            return TextBlend.open_runs(path, meta, open_member)
        return cls(open_members(path, meta, open_member), meta)

    def describe(self) -> dict[str, Any]:
        return super().describe() | {"ensemble": self.meta.described()}

    def attention_refusal(self) -> str:
        """An ensemble's members attend each their own way: an average explains no model (so
        ``predict(attention=True)`` is refused)."""
        first = self.meta.members[0]  # every ensemble.json names its members (checked)
        return (
            "an ensemble has no one attention to show (each member attends its own way); "
            f"explain or predict with one of its members (its members/ folder, such as "
            f"members/{first}) for token weights"
        )

    def member_outputs(
        self,
        texts: Sequence[str],
        batch_size: int | None = None,
        progress: bool = False,
        stages: dict[Any, Any] | None = None,
    ) -> list[np.ndarray]:
        """Each member's ``(texts, outputs)`` probabilities (over the ensemble's labels) or
        values, a shared first stage (a frozen backbone's vectors) computed once (``stages``:
        those computed already, by their key)."""
        stages = {} if stages is None else stages
        outputs = []
        for member in self.members:
            key = member.shared_stage_key()
            if key is None:
                raw = member.run(texts, batch_size, progress)
            else:
                if key not in stages:
                    stages[key] = member.shared_stage(texts, batch_size, progress)
                raw = member.run_after(stages[key], texts)
            outputs.append(member.outputs.member_values(raw, self.outputs))  # type: ignore[arg-type]
        return outputs

    def run(
        self, texts: Sequence[str], batch_size: int | None = None, progress: bool = False
    ) -> RawOutputs:
        """The members' mean: log-probabilities (the ensemble's outputs' logits) or values,
        a chunk of texts at a time (see :meth:`chunks`)."""
        means = [
            np.mean(np.stack(self.member_outputs(chunk, batch_size, progress)), axis=0)
            for chunk in self.chunks(texts, batch_size)
        ]
        return self.outputs.as_raw(np.concatenate(means))

    def chunks(self, texts: Sequence[str], batch_size: int | None) -> list[Sequence[str]]:
        """``texts`` in chunks of at most the predict batch (``batch_size``, else the
        evaluation batch size): the members, and a first stage they
        share, hold one chunk's activations at a time, whatever the number of texts."""
        size = batch_size or self.config.train.eval_batch_size
        return [texts[start : start + size] for start in range(0, len(texts), size)] or [texts]


class TextBlend(TextEnsemble):
    """Cross-validated runs weighted as one model (``bistack blend``): each run's fold models
    averaged and calibrated as its own ensemble is, then the runs' probabilities or values
    weighted by the blend's ``weights``. A frozen backbone several runs share (the same files,
    read with the same settings) is opened once and reads each text once for all of them."""

    def __init__(
        self, runs: Sequence[TextEnsemble], weights: Sequence[float], meta: EnsembleMeta
    ) -> None:
        self.runs = list(runs)
        self.weights = [float(w) for w in weights]
        # The blend's own outputs apply no calibration: its runs' do.
        super().__init__([m for run in self.runs for m in run.members], replace(meta, values={}))
        self.meta = meta

    @classmethod
    def open_runs(cls, path: Path, meta: EnsembleMeta, open_member: OpenMember) -> TextBlend:
        """The blend's directory at ``path`` (``meta``: its ensemble.json, with ``runs``)."""
        opened: dict[str, dict[str, Any]] = {}  # a frozen backbone's parts, by its fingerprint
        runs = []
        for run in meta.runs:
            backbone = run.backbone
            members = open_members(
                path, run, open_member, opened.get(backbone) if backbone else None
            )
            if backbone:
                opened.setdefault(backbone, members[0].shared_parts())
            runs.append(TextEnsemble(members, run))
        return cls(runs, [run.weight for run in meta.runs], meta)

    def run(
        self, texts: Sequence[str], batch_size: int | None = None, progress: bool = False
    ) -> RawOutputs:
        """The runs' calibrated probabilities or values, weighted, a chunk of texts at a time
        (a first stage the runs share computed once a chunk)."""
        totals = []
        for chunk in self.chunks(texts, batch_size):
            stages: dict[Any, Any] = {}
            total = np.zeros((len(chunk), len(self.outputs)))
            for weight, run in zip(self.weights, self.runs, strict=True):
                mean = np.mean(
                    np.stack(run.member_outputs(chunk, batch_size, progress, stages)), axis=0
                )
                values = run.outputs.averaged(run.outputs.as_raw(mean))
                total += weight * self.outputs.in_columns(values, run.outputs.names)
            totals.append(total)
        return self.outputs.as_raw(np.concatenate(totals).astype(np.float32))


def combined_outputs(
    members: Sequence[TextModelBase], meta: EnsembleMeta
) -> ClassOutputs | TargetOutputs:
    """What the ensemble's outputs mean, as the members' kind of outputs combines them (with
    the settings ``meta`` fitted on the out-of-fold predictions)."""
    outputs: list[Any] = [m.outputs for m in members]  # of one kind: the first's class combines
    return type(outputs[0]).combine(outputs, meta.values)
