"""The SwiGLU feed-forward network (chapter 22; Shazeer, 2020), twin of ``attnbook.torch.swiglu``."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from attnbook._validate import shape_str
from attnbook.numpy._arrays import as_float


def swiglu(x: ArrayLike, W1: ArrayLike, W3: ArrayLike, W2: ArrayLike) -> np.ndarray:
    """``(silu(x W1) * (x W3)) W2``: a gated feed-forward network without biases.

    Shapes: ``x`` ``(..., d_model)``, ``W1`` and ``W3`` ``(d_model, d_ff)``, ``W2`` ``(d_ff, d_model)``;
    the result has the shape of ``x``. ``silu(z) = z * sigmoid(z)``. Chapter 22.
    """
    x, W1, W3, W2 = _checked_swiglu(x, W1, W3, W2)
    gate = x @ W1
    silu = gate / (1.0 + np.exp(-gate))  # z * sigmoid(z); exp overflows to inf for very negative z, giving 0
    return (silu * (x @ W3)) @ W2


def _checked_swiglu(x: ArrayLike, W1: ArrayLike, W3: ArrayLike,
                    W2: ArrayLike) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``swiglu``'s checks: floating arrays, with shapes that chain."""
    x, W1, W3, W2 = (as_float(n, a) for n, a in (("x", x), ("W1", W1), ("W3", W3), ("W2", W2)))
    if (x.ndim == 0 or W1.ndim != 2 or W1.shape != W3.shape or W1.shape[0] != x.shape[-1]
            or W2.shape != W1.shape[::-1]):
        raise ValueError(f"expected x (..., d_model), W1 and W3 (d_model, d_ff), W2 (d_ff, d_model); got x "
                         f"{shape_str(x.shape)}, W1 {shape_str(W1.shape)}, W3 {shape_str(W3.shape)}, "
                         f"W2 {shape_str(W2.shape)}")
    return x, W1, W3, W2
