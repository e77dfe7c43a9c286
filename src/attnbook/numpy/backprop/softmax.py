"""The backward pass of the softmax: the Jacobian of chapter 6 applied without building it (chapter 19)."""

from __future__ import annotations

import numpy as np

from attnbook._validate import require_same_shape


def softmax_backward(dp: np.ndarray, p: np.ndarray, axis: int = -1) -> np.ndarray:
    """Gradient with respect to the scores ``s`` of ``p = softmax(s)``, given ``dp = dL/dp``.

    For a row ``p`` the Jacobian is ``diag(p) - p^T p`` (chapter 6), and it is symmetric, so
    ``ds = dp (diag(p) - p^T p) = p * (dp - (dp . p))``: O(n) work per slice instead of O(n^2), and no
    ``n x n`` matrix. Shapes: ``dp`` and ``p`` alike, any shape; the softmax ran along ``axis``.
    Entries where ``p`` is 0 (masked scores) get gradient 0.
    """
    require_same_shape(("dp", "p"), dp.shape, p.shape)
    return p * (dp - (dp * p).sum(axis=axis, keepdims=True))
