"""The position-wise feed-forward network (chapter 13)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from attnbook.torch.linear import Linear

ACTIVATIONS = {
    "relu": F.relu,
    "gelu": F.gelu,  # exact, with the error function
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),  # GPT-2's approximation
}


class FeedForward(nn.Module):
    """``FFN(x) = act(x W_1 + b_1) W_2 + b_2``, applied to every position separately.

    Shapes: ``(..., d_model)`` to ``(..., d_model)`` through a hidden width ``d_ff``.
    """

    def __init__(self, d_model: int, d_ff: int, activation: str = "relu", dropout: float = 0.0,
                 bias: bool = True) -> None:
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}; got {activation!r}")
        self.activation = activation
        self.fc1, self.fc2 = Linear(d_model, d_ff, bias), Linear(d_ff, d_model, bias)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.drop(ACTIVATIONS[self.activation](self.fc1(x))))
