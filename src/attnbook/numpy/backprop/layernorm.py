"""The backward pass of layer normalisation (chapter 19; forward in chapter 13).

Forward over the last axis of size ``d``: ``xhat = (x - mean) * rstd`` with ``rstd = 1 / sqrt(var + eps)``
(biased variance), ``y = xhat * gamma + beta``. Backward: ``dxhat = dy * gamma``, and
``dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))``: the two means remove the directions
that normalising takes away (a shift of every entry, a rescaling of the vector).
"""

from __future__ import annotations

import numpy as np

from attnbook._validate import require_real, shape_str


def layer_norm_forward(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray | None = None,
                       eps: float = 1e-5) -> tuple[np.ndarray, dict]:
    """Layer norm of ``x`` ``(..., d)`` with ``gamma`` and ``beta`` ``(d,)``; returns ``(y, cache)``.

    The cache keeps ``xhat`` ``(..., d)`` and ``rstd`` ``(..., 1)``, everything the backward pass needs
    besides ``gamma``. Refuses a negative or NaN ``eps`` (the root of a negative variance would be NaN).
    """
    require_real("eps", eps, "a finite number, 0 or more", lambda e: e >= 0)
    if gamma.shape != x.shape[-1:]:
        raise ValueError(f"gamma must have shape ({x.shape[-1]},) to match x {shape_str(x.shape)}; "
                         f"got {shape_str(gamma.shape)}")
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    rstd = 1.0 / np.sqrt(var + eps)  # (..., 1)
    xhat = (x - mean) * rstd  # (..., d)
    y = xhat * gamma if beta is None else xhat * gamma + beta
    return y, {"xhat": xhat, "rstd": rstd, "gamma": gamma, "has_bias": beta is not None}


def layer_norm_backward(dy: np.ndarray, cache: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Gradients ``(dx, dgamma, dbeta)`` given ``dy`` ``(..., d)``; ``dbeta`` is ``None`` without ``beta``."""
    xhat, rstd, gamma = cache["xhat"], cache["rstd"], cache["gamma"]
    dxhat = dy * gamma
    dx = rstd * (dxhat - dxhat.mean(axis=-1, keepdims=True) - xhat * (dxhat * xhat).mean(axis=-1, keepdims=True))
    d = dy.shape[-1]
    dgamma = (dy * xhat).reshape(-1, d).sum(axis=0)
    dbeta = dy.reshape(-1, d).sum(axis=0) if cache["has_bias"] else None
    return dx, dgamma, dbeta
