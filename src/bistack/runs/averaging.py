"""An exponential moving average of the trained weights (Polyak averaging): train.weight_average.

Each optimizer step moves the average a fraction ``1 - decay`` of the way to the new weights;
dev is scored, and the best model saved, with the average in the network's place, and training
goes on from the weights it had. The average of the last few hundred steps sits nearer the
middle of the minimum the optimizer circles than any one step's weights.

Ours, not ``torch.optim.swa_utils.AveragedModel``: that copies the whole module, a frozen
backbone included, and updates every one of its tensors each step; this keeps only the trained
parameters (a frozen transformer's 22M weights never move, so their average is themselves).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch


class WeightAverage:
    """The running average of ``model``'s trained parameters.

    The decay starts low and rises to ``decay`` (``min(decay, (1 + n) / (10 + n))`` at the
    ``n``-th update, as TensorFlow's ExponentialMovingAverage does), so the first steps' weights,
    fresh from initialisation, do not linger in the average.
    """

    def __init__(self, model: torch.nn.Module, decay: float) -> None:
        self.decay = decay
        self.updates = 0
        self.parameters = {name: p for name, p in model.named_parameters() if p.requires_grad}
        self.average = {name: p.detach().clone() for name, p in self.parameters.items()}
        # The same tensors as lists, for one foreach call a step rather than one per parameter
        # (a fine-tuned encoder has hundreds).
        self._averaged = list(self.average.values())
        self._trained: list[torch.Tensor] = list(self.parameters.values())

    @torch.no_grad()
    def update(self) -> None:
        """Fold the weights of the step just taken into the average: one foreach lerp."""
        decay = min(self.decay, (1 + self.updates) / (10 + self.updates))
        torch._foreach_lerp_(self._averaged, self._trained, 1 - decay)
        self.updates += 1

    @contextmanager
    def applied(self) -> Iterator[None]:
        """The average in the network's parameters inside the block; the trained weights back
        after it, bit for bit, whatever happens inside."""
        with torch.no_grad():
            trained = {name: p.detach().clone() for name, p in self.parameters.items()}
            for name, parameter in self.parameters.items():
                parameter.copy_(self.average[name])
        try:
            yield
        finally:
            with torch.no_grad():
                for name, parameter in self.parameters.items():
                    parameter.copy_(trained[name])

    def state(self) -> tuple[dict[str, torch.Tensor], int]:
        """The averaged tensors by parameter name, and the number of updates so far."""
        return dict(self.average), self.updates

    @torch.no_grad()
    def load(self, tensors: dict[str, torch.Tensor], updates: int) -> None:
        """Take back a :meth:`state`; the names and shapes must be this model's."""
        if tensors.keys() != self.average.keys():
            missing = sorted(self.average.keys() ^ tensors.keys())
            raise ValueError(f"the weight average does not match the model ({missing[0]}...)")
        for name, value in tensors.items():
            self.average[name].copy_(value)
        self.updates = updates
