"""``eval_mode``: dropout off inside the block, the model's own mode back after it, even after an error."""

import pytest
import torch

from attnbook.torch import eval_mode


@pytest.mark.parametrize("training", [True, False])
def test_eval_mode_turns_dropout_off_and_restores_the_mode(training):
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Dropout(0.5)).train(training)
    x = torch.ones(3, 4)
    with eval_mode(model) as inside:
        assert inside is model and not any(m.training for m in model.modules())
        torch.testing.assert_close(model(x), model(x))  # no dropout: the same output twice
    assert all(m.training is training for m in model.modules())


def test_eval_mode_restores_the_mode_when_the_block_raises():
    model = torch.nn.Dropout(0.5).train()
    with pytest.raises(RuntimeError, match="inside"), eval_mode(model):
        raise RuntimeError("inside")
    assert model.training
