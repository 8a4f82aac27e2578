"""Blend weights: non-negative and summing to one, fitted to out-of-fold predictions.

The kind's outputs give the objective (a regressor's squared error, a classifier's log loss of
the weighted mean of probabilities: both convex in the weights). :func:`simplex_weights` finds
its minimum over the simplex by projected gradient descent with a backtracking step: the
projection (Duchi et al. 2008) gives exact zeros, so a run that adds nothing gets weight 0 and
is left out of the model. :func:`greedy_weights` is Caruana et al.'s (2004) greedy selection
with replacement, as AutoGluon's weighted ensemble does it: each round adds the run that lowers
the objective most; a run's weight is the share of rounds that chose it. An objective without
a gradient (a tagger's entity F1) is searched instead over a grid of the simplex
(:func:`grid_weights`), or by the greedy selection, which needs none.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, get_args

import numpy as np

# The objective of blended predictions ``(rows, outputs)``: its value and its gradient.
Objective = Callable[[np.ndarray], tuple[float, np.ndarray]]
# The greedy method moves a weight by 1/rounds a round: 10,000 rounds give weights to 1e-4,
# finer than any blend's noise; more only take time.
MAX_ROUNDS = 10_000
ROUNDS = 100  # the greedy method's rounds where none are asked for: weights to 0.01
BlendMethod = Literal["simplex", "greedy"]
METHODS: tuple[BlendMethod, ...] = get_args(BlendMethod)


def blended(weights: np.ndarray, stacked: np.ndarray) -> np.ndarray:
    """``(rows, outputs)``: the runs' predictions ``stacked`` ``(runs, rows, outputs)``
    weighted by ``weights`` ``(runs,)``."""
    return np.tensordot(weights, stacked, axes=1)


def project_to_simplex(vector: np.ndarray) -> np.ndarray:
    """The nearest point of the simplex (non-negative, summing to one) to ``vector``."""
    ordered = np.sort(vector)[::-1]
    cumulative = np.cumsum(ordered) - 1.0
    ranks = np.arange(1, len(vector) + 1)
    last = ranks[ordered - cumulative / ranks > 0][-1]
    return np.maximum(vector - cumulative[last - 1] / last, 0.0)


def simplex_weights(
    objective: Objective, stacked: np.ndarray, iterations: int = 2000, tolerance: float = 1e-12
) -> np.ndarray:
    """The weights ``(runs,)`` on the simplex that minimise ``objective`` of the blend of
    ``stacked`` ``(runs, rows, outputs)``, from equal weights."""
    stacked = stacked.astype(np.float64)

    def value_and_gradient(weights: np.ndarray) -> tuple[float, np.ndarray]:
        value, gradient = objective(blended(weights, stacked))
        return value, np.tensordot(stacked, gradient, axes=([1, 2], [0, 1]))

    weights = np.full(len(stacked), 1.0 / len(stacked))
    value, gradient = value_and_gradient(weights)
    step = 1.0
    for _ in range(iterations):
        while True:  # backtrack until the step decreases the objective enough
            candidate = project_to_simplex(weights - step * gradient)
            moved = candidate - weights
            new_value, new_gradient = value_and_gradient(candidate)
            if new_value <= value + gradient @ moved + moved @ moved / (2 * step) or step < 1e-20:
                break
            step /= 2
        done = value - new_value <= tolerance * max(1.0, abs(value))
        weights, value, gradient = candidate, new_value, new_gradient
        if done:
            break
        step *= 2
    return weights


def greedy_weights(objective: Objective, stacked: np.ndarray, rounds: int = ROUNDS) -> np.ndarray:
    """Caruana's greedy selection with replacement over ``rounds`` rounds: the weights
    ``(runs,)`` are the shares of rounds each run was chosen in."""
    stacked = stacked.astype(np.float64)
    counts = np.zeros(len(stacked))
    total = np.zeros(stacked.shape[1:])
    for chosen in range(1, rounds + 1):
        values = [objective((total + run) / chosen)[0] for run in stacked]
        best = int(np.argmin(values))  # the first of equals: the earlier run
        counts[best] += 1
        total += stacked[best]
    return counts / rounds


def simplex_grid(runs: int, step: float = 0.1) -> list[np.ndarray]:
    """Every point of the simplex in ``runs`` dimensions whose weights are multiples of
    ``step``, those with fewer runs (then the heavier first run) first."""
    parts = round(1 / step)

    def splits(left: int, count: int) -> list[list[int]]:
        if count == 1:
            return [[left]]
        return [
            [first, *rest]
            for first in range(left, -1, -1)
            for rest in splits(left - first, count - 1)
        ]

    points = [np.array(split, dtype=np.float64) / parts for split in splits(parts, runs)]
    return sorted(points, key=lambda point: int(np.count_nonzero(point)))


def grid_weights(value: Callable[[np.ndarray], float], runs: int, step: float = 0.1) -> np.ndarray:
    """The point of the simplex grid at ``step`` (:func:`simplex_grid`) that minimises
    ``value(weights)``; of equal values, the one with fewest runs (a run that adds nothing is
    left out), then the earliest."""
    best, best_value = None, np.inf
    for point in simplex_grid(runs, step):
        found = value(point)
        if found < best_value:
            best, best_value = point, found
    assert best is not None, "the grid holds every run alone"
    return best


def fit_weights(
    objective: Objective, stacked: np.ndarray, method: BlendMethod, rounds: int = ROUNDS
) -> np.ndarray:
    """The blend's weights by ``method`` (``simplex`` or ``greedy``)."""
    if method == "greedy":
        return greedy_weights(objective, stacked, rounds)
    return simplex_weights(objective, stacked)
