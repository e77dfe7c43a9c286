"""Attention as a soft dictionary: look up by similarity instead of by equality (chapter 3)."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from attnbook._validate import require_ndim, shape_str
from attnbook.numpy._arrays import as_float
from attnbook.numpy.softmax import softmax


def soft_lookup(
    queries: ArrayLike, keys: ArrayLike, values: ArrayLike, sharpness: float = 1.0
) -> tuple[np.ndarray, np.ndarray]:
    """Look up numeric keys softly: every value counts, weighted by how close its key is.

    The similarity of query ``q`` and key ``k`` is ``-sharpness * (q - k)**2``; the weights are
    its softmax over the keys, and the answer is the weighted sum of the values,
    ``sum_i softmax_i(sim(q, k_i)) v_i``. As ``sharpness`` grows the lookup becomes exact
    (nearest key); at 0 it returns the mean of all values.

    Shapes: ``queries`` ``(m,)``, ``keys`` ``(n,)``, ``values`` ``(n,)`` or ``(n, d_v)``.
    Returns ``(answers, weights)`` of shapes ``(m,)`` or ``(m, d_v)``, and ``(m, n)``. Chapter 3.
    """
    queries, keys, values = as_float("queries", queries), as_float("keys", keys), as_float("values", values)
    require_ndim("queries", queries.shape, 1, "(m,): one number per query")
    require_ndim("keys", keys.shape, 1, "(n,): one number per key")
    if values.ndim not in (1, 2) or values.shape[0] != keys.shape[0]:
        raise ValueError(
            f"values must have shape (n,) or (n, d_v) with n = {keys.shape[0]} keys; "
            f"got shape {shape_str(values.shape)}"
        )
    if keys.shape[0] == 0:
        raise ValueError("keys must hold at least one key; got shape (0,)")
    if not sharpness >= 0:
        raise ValueError(f"sharpness must be 0 or more; got {sharpness}")
    scores = -sharpness * (queries[:, None] - keys[None, :]) ** 2  # (m, n)
    weights = softmax(scores, axis=-1)  # (m, n)
    return weights @ values, weights
