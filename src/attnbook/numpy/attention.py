"""Scaled dot-product attention: single-query (chapter 5) and batched with masks (chapters 4 to 8).

Row convention: a sequence of T vectors of size d is an array of shape (..., T, d).
Masks are boolean, True where attention is allowed.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

from attnbook._validate import check_mask_fits, check_qkv_shapes, require_ndim, require_same_last_dim, shape_str
from attnbook.numpy._arrays import as_float, as_mask
from attnbook.numpy.softmax import softmax


def masked_softmax(scores: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
    """Softmax over the last axis where ``mask`` is True; masked positions get weight 0.

    A row whose keys are all masked gets all-zero weights (it attends to nothing), so its output
    is the zero vector and no NaN reaches later layers. Shapes: ``scores`` ``(..., T_q, T_k)``;
    ``mask`` boolean (True where allowed), broadcastable to it; an additive mask of 0 and ``-inf`` is
    refused, since read as booleans it would mean the opposite.
    """
    scores = as_float("scores", scores)
    if scores.ndim < 1:
        raise ValueError(f"scores must have shape (..., T_q, T_k); got shape {shape_str(scores.shape)}")
    if mask is None:
        return softmax(scores, axis=-1)
    mask = as_mask(mask)
    check_mask_fits(mask.shape, scores.shape)
    return softmax(np.where(mask, scores, -np.inf), axis=-1)


def scaled_dot_product_attention(
    Q: ArrayLike,
    K: ArrayLike,
    V: ArrayLike,
    mask: ArrayLike | None = None,
    scale: float | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """``softmax(Q K^T * scale) V``, the attention of every query to every key.

    Shapes: ``Q`` ``(..., T_q, d_k)``, ``K`` ``(..., T_k, d_k)``, ``V`` ``(..., T_k, d_v)``, with the
    same batch dimensions ``...``; ``mask`` boolean, broadcastable to ``(..., T_q, T_k)``, True where
    query i may attend to key j. ``scale`` defaults to ``1 / sqrt(d_k)`` (chapter 6).
    Returns ``(output, weights)`` of shapes ``(..., T_q, d_v)`` and ``(..., T_q, T_k)``; a query
    whose keys are all masked gets zero weights and a zero output.
    """
    Q, K, V = as_float("Q", Q), as_float("K", K), as_float("V", V)
    check_qkv_shapes(Q.shape, K.shape, V.shape)
    scores_shape = Q.shape[:-1] + (K.shape[-2],)
    if mask is not None:
        mask = as_mask(mask)
        check_mask_fits(mask.shape, scores_shape)
    if scale is None:
        scale = 1.0 / math.sqrt(Q.shape[-1])
    scores = (Q @ np.swapaxes(K, -1, -2)) * scale  # (..., T_q, T_k)
    weights = masked_softmax(scores, mask)  # (..., T_q, T_k)
    return weights @ V, weights  # (..., T_q, d_v), (..., T_q, T_k)


def single_query_attention(
    e: ArrayLike,
    Z: ArrayLike,
    W_q: ArrayLike,
    b_q: ArrayLike,
    W_k: ArrayLike,
    b_k: ArrayLike,
    W_v: ArrayLike,
    b_v: ArrayLike,
) -> tuple[np.ndarray, np.ndarray]:
    """Basic single-query attention (Phuong and Hutter, algorithm 3), in the row convention.

    One token ``e`` attends to a context ``Z``: ``q = e W_q + b_q``, ``k_t = z_t W_k + b_k``,
    ``v_t = z_t W_v + b_v``, ``alpha = softmax(q . k_t / sqrt(d_attn))``, output ``sum_t alpha_t v_t``.

    Shapes: ``e`` ``(d_x,)``; ``Z`` ``(T, d_z)``; ``W_q`` ``(d_x, d_attn)``, ``b_q`` ``(d_attn,)``;
    ``W_k`` ``(d_z, d_attn)``, ``b_k`` ``(d_attn,)``; ``W_v`` ``(d_z, d_out)``, ``b_v`` ``(d_out,)``.
    Returns ``(output, alpha)`` of shapes ``(d_out,)`` and ``(T,)``. Chapter 5. Refuses ``d_attn = 0``
    (queries and keys of no dimension have no scores to compare) and mismatched shapes.
    """
    e, Z = as_float("e", e), as_float("Z", Z)
    W_q, b_q, W_k, b_k = (as_float(n, a) for n, a in (("W_q", W_q), ("b_q", b_q), ("W_k", W_k), ("b_k", b_k)))
    W_v, b_v = as_float("W_v", W_v), as_float("b_v", b_v)
    require_ndim("e", e.shape, 1, "(d_x,): one token")
    require_ndim("Z", Z.shape, 2, "(T, d_z): one context token per row")
    for name, W in (("W_q", W_q), ("W_k", W_k), ("W_v", W_v)):
        require_ndim(name, W.shape, 2, "(d_in, d_out) in the row convention")
    if W_q.shape[0] != e.shape[0]:
        raise ValueError(f"W_q must have d_x = {e.shape[0]} rows to map e {shape_str(e.shape)}; "
                         f"got W_q {shape_str(W_q.shape)}")
    for name, W in (("W_k", W_k), ("W_v", W_v)):
        if W.shape[0] != Z.shape[1]:
            raise ValueError(f"{name} must have d_z = {Z.shape[1]} rows to map Z {shape_str(Z.shape)}; "
                             f"got {name} {shape_str(W.shape)}")
    require_same_last_dim(("W_q", "W_k"), W_q.shape, W_k.shape)
    if W_q.shape[1] == 0:
        raise ValueError(f"d_attn (the columns of W_q and W_k) must be at least 1; got W_q {shape_str(W_q.shape)} "
                         f"and W_k {shape_str(W_k.shape)}")
    for name, b, W in (("b_q", b_q, W_q), ("b_k", b_k, W_k), ("b_v", b_v, W_v)):
        if b.shape != (W.shape[1],):
            raise ValueError(f"{name} must have shape ({W.shape[1]},) to match {shape_str(W.shape)}; "
                             f"got {shape_str(b.shape)}")
    q = e @ W_q + b_q  # (d_attn,)
    K = Z @ W_k + b_k  # (T, d_attn)
    V = Z @ W_v + b_v  # (T, d_out)
    alpha = softmax(K @ q / math.sqrt(q.shape[0]))  # (T,)
    return alpha @ V, alpha
