"""The softmax in PyTorch, twin of ``attnbook.numpy.softmax`` (chapter 2)."""

from __future__ import annotations

import torch


def softmax(x: torch.Tensor, axis: int = -1, temperature: float = 1.0) -> torch.Tensor:
    """Softmax of ``x / temperature`` along ``axis``; a slice that is all ``-inf`` gives zeros, not NaN.

    Shapes: the result has the shape of ``x``. Same meaning as the NumPy twin.
    """
    if not temperature > 0:
        raise ValueError(f"temperature must be positive; got {temperature}")
    z = x / temperature
    empty = torch.isneginf(z).all(dim=axis, keepdim=True)
    # Rows with no finite entry get scores 0 (a finite softmax) and then weights 0.
    return torch.softmax(z.masked_fill(empty, 0.0), dim=axis).masked_fill(empty, 0.0)
