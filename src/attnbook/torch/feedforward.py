"""The position-wise feed-forward network (chapter 13) and its gated SwiGLU variant (chapter 22)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from attnbook._validate import shape_str
from attnbook.torch._checks import as_float, require_tensor
from attnbook.torch.linear import Linear

ACTIVATIONS = {
    "relu": F.relu,
    "gelu": F.gelu,  # exact, with the error function
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),  # GPT-2's approximation
    "relu2": lambda x: F.relu(x).square(),  # ReLU squared (So et al. 2021), as in the GPU speedruns
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


def swiglu(x: torch.Tensor, W1: torch.Tensor, W3: torch.Tensor, W2: torch.Tensor) -> torch.Tensor:
    """``(silu(x W1) * (x W3)) W2``: a gated feed-forward network without biases.

    Shapes: ``x`` ``(..., d_model)``, ``W1`` and ``W3`` ``(d_model, d_ff)``, ``W2`` ``(d_ff, d_model)``;
    the result has the shape of ``x``. ``silu(z) = z * sigmoid(z)``. Chapter 22.
    """
    x, W1, W3, W2 = _checked_swiglu(x, W1, W3, W2)
    return (F.silu(x @ W1) * (x @ W3)) @ W2  # gate (..., d_ff) times value (..., d_ff), then down to d_model


def _checked_swiglu(x: torch.Tensor, W1: torch.Tensor, W3: torch.Tensor,
                    W2: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``swiglu``'s checks: tensors of a floating type, with shapes that chain."""
    for name, a in (("x", x), ("W1", W1), ("W3", W3), ("W2", W2)):
        require_tensor(name, a)
    x, W1, W3, W2 = as_float("x", x), as_float("W1", W1), as_float("W3", W3), as_float("W2", W2)
    if (x.dim() == 0 or W1.dim() != 2 or W1.shape != W3.shape or W1.shape[0] != x.shape[-1]
            or W2.shape != W1.shape[::-1]):
        raise ValueError(f"expected x (..., d_model), W1 and W3 (d_model, d_ff), W2 (d_ff, d_model); got x "
                         f"{shape_str(x.shape)}, W1 {shape_str(W1.shape)}, W3 {shape_str(W3.shape)}, "
                         f"W2 {shape_str(W2.shape)}")
    return x, W1, W3, W2


def swiglu_hidden(d_model: int) -> int:
    """The hidden width that gives SwiGLU's three matrices as many weights as a ``4 d_model`` two-matrix MLP:
    ``3 d_model h = 2 d_model (4 d_model)`` so ``h = 8 d_model / 3``, rounded to the nearest integer (chapter 22).
    """
    if d_model < 1:
        raise ValueError(f"d_model must be at least 1; got {d_model}")
    return round(8 * d_model / 3)


class SwiGLU(nn.Module):
    """``FFN(x) = (silu(x W_1) * (x W_3)) W_2`` (Shazeer, 2020), applied to every position separately.

    Shapes: ``(..., d_model)`` to ``(..., d_model)`` through a hidden width ``d_ff`` (three matrices, so
    ``swiglu_hidden(d_model)`` matches the weights of a ``4 d_model`` ``FeedForward``). ``fc1`` is the gate,
    ``fc3`` the value, ``fc2`` the output projection; ``bias=True`` adds a bias to each, as ``FeedForward`` has.
    """

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0, bias: bool = False) -> None:
        super().__init__()
        self.activation = "swiglu"
        self.fc1, self.fc3 = Linear(d_model, d_ff, bias), Linear(d_model, d_ff, bias)
        self.fc2 = Linear(d_ff, d_model, bias)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.drop(F.silu(self.fc1(x)) * self.fc3(x)))
