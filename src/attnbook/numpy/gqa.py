"""Grouped-query attention (chapter 20): fewer key and value heads than query heads.

``n_heads`` query heads share ``n_kv_heads`` key-value heads in groups of ``n_heads / n_kv_heads``:
query head ``i`` uses key-value head ``i // group``. With ``n_kv_heads == n_heads`` it is multi-head
attention; with ``n_kv_heads == 1`` it is multi-query attention (Shazeer, 2019). The key-value cache
shrinks by the factor ``n_heads / n_kv_heads`` (Ainslie et al., 2023).
"""

from __future__ import annotations

import numpy as np

from attnbook._validate import check_heads
from attnbook.numpy.multihead import MultiHeadParams, grouped_query_attention, repeat_kv

__all__ = ["grouped_query_attention", "grouped_query_params", "repeat_kv"]  # the attention itself: multihead.py


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
