"""The backward pass of a linear layer, ``y = x W + b`` in the row convention (chapter 19)."""

from __future__ import annotations

import numpy as np

from attnbook._validate import shape_str


def linear_forward(x: np.ndarray, W: np.ndarray, b: np.ndarray | None = None) -> tuple[np.ndarray, dict]:
    """``y = x W + b``. Shapes: ``x`` ``(..., d_in)``, ``W`` ``(d_in, d_out)``, ``b`` ``(d_out,)``.

    Returns ``(y, cache)``: ``y`` ``(..., d_out)``; the cache keeps the input ``x`` (the backward pass
    needs it for ``dW``) and the weight ``W`` (for ``dx``).
    """
    if W.ndim != 2 or x.shape[-1] != W.shape[0]:
        raise ValueError(f"x of shape (..., d_in) needs W of shape (d_in, d_out) with d_in = {x.shape[-1]}; "
                         f"got x {shape_str(x.shape)} and W {shape_str(W.shape)}")
    y = x @ W if b is None else x @ W + b
    return y, {"x": x, "W": W, "has_bias": b is not None}


def linear_backward(dy: np.ndarray, cache: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Gradients of a scalar loss from its gradient ``dy`` ``(..., d_out)`` with respect to ``y``.

    ``dx = dy W^T`` ``(..., d_in)``; ``dW = x^T dy`` summed over every batch position ``(d_in, d_out)``;
    ``db = dy`` summed likewise ``(d_out,)`` (``None`` without a bias). A parameter used at many positions
    collects the gradient of each use: that is the sum.
    """
    x, W = cache["x"], cache["W"]
    dx = dy @ W.T
    x2, dy2 = x.reshape(-1, x.shape[-1]), dy.reshape(-1, dy.shape[-1])  # every batch position as one row
    dW = x2.T @ dy2
    db = dy2.sum(axis=0) if cache["has_bias"] else None
    return dx, dW, db
