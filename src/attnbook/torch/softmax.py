"""The softmax in PyTorch, twin of ``attnbook.numpy.softmax`` (chapter 2)."""

from __future__ import annotations

import torch

from attnbook._validate import shape_str
from attnbook.torch._checks import as_float, require_tensor


def softmax(x: torch.Tensor, axis: int = -1, temperature: float = 1.0) -> torch.Tensor:
    """Softmax of ``x / temperature`` along ``axis``, computed without overflow.

    A slice that is all ``-inf`` gives zeros, not NaN. Shapes: the result has the shape of ``x``. Same
    meaning as the NumPy twin: a slice holding NaN or
    ``+inf`` becomes NaN throughout, and an axis of length 0 gives an empty result.
    """
    require_tensor("x", x)
    x = as_float("x", x)  # integer scores are computed in floating point, as in the NumPy twin
    if x.dim() == 0:
        raise ValueError("softmax needs at least one axis to normalise over; got a scalar (shape ())")
    if not -x.dim() <= axis < x.dim():
        raise ValueError(f"axis {axis} is out of range for x of shape {shape_str(x.shape)}")
    if not temperature > 0:
        raise ValueError(f"temperature must be positive; got {temperature}")
    z = x / temperature
    if z.shape[axis] == 0:
        return torch.zeros_like(z)
    empty = torch.isneginf(z).all(dim=axis, keepdim=True)
    # Rows with no finite entry get scores 0 (a finite softmax) and then weights 0.
    weights = torch.softmax(z.masked_fill(empty, 0.0), dim=axis).masked_fill(empty, 0.0)
    undefined = (z.isnan() | z.isposinf()).any(dim=axis, keepdim=True)
    return weights.masked_fill(undefined, float("nan"))
