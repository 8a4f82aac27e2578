"""Temperature scaling of a classifier's probabilities, fitted on dev: it lowers the dev
negative log-likelihood, never changes a label, and makes overconfident probabilities honest."""

from __future__ import annotations

import torch

from bistack.data.tables import Example
from bistack.metrics.text import expected_calibration_error
from bistack.text_models.outputs import ClassOutputs, RawOutputs


def overconfident(count: int = 400, seed: int = 0) -> tuple[list[Example], RawOutputs]:
    """Labels drawn from calibrated probabilities, and logits 4x too sharp."""
    generator = torch.Generator().manual_seed(seed)
    honest = torch.randn(count, 3, generator=generator)
    gold = torch.multinomial(honest.softmax(dim=-1), 1, generator=generator)[:, 0]
    examples = [Example(f"text {i}", (str(int(g)),), i + 1) for i, g in enumerate(gold)]
    return examples, RawOutputs([[] for _ in examples], (honest * 4).numpy(), None, 0.0)


def test_temperature_scaling_makes_overconfident_probabilities_honest():
    examples, raw = overconfident()
    outputs = ClassOutputs({"labels": ["0", "1", "2"]})
    gold = torch.tensor(outputs.label_ids(examples, "dev"))
    nll_before = torch.nn.functional.cross_entropy(torch.from_numpy(raw.outputs), gold)
    labels_before = [p.label for p in outputs.predictions([e.text for e in examples], raw, False)]
    message = outputs.fit_on_dev(examples, "dev", raw, False)
    assert outputs.temperature > 2.5  # the logits were 4x too sharp
    assert message.startswith(f"temperature {outputs.temperature:.3f} fitted on dev")
    probabilities = torch.from_numpy(outputs.probabilities(raw))
    assert torch.nn.functional.nll_loss(probabilities.log(), gold) < nll_before
    after = outputs.predictions([e.text for e in examples], raw, False)
    assert [p.label for p in after] == labels_before
    fit = outputs.info["temperature_fit"]
    assert fit["ece_after"] < fit["ece_before"] / 2


def test_the_calibration_error_is_zero_when_confidence_matches_accuracy():
    assert expected_calibration_error([0.75] * 4, [True, True, True, False]) == 0.0
    assert expected_calibration_error([1.0, 1.0], [False, False]) == 1.0
