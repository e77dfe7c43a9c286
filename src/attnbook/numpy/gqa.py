"""Grouped-query attention (chapter 20): fewer key and value heads than query heads.

``n_heads`` query heads share ``n_kv_heads`` key-value heads in groups of ``n_heads / n_kv_heads``:
query head ``i`` uses key-value head ``i // group``. With ``n_kv_heads == n_heads`` it is multi-head
attention; with ``n_kv_heads == 1`` it is multi-query attention (Shazeer, 2019). The key-value cache
shrinks by the factor ``n_heads / n_kv_heads`` (Ainslie et al., 2023).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from attnbook._validate import check_heads, check_mask_fits, require_int, shape_str
from attnbook.numpy._arrays import as_float, as_mask
from attnbook.numpy.attention import scaled_dot_product_attention
from attnbook.numpy.multihead import MultiHeadParams, affine, merge_heads, split_heads


def repeat_kv(X: ArrayLike, n_rep: int) -> np.ndarray:
    """``(..., h_kv, T, d_head)`` to ``(..., h_kv * n_rep, T, d_head)``, each head repeated ``n_rep`` times
    in a row, so that query head ``i`` meets key-value head ``i // n_rep``. Refuses an ``n_rep`` that is not
    a positive integer (0 would leave no heads)."""
    X = as_float("X", X)
    require_int("n_rep", n_rep, 1)
    if X.ndim < 3:
        raise ValueError(f"X must have shape (..., h_kv, T, d_head); got shape {shape_str(X.shape)}")
    return np.repeat(X, n_rep, axis=-3)


def grouped_query_params(d_model: int, n_heads: int, n_kv_heads: int, seed: int = 0) -> MultiHeadParams:
    """Random weights of a grouped-query layer: ``W_k`` and ``W_v`` are ``(d_model, n_kv_heads * d_head)``.

    The other shapes are those of ``MultiHeadParams``; variance ``1 / fan_in``, small random biases.
    """
    check_heads(d_model, n_heads, n_kv_heads)
    rng = np.random.default_rng(seed)
    d_kv_out = n_kv_heads * (d_model // n_heads)

    def w(n_out: int) -> np.ndarray:
        return rng.normal(0.0, d_model**-0.5, size=(d_model, n_out))

    def b(n_out: int) -> np.ndarray:
        return rng.normal(0.0, 0.02, size=n_out)

    return MultiHeadParams(w(d_model), b(d_model), w(d_kv_out), b(d_kv_out), w(d_kv_out), b(d_kv_out),
                           w(d_model), b(d_model))


def grouped_query_attention(
    X_q: ArrayLike,
    X_kv: ArrayLike,
    params: MultiHeadParams,
    n_heads: int,
    n_kv_heads: int,
    mask: ArrayLike | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Attention with ``n_heads`` query heads sharing ``n_kv_heads`` key-value heads.

    Shapes: ``X_q`` ``(..., T_q, d_model)``, ``X_kv`` ``(..., T_k, d_model)``; ``params.W_k`` and
    ``params.W_v`` ``(d_model, n_kv_heads * d_head)``, the others as in ``multi_head_attention``; ``mask``
    broadcastable to ``(..., T_q, T_k)``, shared by all heads. Returns ``(output, weights)`` of shapes
    ``(..., T_q, d_model)`` and ``(..., n_heads, T_q, T_k)``. Chapter 20; Ainslie et al. (2023).
    """
    X_q, X_kv = as_float("X_q", X_q), as_float("X_kv", X_kv)
    d_model = params.W_o.shape[1]
    check_heads(d_model, n_heads, n_kv_heads)
    d_head = d_model // n_heads
    if params.W_k.shape[-1] != n_kv_heads * d_head or params.W_v.shape[-1] != n_kv_heads * d_head:
        raise ValueError(f"W_k and W_v must have n_kv_heads * d_head = {n_kv_heads * d_head} columns; got "
                         f"W_k {shape_str(params.W_k.shape)} and W_v {shape_str(params.W_v.shape)}")
    for name, X, W in (("X_q", X_q, params.W_q), ("X_kv", X_kv, params.W_k)):
        if X.ndim < 2 or X.shape[-1] != W.shape[0]:
            raise ValueError(f"{name} must have shape (..., T, {W.shape[0]}); got {shape_str(X.shape)}")
    if X_q.shape[:-2] != X_kv.shape[:-2]:
        raise ValueError(f"X_q and X_kv must have the same batch dimensions; got {shape_str(X_q.shape)} "
                         f"and {shape_str(X_kv.shape)}")
    group = n_heads // n_kv_heads
    Q = split_heads(affine(X_q, params.W_q, params.b_q), n_heads)  # (..., h, T_q, d_head)
    K = split_heads(affine(X_kv, params.W_k, params.b_k), n_kv_heads)  # (..., h_kv, T_k, d_head): what a cache keeps
    V = split_heads(affine(X_kv, params.W_v, params.b_v), n_kv_heads)  # (..., h_kv, T_k, d_head)
    if mask is not None:
        mask = as_mask(mask)
        check_mask_fits(mask.shape, X_q.shape[:-1] + (X_kv.shape[-2],))
        mask = mask[..., None, :, :]  # (..., 1, T_q, T_k): the same for every head
    heads, weights = scaled_dot_product_attention(Q, repeat_kv(K, group), repeat_kv(V, group), mask=mask)
    return affine(merge_heads(heads), params.W_o, params.b_o), weights
