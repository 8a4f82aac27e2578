"""``evaluating(model)``: eval mode inside, the earlier mode restored even when the work fails."""

import pytest
from torch import nn

from bistack.models.mode import evaluating


@pytest.mark.parametrize("training", [True, False])
def test_the_mode_is_restored_after_an_error(training):
    model = nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.5)).train(training)
    with pytest.raises(RuntimeError), evaluating(model):
        assert not model.training and not model[1].training
        raise RuntimeError("inside")
    assert model.training is training and model[1].training is training
