"""Multi-head attention (chapter 9), in the row convention, with the layout of ``torch.nn.MultiheadAttention``.

Each of ``h`` heads attends in its own ``d_head = d_model / h`` dimensional slice of the projected
queries, keys and values; the heads' outputs are concatenated and mixed by an output projection.
One function computes it: ``grouped_query_attention``, whose ``n_kv_heads`` key-value heads each serve a
group of query heads (chapter 20); ``multi_head_attention`` is the case ``n_kv_heads = n_heads``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from attnbook._validate import check_mha_shapes, check_split_heads, require_int, shape_str
from attnbook.numpy._arrays import as_float, head_mask
from attnbook.numpy.attention import scaled_dot_product_attention


@dataclass
class MultiHeadParams:
    """Weights of one multi-head attention layer, row convention (``y = x W + b``).

    Shapes: ``W_q`` ``(d_q, d_model)``, ``W_k`` and ``W_v`` ``(d_kv, d_model)``, ``W_o``
    ``(d_model, d_model)``; every bias ``(d_model,)``. ``d_q`` is the size of the query tokens and
    ``d_kv`` that of the context tokens (equal for self-attention).
    """

    W_q: np.ndarray
    b_q: np.ndarray
    W_k: np.ndarray
    b_k: np.ndarray
    W_v: np.ndarray
    b_v: np.ndarray
    W_o: np.ndarray
    b_o: np.ndarray

    @classmethod
    def init(cls, d_model: int, d_kv: int | None = None, seed: int = 0) -> MultiHeadParams:
        """Random weights with variance ``1 / fan_in`` and small random biases."""
        rng = np.random.default_rng(seed)
        d_kv = d_model if d_kv is None else d_kv

        def w(fan_in: int) -> np.ndarray:
            return rng.normal(0.0, fan_in**-0.5, size=(fan_in, d_model))

        def b() -> np.ndarray:
            return rng.normal(0.0, 0.02, size=d_model)

        return cls(w(d_model), b(), w(d_kv), b(), w(d_kv), b(), w(d_model), b())

    @property
    def d_model(self) -> int:
        return self.W_o.shape[1]

    def n_params(self) -> int:
        """Number of scalars: ``(d_q + 2 d_kv + d_model) d_model + 4 d_model``."""
        return sum(a.size for a in vars(self).values())


def split_heads(X: np.ndarray, n_heads: int) -> np.ndarray:
    """``(..., T, d_model)`` to ``(..., h, T, d_head)``: head ``i`` gets columns ``i*d_head`` onwards.

    ``d_model`` must be divisible by ``n_heads``; ``d_head = d_model / n_heads``.
    """
    X = np.asarray(X)
    check_split_heads(X.shape, n_heads)
    *batch, T, d_model = X.shape
    return np.swapaxes(X.reshape(*batch, T, n_heads, d_model // n_heads), -3, -2)


def merge_heads(X: np.ndarray) -> np.ndarray:
    """``(..., h, T, d_head)`` to ``(..., T, h * d_head)``: the inverse of ``split_heads``."""
    *batch, h, T, d_head = X.shape
    return np.swapaxes(X, -3, -2).reshape(*batch, T, h * d_head)


def repeat_kv(X: ArrayLike, n_rep: int) -> np.ndarray:
    """``(..., h_kv, T, d_head)`` to ``(..., h_kv * n_rep, T, d_head)``, each head repeated ``n_rep`` times
    in a row, so that query head ``i`` meets key-value head ``i // n_rep``. Refuses an ``n_rep`` that is not
    a positive integer (0 would leave no heads)."""
    X = as_float("X", X)
    require_int("n_rep", n_rep, 1)
    if X.ndim < 3:
        raise ValueError(f"X must have shape (..., h_kv, T, d_head); got shape {shape_str(X.shape)}")
    return np.repeat(X, n_rep, axis=-3)


def grouped_query_attention(
    X_q: ArrayLike,
    X_kv: ArrayLike,
    params: MultiHeadParams,
    n_heads: int,
    n_kv_heads: int,
    mask: ArrayLike | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Attention with ``n_heads`` query heads sharing ``n_kv_heads`` key-value heads.

    Shapes: ``X_q`` ``(..., T_q, d_q)``, ``X_kv`` ``(..., T_k, d_kv)``; ``params.W_k`` and ``params.W_v``
    ``(d_kv, n_kv_heads * d_head)``, the others as in ``multi_head_attention``; ``mask`` broadcastable to
    ``(..., T_q, T_k)``, shared by all heads. Returns ``(output, weights)`` of shapes ``(..., T_q, d_model)``
    and ``(..., n_heads, T_q, T_k)``. Chapter 20; Ainslie et al. (2023).
    """
    X_q, X_kv = as_float("X_q", X_q), as_float("X_kv", X_kv)
    check_mha_shapes(X_q.shape, X_kv.shape, params.W_q.shape, params.W_k.shape, params.W_o.shape[1], n_heads,
                     n_kv_heads, params.W_v.shape)
    Q = split_heads(affine(X_q, params.W_q, params.b_q), n_heads)  # (..., h, T_q, d_head)
    K = split_heads(affine(X_kv, params.W_k, params.b_k), n_kv_heads)  # (..., h_kv, T_k, d_head): what a cache keeps
    V = split_heads(affine(X_kv, params.W_v, params.b_v), n_kv_heads)  # (..., h_kv, T_k, d_head)
    if n_kv_heads != n_heads:  # each key-value head meets its group of query heads
        K, V = repeat_kv(K, n_heads // n_kv_heads), repeat_kv(V, n_heads // n_kv_heads)
    if mask is not None:
        mask = head_mask(mask, X_q.shape[:-1] + (X_kv.shape[-2],))
    heads, weights = scaled_dot_product_attention(Q, K, V, mask=mask)  # (..., h, T_q, d_head)
    return affine(merge_heads(heads), params.W_o, params.b_o), weights  # (..., T_q, d_model)


def multi_head_attention(
    X_q: ArrayLike,
    X_kv: ArrayLike,
    params: MultiHeadParams,
    n_heads: int,
    mask: ArrayLike | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Multi-head attention of the queries ``X_q`` to the context ``X_kv`` (self-attention: the same array).

    ``params`` has attributes ``W_q, b_q, W_k, b_k, W_v, b_v, W_o, b_o`` (row convention; a bias may be
    ``None``). Shapes: ``X_q`` ``(..., T_q, d_q)``, ``X_kv`` ``(..., T_k, d_kv)`` with the same batch dimensions;
    ``mask`` boolean, True where allowed, broadcastable to ``(..., T_q, T_k)`` and shared by all heads.
    Returns ``(output, weights)`` of shapes ``(..., T_q, d_model)`` and ``(..., h, T_q, T_k)``: grouped-query
    attention with as many key-value heads as heads. Chapter 9; Phuong and Hutter, algorithm 5.
    """
    return grouped_query_attention(X_q, X_kv, params, n_heads, n_heads, mask)


def affine(X: np.ndarray, W: np.ndarray, b: np.ndarray | None) -> np.ndarray:
    """``X W + b`` in the row convention; a layer without biases has ``b = None``."""
    return X @ W if b is None else X @ W + b
