"""Multi-head attention in PyTorch (chapters 9 and 12), twin of ``attnbook.numpy.multi_head_attention``.

Weights are in the row convention: ``W_q (d_q, d_model)``, ``W_k`` and ``W_v (d_kv, d_model)``,
``W_o (d_model, d_model)``. The module ``MultiHeadAttention`` holds them as parameters and is itself a
valid ``params`` argument of the functional ``multi_head_attention``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from attnbook._validate import check_mha_shapes, check_split_heads
from attnbook.torch._checks import as_mask, check_mask_fits, require_tensor
from attnbook.torch.attention import scaled_dot_product_attention
from attnbook.torch.kvcache import KVCache
from attnbook.torch.linear import Linear


def split_heads(X: torch.Tensor, n_heads: int) -> torch.Tensor:
    """``(..., T, d_model)`` to ``(..., h, T, d_head)``; ``d_model`` must be divisible by ``n_heads``."""
    require_tensor("X", X)
    check_split_heads(tuple(X.shape), n_heads)
    *batch, T, d_model = X.shape
    return X.reshape(*batch, T, n_heads, d_model // n_heads).transpose(-3, -2)


def merge_heads(X: torch.Tensor) -> torch.Tensor:
    """``(..., h, T, d_head)`` to ``(..., T, h * d_head)``."""
    *batch, h, T, d_head = X.shape
    return X.transpose(-3, -2).reshape(*batch, T, h * d_head)


def multi_head_attention(
    X_q: torch.Tensor,
    X_kv: torch.Tensor,
    params,
    n_heads: int,
    mask: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Multi-head attention with explicit weights; same signature and meaning as the NumPy twin.

    ``params`` has attributes ``W_q, b_q, W_k, b_k, W_v, b_v, W_o, b_o`` (row convention). Shapes:
    ``X_q`` ``(..., T_q, d_q)``, ``X_kv`` ``(..., T_k, d_kv)``; ``mask`` broadcastable to
    ``(..., T_q, T_k)``, True where allowed. Returns ``(..., T_q, d_model)`` and ``(..., h, T_q, T_k)``.
    """
    require_tensor("X_q", X_q)
    require_tensor("X_kv", X_kv)
    check_mha_shapes(tuple(X_q.shape), tuple(X_kv.shape), tuple(params.W_q.shape), tuple(params.W_k.shape),
                     params.W_o.shape[1], n_heads)
    Q = split_heads(_affine(X_q, params.W_q, params.b_q), n_heads)  # (..., h, T_q, d_head)
    K = split_heads(_affine(X_kv, params.W_k, params.b_k), n_heads)  # (..., h, T_k, d_head)
    V = split_heads(_affine(X_kv, params.W_v, params.b_v), n_heads)  # (..., h, T_k, d_head)
    if mask is not None:
        mask = as_mask(mask).to(X_q.device)
        check_mask_fits(mask, tuple(X_q.shape[:-1]) + (X_kv.shape[-2],))
        mask = mask.unsqueeze(-3)  # one mask for every head: (..., 1, T_q, T_k)
    heads, weights = scaled_dot_product_attention(Q, K, V, mask=mask)
    return _affine(merge_heads(heads), params.W_o, params.b_o), weights


def _affine(X: torch.Tensor, W: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
    return X @ W if b is None else X @ W + b  # a model without biases has b = None


def _with_causal(mask: torch.Tensor | None, T_q: int, T_k: int, device: torch.device) -> torch.Tensor:
    """``mask`` combined with the causal mask, for queries that are the last ``T_q`` of ``T_k`` positions:
    query ``i`` sits at position ``T_k - T_q + i`` and sees every position up to its own."""
    causal = torch.ones(T_q, T_k, dtype=torch.bool, device=device).tril(T_k - T_q)
    return causal if mask is None else as_mask(mask).to(device) & causal


class MultiHeadAttention(nn.Module):
    """Multi-head attention as a module: self-attention (``x_kv`` omitted) or cross-attention.

    ``forward(x_q, x_kv=None, mask=None, causal=False, need_weights=False)`` returns
    ``(output, weights)``; ``weights`` is ``None`` unless asked for. ``causal=True`` adds the causal mask.
    With a ``cache`` (self-attention only), ``x_q`` holds the new tokens; their keys and values are
    appended to those cached, and the queries attend to all of them (chapter 17).
    Without weights and without a padding mask it calls PyTorch's fused
    ``scaled_dot_product_attention``, which gives the same result faster.
    """

    def __init__(self, d_model: int, n_heads: int, d_kv: int | None = None, dropout: float = 0.0,
                 bias: bool = True) -> None:
        super().__init__()
        if n_heads < 1 or d_model % n_heads:
            raise ValueError(f"d_model = {d_model} must be divisible by n_heads; got n_heads = {n_heads}")
        d_kv = d_model if d_kv is None else d_kv
        self.d_model, self.n_heads, self.dropout = d_model, n_heads, dropout
        self.record = False  # set by attnbook.torch.inspect.record_attention
        self.last_weights: torch.Tensor | None = None
        self.q_proj, self.k_proj = Linear(d_model, d_model, bias), Linear(d_kv, d_model, bias)
        self.v_proj, self.out_proj = Linear(d_kv, d_model, bias), Linear(d_model, d_model, bias)

    # The row-convention weights, under the names the functional form expects.
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
        if cache is not None:
            if x_kv is not None and x_kv is not x_q:
                raise ValueError("a KVCache serves self-attention only; got a separate x_kv")
            return self._forward_cached(x_q, cache, mask, causal, need_weights or self.record)
        x_kv = x_q if x_kv is None else x_kv
        check_mha_shapes(tuple(x_q.shape), tuple(x_kv.shape), tuple(self.W_q.shape), tuple(self.W_k.shape),
                         self.d_model, self.n_heads)
        T_q, T_k = x_q.shape[-2], x_kv.shape[-2]
        need_weights = need_weights or self.record
        dropout = self.dropout if self.training else 0.0
        # PyTorch's fused kernel gives the same result faster when nothing but the output is wanted and the
        # only mask, if any, is the square causal one it builds itself.
        if not need_weights and mask is None and dropout == 0.0 and (not causal or T_q == T_k):
            q = split_heads(self.q_proj(x_q), self.n_heads)  # (B, h, T_q, d_head)
            k = split_heads(self.k_proj(x_kv), self.n_heads)
            v = split_heads(self.v_proj(x_kv), self.n_heads)
            out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            return self.out_proj(merge_heads(out)), None
        if causal:
            mask = _with_causal(mask, T_q, T_k, x_q.device)
        out, weights = multi_head_attention(x_q, x_kv, self, self.n_heads, mask)
        if dropout:
            # Attention dropout acts on the weights; recompute the output from the dropped weights.
            weights = F.dropout(weights, dropout, self.training)
            v = split_heads(self.v_proj(x_kv), self.n_heads)
            out = self.out_proj(merge_heads(weights @ v))
        if self.record:
            self.last_weights = weights.detach()
        return out, weights if need_weights else None

    def _forward_cached(self, x: torch.Tensor, cache: KVCache, mask: torch.Tensor | None, causal: bool,
                        need_weights: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
        check_mha_shapes(tuple(x.shape), tuple(x.shape), tuple(self.W_q.shape), tuple(self.W_k.shape),
                         self.d_model, self.n_heads)
        q = split_heads(self.q_proj(x), self.n_heads)  # (B, h, T_new, d_head)
        k, v = cache.update(self, split_heads(self.k_proj(x), self.n_heads), split_heads(self.v_proj(x), self.n_heads))
        T_q, T_k = q.shape[-2], k.shape[-2]  # T_k = T_seen + T_new
        if causal:
            mask = _with_causal(mask, T_q, T_k, x.device)
        if mask is not None:
            mask = as_mask(mask).to(x.device)
            check_mask_fits(mask, tuple(x.shape[:-2]) + (T_q, T_k))
            mask = mask.unsqueeze(-3)  # (..., 1, T_q, T_k): the same for every head
        if need_weights:
            out, weights = scaled_dot_product_attention(q, k, v, mask=mask)
            if self.record:
                self.last_weights = weights.detach()
            return self.out_proj(merge_heads(out)), weights
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # (B, h, T_new, d_head)
        return self.out_proj(merge_heads(out)), None
