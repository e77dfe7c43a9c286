"""Grouped-query attention in PyTorch (chapter 20), twin of ``attnbook.numpy.gqa``.

``MultiHeadAttention(..., n_kv_heads=...)`` is the module; ``GroupedQueryAttention`` names it as chapter 20
does. Keys and values are projected to ``n_kv_heads`` heads only, and the cache keeps those heads, so it is
``n_heads / n_kv_heads`` times smaller than multi-head attention's.
"""

from __future__ import annotations

from attnbook.torch.multihead import MultiHeadAttention, grouped_query_attention, repeat_kv

__all__ = ["GroupedQueryAttention", "grouped_query_attention", "repeat_kv"]  # the attention itself: multihead.py


class GroupedQueryAttention(MultiHeadAttention):
    """``MultiHeadAttention`` with ``n_kv_heads`` key-value heads, under its chapter-20 name.

    ``GroupedQueryAttention(d_model, n_heads, n_kv_heads)`` is ``MultiHeadAttention(d_model, n_heads,
    n_kv_heads=n_kv_heads)``: the same interface, projections (``k_proj`` and ``v_proj`` map ``d_kv`` to
    ``n_kv_heads * d_head``) and cache. ``n_kv_heads == n_heads`` is multi-head attention, ``n_kv_heads == 1``
    multi-query attention.
    """

    def __init__(self, d_model: int, n_heads: int, n_kv_heads: int, d_kv: int | None = None,
                 dropout: float = 0.0, bias: bool = True) -> None:
        super().__init__(d_model, n_heads, d_kv=d_kv, dropout=dropout, bias=bias, n_kv_heads=n_kv_heads)
