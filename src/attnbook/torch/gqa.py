"""Grouped-query attention in PyTorch (chapter 20), twin of ``attnbook.numpy.gqa``.

``GroupedQueryAttention`` has the interface of ``MultiHeadAttention`` (self- or cross-attention, masks,
``causal``, a ``KVCache``), with keys and values projected to ``n_kv_heads`` heads only. The cache keeps
those ``n_kv_heads`` heads, so it is ``n_heads / n_kv_heads`` times smaller than multi-head attention's.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from attnbook._validate import shape_str
from attnbook.numpy.gqa import check_gqa_heads
from attnbook.torch._checks import as_mask, check_mask_fits
from attnbook.torch.attention import scaled_dot_product_attention
from attnbook.torch.kvcache import KVCache
from attnbook.torch.linear import Linear
from attnbook.torch.multihead import _with_causal, merge_heads, split_heads


def repeat_kv(X: torch.Tensor, n_rep: int) -> torch.Tensor:
    """``(..., h_kv, T, d_head)`` to ``(..., h_kv * n_rep, T, d_head)``: query head ``i`` meets head ``i // n_rep``."""
    if X.dim() < 3:
        raise ValueError(f"X must have shape (..., h_kv, T, d_head); got shape {shape_str(X.shape)}")
    return X.repeat_interleave(n_rep, dim=-3)


def grouped_query_attention(
    X_q: torch.Tensor,
    X_kv: torch.Tensor,
    params,
    n_heads: int,
    n_kv_heads: int,
    mask: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention with ``n_heads`` query heads sharing ``n_kv_heads`` key-value heads; same signature and
    meaning as the NumPy twin. ``params`` has ``W_q, b_q, W_k, b_k, W_v, b_v, W_o, b_o`` (row convention,
    ``W_k`` and ``W_v`` of shape ``(d_model, n_kv_heads * d_head)``). Returns ``(..., T_q, d_model)`` and
    ``(..., n_heads, T_q, T_k)``."""
    d_model = params.W_o.shape[1]
    check_gqa_heads(d_model, n_heads, n_kv_heads)
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
    Q = split_heads(_affine(X_q, params.W_q, params.b_q), n_heads)  # (..., h, T_q, d_head)
    K = split_heads(_affine(X_kv, params.W_k, params.b_k), n_kv_heads)  # (..., h_kv, T_k, d_head)
    V = split_heads(_affine(X_kv, params.W_v, params.b_v), n_kv_heads)
    if mask is not None:
        mask = as_mask(mask).to(X_q.device)
        check_mask_fits(mask, tuple(X_q.shape[:-1]) + (X_kv.shape[-2],))
        mask = mask.unsqueeze(-3)  # (..., 1, T_q, T_k): the same for every head
    heads, weights = scaled_dot_product_attention(Q, repeat_kv(K, group), repeat_kv(V, group), mask=mask)
    return _affine(merge_heads(heads), params.W_o, params.b_o), weights


def _affine(X: torch.Tensor, W: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
    return X @ W if b is None else X @ W + b


class GroupedQueryAttention(nn.Module):
    """Grouped-query attention as a module, with the interface of ``MultiHeadAttention``.

    ``forward(x_q, x_kv=None, mask=None, causal=False, need_weights=False, cache=None)`` returns
    ``(output, weights)``. ``n_kv_heads == n_heads`` is multi-head attention, ``n_kv_heads == 1``
    multi-query attention. The projections are named as in ``MultiHeadAttention`` (``q_proj``, ``k_proj``,
    ``v_proj``, ``out_proj``), with ``k_proj`` and ``v_proj`` mapping ``d_kv`` to ``n_kv_heads * d_head``.
    """

    def __init__(self, d_model: int, n_heads: int, n_kv_heads: int, d_kv: int | None = None,
                 dropout: float = 0.0, bias: bool = True) -> None:
        super().__init__()
        check_gqa_heads(d_model, n_heads, n_kv_heads)
        d_kv = d_model if d_kv is None else d_kv
        self.d_model, self.n_heads, self.n_kv_heads, self.dropout = d_model, n_heads, n_kv_heads, dropout
        d_kv_out = n_kv_heads * (d_model // n_heads)
        self.q_proj, self.k_proj = Linear(d_model, d_model, bias), Linear(d_kv, d_kv_out, bias)
        self.v_proj, self.out_proj = Linear(d_kv, d_kv_out, bias), Linear(d_model, d_model, bias)

    W_q = property(lambda self: self.q_proj.W)
    b_q = property(lambda self: self.q_proj.b)
    W_k = property(lambda self: self.k_proj.W)
    b_k = property(lambda self: self.k_proj.b)
    W_v = property(lambda self: self.v_proj.W)
    b_v = property(lambda self: self.v_proj.b)
    W_o = property(lambda self: self.out_proj.W)
    b_o = property(lambda self: self.out_proj.b)

    def forward(
        self,
        x_q: torch.Tensor,
        x_kv: torch.Tensor | None = None,
        mask: torch.Tensor | None = None,
        causal: bool = False,
        need_weights: bool = False,
        cache: KVCache | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        if cache is not None and x_kv is not None and x_kv is not x_q:
            raise ValueError("a KVCache serves self-attention only; got a separate x_kv")
        x_kv = x_q if x_kv is None else x_kv
        for name, x, d in (("x_q", x_q, self.W_q.shape[0]), ("x_kv", x_kv, self.W_k.shape[0])):
            if x.dim() < 2 or x.shape[-1] != d:
                raise ValueError(f"{name} must have shape (..., T, {d}); got {shape_str(x.shape)}")
        q = split_heads(self.q_proj(x_q), self.n_heads)  # (B, h, T_q, d_head)
        k = split_heads(self.k_proj(x_kv), self.n_kv_heads)  # (B, h_kv, T_new, d_head)
        v = split_heads(self.v_proj(x_kv), self.n_kv_heads)
        if cache is not None:
            k, v = cache.update(self, k, v)  # the cache holds h_kv heads, not h
        T_q, T_k = q.shape[-2], k.shape[-2]
        # As in MultiHeadAttention: the fused kernel builds the square causal mask itself.
        fused_causal = causal and mask is None and T_q == T_k and not need_weights
        if causal and not fused_causal:
            mask = _with_causal(mask, T_q, T_k, x_q.device)
        if mask is not None:
            mask = as_mask(mask).to(x_q.device)
            check_mask_fits(mask, tuple(x_q.shape[:-1]) + (T_k,))
            mask = mask.unsqueeze(-3)  # (..., 1, T_q, T_k)
        group = self.n_heads // self.n_kv_heads
        k, v = repeat_kv(k, group), repeat_kv(v, group)  # (B, h, T_k, d_head)
        dropout = self.dropout if self.training else 0.0
        if need_weights:
            out, weights = scaled_dot_product_attention(q, k, v, mask=mask)
            if dropout:
                weights = F.dropout(weights, dropout, self.training)
                out = weights @ v
            return self.out_proj(merge_heads(out)), weights
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout,
                                             is_causal=fused_causal)  # (B, h, T_q, d_head)
        return self.out_proj(merge_heads(out)), None
