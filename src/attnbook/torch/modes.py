"""Evaluation mode for the length of a block (chapters 15 onwards): what every evaluation, decoding and
measurement of a trained model needs, dropout off, and the model left in the mode it was in."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from torch import nn


@contextmanager
def eval_mode(model: nn.Module) -> Iterator[nn.Module]:
    """``with eval_mode(model):`` runs the block with ``model.eval()`` and then restores the mode the model
    had (``model.train(was_training)``), also when the block raises. Yields the model."""
    was_training = model.training
    model.eval()
    try:
        yield model
    finally:
        model.train(was_training)
