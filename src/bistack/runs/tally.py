"""A training pass's losses and gradient norms, kept on the device and read back in one copy
every ``READ_EVERY`` batches (and when dev is scored or the pass ends): reading each loss and
norm as it comes would make the host wait for the device twice a step.

A loss or gradient norm that is not finite still stops the run, naming the epoch and batch it
came at, only up to ``READ_EVERY`` batches later; the best model on disk is untouched, since
dev is never scored before the tally has been read. A float16 loss scaler's overflow (a norm
that is not finite, a step the scaler skips) is tolerated up to ``MAX_SKIPPED_STEPS`` in a
row.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from bistack.errors import BistackError

# Batches between reads of the device: the progress bar's loss is this fresh.
READ_EVERY = 20
# A float16 loss scaler halves its scale at each step whose gradients overflow, and skips it;
# this many in a row (a scale 2^30 smaller) and the gradients are not finite at any scale.
MAX_SKIPPED_STEPS = 30


class TrainingDiverged(BistackError):
    """A loss or gradient norm that is not finite: training cannot go on from here."""


class StepTally:
    """The losses ``(READ_EVERY,)`` and gradient norms of one pass's batches since the last
    read, on the device; ``diverged(what, value, batch)`` builds the error to raise."""

    def __init__(
        self,
        device: torch.device,
        scaler: bool,
        diverged: Callable[[str, float, int], TrainingDiverged],
    ) -> None:
        self._losses = torch.zeros(READ_EVERY, dtype=torch.float32, device=device)
        self._norms = torch.zeros(READ_EVERY, dtype=torch.float32, device=device)
        self._steps: list[int] = []  # the batch (from 1) each kept norm closed
        self._first = 1  # the batch (from 1) of _losses[0]
        self._kept = 0  # losses kept since the last read
        self._scaler = scaler
        self._diverged = diverged
        self._skipped = 0  # steps in a row the loss scaler skipped
        self._total, self._count = 0.0, 0

    def add_loss(self, loss: torch.Tensor) -> None:
        """Keep one batch's loss (a 0-d tensor): a copy on the device, no wait."""
        if self._kept == READ_EVERY:
            self.read()
        self._losses[self._kept].copy_(loss.detach())
        self._kept += 1

    def add_norm(self, norm: torch.Tensor) -> None:
        """Keep the gradient norm of the step the last loss closed."""
        self._norms[len(self._steps)].copy_(norm.detach())
        self._steps.append(self._first + self._kept - 1)

    def read(self) -> float:
        """One copy from the device: check what was kept, then the pass's mean loss so far.
        Raises the divergence of the first loss, or norm, that is not finite."""
        if self._kept:
            kept = torch.cat([self._losses[: self._kept], self._norms[: len(self._steps)]])
            values = kept.tolist()
            losses, norms = values[: self._kept], values[self._kept :]
            self._check(losses, norms)
            self._total += math.fsum(losses)
            self._count += self._kept
            self._first += self._kept
            self._kept = 0
            self._steps.clear()
        return self._total / max(self._count, 1)

    def _check(self, losses: list[float], norms: list[float]) -> None:
        bad_loss = next((i for i, v in enumerate(losses) if not math.isfinite(v)), None)
        bad_norm = None
        for step, norm in zip(self._steps, norms, strict=True):
            if math.isfinite(norm):
                self._skipped = 0
            elif self._scaler and self._skipped < MAX_SKIPPED_STEPS:
                self._skipped += 1  # a float16 loss scaler's overflow: its step skips
            else:
                bad_norm = (step, norm)
                break
        loss_batch = None if bad_loss is None else self._first + bad_loss
        if loss_batch is not None and (bad_norm is None or loss_batch <= bad_norm[0]):
            raise self._diverged("loss", losses[bad_loss or 0], loss_batch)
        if bad_norm is not None:
            raise self._diverged("gradient norm", bad_norm[1], bad_norm[0])
