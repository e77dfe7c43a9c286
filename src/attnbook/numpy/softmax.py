"""The softmax: from scores to weights that are positive and sum to one (chapter 2)."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from attnbook._validate import shape_str
from attnbook.numpy._arrays import as_float


def softmax(x: ArrayLike, axis: int = -1, temperature: float = 1.0) -> np.ndarray:
    """Softmax of ``x / temperature`` along ``axis``, computed without overflow.

    Shapes: the result has the shape of ``x``; every slice along ``axis`` is positive and sums
    to 1. Subtracting the maximum first changes nothing mathematically (chapter 2 shows why) but
    keeps ``exp`` from overflowing. Entries of ``-inf`` get weight 0; a slice that is entirely
    ``-inf`` (every option ruled out) gets all zeros rather than NaN. A slice holding NaN or ``+inf``
    has no meaningful weights: it becomes NaN throughout, so the problem shows instead of hiding (the
    PyTorch twin and ``torch.softmax`` do the same). An axis of length 0 gives an empty result.
    """
    x = as_float("x", x)
    if x.ndim == 0:
        raise ValueError("softmax needs at least one axis to normalise over; got a scalar (shape ())")
    if not -x.ndim <= axis < x.ndim:
        raise ValueError(f"axis {axis} is out of range for x of shape {shape_str(x.shape)}")
    if not temperature > 0:
        raise ValueError(f"temperature must be positive; got {temperature}")
    z = x / temperature
    if z.shape[axis] == 0:
        return np.zeros_like(z)  # no options: nothing to weigh (the PyTorch twin agrees)
    undefined = np.any(np.isnan(z) | np.isposinf(z), axis=axis, keepdims=True)
    top = np.max(z, axis=axis, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)  # an all -inf slice: shift by 0, exp gives zeros
    with np.errstate(invalid="ignore", over="ignore"):
        e = np.exp(z - top)
        total = np.sum(e, axis=axis, keepdims=True)
        weights = np.divide(e, total, out=np.zeros_like(e), where=total > 0)
    if undefined.any():  # in place: no second array of the full size (chapter 20 measures the peak)
        weights[np.broadcast_to(undefined, weights.shape)] = np.nan
    return weights


def softmax_jacobian(p: ArrayLike) -> np.ndarray:
    """Jacobian of the softmax at the point where it outputs ``p``: ``diag(p) - p^T p`` for a row ``p``.

    Entry ``(i, j)`` is ``d softmax(s)_i / d s_j``. Shapes: ``p`` ``(n,)``, a probability vector;
    the result is ``(n, n)``. It vanishes as ``p`` becomes one-hot, which is why saturated
    attention stops learning (chapter 6).
    """
    p = as_float("p", p)
    if p.ndim != 1:
        raise ValueError(f"p must be one probability vector, shape (n,); got shape {shape_str(p.shape)}")
    return np.diag(p) - np.outer(p, p)
