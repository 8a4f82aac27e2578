"""Blend weights: on the simplex, the objective's minimum (against a brute-force search over a
fine grid), exact zeros for a run that adds nothing, and Caruana's greedy selection."""

import itertools

import numpy as np
import pytest

from bistack.data.tables import Example
from bistack.folds.weights import (
    blended,
    greedy_weights,
    project_to_simplex,
    simplex_weights,
)
from bistack.text_models.outputs import ClassOutputs, TargetOutputs


def regression(seed: int = 0, rows: int = 200) -> tuple[np.ndarray, list[Example], TargetOutputs]:
    """Three runs: two views of the target with independent noise, and the first view with
    more noise on it (independent noise always earns some weight: it averages out)."""
    rng = np.random.default_rng(seed)
    gold = rng.normal(size=rows)
    first, second = (gold + rng.normal(scale=s, size=rows) for s in (0.5, 0.8))
    runs = np.stack([first, second, first + rng.normal(size=rows)])
    examples = [Example(f"t{i}", (repr(float(g)),), i) for i, g in enumerate(gold)]
    return runs[:, :, None], examples, TargetOutputs.applying_nothing({"targets": ["y"]})


def classification(
    seed: int = 0, rows: int = 200
) -> tuple[np.ndarray, list[Example], ClassOutputs]:
    rng = np.random.default_rng(seed)
    gold = rng.integers(0, 3, size=rows)
    runs = []
    for sharpness in (2.0, 1.0, 0.0):
        logits = rng.normal(size=(rows, 3)) + sharpness * np.eye(3)[gold]
        runs.append(np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True))
    examples = [Example(f"t{i}", (str(g),), i) for i, g in enumerate(gold)]
    return np.stack(runs), examples, ClassOutputs({"labels": ["0", "1", "2"]})


def grid_minimum(objective, stacked: np.ndarray, steps: int = 200) -> float:
    best = np.inf
    for a, b in itertools.product(range(steps + 1), repeat=2):
        if a + b <= steps:
            weights = np.array([a, b, steps - a - b]) / steps
            best = min(best, objective(blended(weights, stacked))[0])
    return best


@pytest.mark.parametrize("problem", [regression, classification])
def test_the_weights_reach_the_objectives_minimum_on_the_simplex(problem):
    stacked, examples, outputs = problem()
    objective = outputs.blend_objective(examples)
    weights = simplex_weights(objective, stacked)
    assert weights.min() >= 0 and weights.sum() == pytest.approx(1.0)
    found = objective(blended(weights, stacked))[0]
    assert found <= grid_minimum(objective, stacked) + 1e-9
    assert weights[2] == 0.0  # the run that is no help gets exactly 0


def test_the_objectives_gradients_are_their_derivatives():
    for problem in (regression, classification):
        stacked, examples, outputs = problem(rows=20)
        objective = outputs.blend_objective(examples)
        point = blended(np.array([0.5, 0.3, 0.2]), stacked)
        _, gradient = objective(point)
        step = np.zeros_like(point)
        step[3, 0] = 1e-6
        numeric = (objective(point + step)[0] - objective(point - step)[0]) / 2e-6
        assert gradient[3, 0] == pytest.approx(numeric, rel=1e-4)


def test_projection_onto_the_simplex():
    assert project_to_simplex(np.array([0.2, 0.3, 0.5])) == pytest.approx([0.2, 0.3, 0.5])
    assert project_to_simplex(np.array([2.0, 0.0, -1.0])) == pytest.approx([1.0, 0.0, 0.0])
    assert project_to_simplex(np.array([0.5, 0.5, 0.5])) == pytest.approx([1 / 3] * 3)


def test_greedy_selection_starts_with_the_best_run_and_counts_rounds():
    stacked, examples, outputs = regression()
    objective = outputs.blend_objective(examples)
    weights = greedy_weights(objective, stacked, rounds=1)
    singles = [objective(run)[0] for run in stacked]
    assert weights.tolist() == [float(i == int(np.argmin(singles))) for i in range(3)]
    many = greedy_weights(objective, stacked, rounds=50)
    assert many.sum() == pytest.approx(1.0) and np.allclose(many * 50, np.round(many * 50))
    assert objective(blended(many, stacked))[0] <= min(singles)
