"""Grouped-query attention in PyTorch (chapter 20), twin of ``attnbook.numpy.gqa``.

``MultiHeadAttention(..., n_kv_heads=...)`` is the module; ``GroupedQueryAttention`` names it as chapter 20
does. Keys and values are projected to ``n_kv_heads`` heads only, and the cache keeps those heads, so it is
``n_heads / n_kv_heads`` times smaller than multi-head attention's.
"""

from __future__ import annotations

import torch

from attnbook._validate import check_heads, require_int, shape_str
from attnbook.torch._checks import as_float, as_mask, check_mask_fits, require_tensor
from attnbook.torch.attention import scaled_dot_product_attention
from attnbook.torch.multihead import MultiHeadAttention, affine, merge_heads, split_heads


def repeat_kv(X: torch.Tensor, n_rep: int) -> torch.Tensor:
    """``(..., h_kv, T, d_head)`` to ``(..., h_kv * n_rep, T, d_head)``, each head repeated ``n_rep`` times
    in a row, so that query head ``i`` meets key-value head ``i // n_rep``. Refuses what the NumPy twin
    refuses."""
    require_tensor("X", X)
    require_int("n_rep", n_rep, 1)
    X = as_float("X", X)
    if X.dim() < 3:
        raise ValueError(f"X must have shape (..., h_kv, T, d_head); got shape {shape_str(X.shape)}")
    return X.repeat_interleave(n_rep, dim=-3)


def grouped_query_attention(
    X_q: torch.Tensor,
    X_kv: torch.Tensor,
    params: MultiHeadAttention,
    n_heads: int,
    n_kv_heads: int,
    mask: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention with ``n_heads`` query heads sharing ``n_kv_heads`` key-value heads.

    Shapes: ``X_q`` ``(..., T_q, d_model)``, ``X_kv`` ``(..., T_k, d_model)``; ``params.W_k`` and
    ``params.W_v`` ``(d_model, n_kv_heads * d_head)``, the others as in ``multi_head_attention``; ``mask``
    broadcastable to ``(..., T_q, T_k)``, shared by all heads. Returns ``(output, weights)`` of shapes
    ``(..., T_q, d_model)`` and ``(..., n_heads, T_q, T_k)``. Chapter 20; Ainslie et al. (2023).
    """
    require_tensor("X_q", X_q)
    require_tensor("X_kv", X_kv)
    X_q, X_kv = as_float("X_q", X_q), as_float("X_kv", X_kv)
    d_model = params.W_o.shape[1]
    check_heads(d_model, n_heads, n_kv_heads)
    d_head = d_model // n_heads
    if params.W_k.shape[-1] != n_kv_heads * d_head or params.W_v.shape[-1] != n_kv_heads * d_head:
        raise ValueError(f"W_k and W_v must have n_kv_heads * d_head = {n_kv_heads * d_head} columns; got "
                         f"W_k {shape_str(params.W_k.shape)} and W_v {shape_str(params.W_v.shape)}")
    for name, X, W in (("X_q", X_q, params.W_q), ("X_kv", X_kv, params.W_k)):
        if X.dim() < 2 or X.shape[-1] != W.shape[0]:
            raise ValueError(f"{name} must have shape (..., T, {W.shape[0]}); got {shape_str(X.shape)}")
    if X_q.shape[:-2] != X_kv.shape[:-2]:
        raise ValueError(f"X_q and X_kv must have the same batch dimensions; got {shape_str(X_q.shape)} "
                         f"and {shape_str(X_kv.shape)}")
    group = n_heads // n_kv_heads
    Q = split_heads(affine(X_q, params.W_q, params.b_q), n_heads)  # (..., h, T_q, d_head)
    K = split_heads(affine(X_kv, params.W_k, params.b_k), n_kv_heads)  # (..., h_kv, T_k, d_head)
    V = split_heads(affine(X_kv, params.W_v, params.b_v), n_kv_heads)
    if mask is not None:
        mask = as_mask(mask).to(X_q.device)
        check_mask_fits(mask, tuple(X_q.shape[:-1]) + (X_kv.shape[-2],))
        mask = mask.unsqueeze(-3)  # (..., 1, T_q, T_k): the same for every head
    heads, weights = scaled_dot_product_attention(Q, repeat_kv(K, group), repeat_kv(V, group), mask=mask)
    return affine(merge_heads(heads), params.W_o, params.b_o), weights


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
