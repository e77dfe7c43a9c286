"""RMS normalisation (chapter 22; Zhang and Sennrich, 2019): layer normalisation without the centring."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from attnbook._validate import require_real, shape_str
from attnbook.numpy._arrays import as_float


def rms_norm(x: ArrayLike, gamma: ArrayLike, eps: float = 1e-5) -> np.ndarray:
    """Divide each vector (last axis) by its root mean square, then scale by ``gamma``.

    Shapes: ``x`` ``(..., d)``, ``gamma`` ``(d,)``; the result has the shape of ``x``.
    ``x / sqrt(mean(x**2) + eps) * gamma``: no mean is subtracted and no bias added, as in
    ``torch.nn.RMSNorm``. Chapter 22. Refuses a negative or NaN ``eps``; with ``eps = 0`` a zero vector gives
    NaN (0 / 0): that ``eps`` is there to prevent it.
    """
    x, gamma = _checked(x, gamma, eps)
    ms = np.mean(x * x, axis=-1, keepdims=True)  # (..., 1): the mean square, not the variance
    return x / np.sqrt(ms + eps) * gamma


def _checked(x: ArrayLike, gamma: ArrayLike, eps: float) -> tuple[np.ndarray, np.ndarray]:
    """``rms_norm``'s checks: floating arrays, ``gamma`` of shape ``(d,)``, ``eps`` 0 or more."""
    x, gamma = as_float("x", x), as_float("gamma", gamma)
    if x.ndim == 0 or gamma.shape != x.shape[-1:]:
        raise ValueError(f"gamma must have shape (d,) with d the last axis of x; got x {shape_str(x.shape)} "
                         f"and gamma {shape_str(gamma.shape)}")
    require_real("eps", eps, "a finite number, 0 or more", lambda e: e >= 0)
    return x, gamma
