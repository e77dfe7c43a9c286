"""Multi-head attention in PyTorch (chapters 9 and 12), twin of ``attnbook.numpy.multi_head_attention``.

Weights are in the row convention: ``W_q (d_q, d_model)``, ``W_k`` and ``W_v (d_kv, d_model)``,
``W_o (d_model, d_model)``. The module ``MultiHeadAttention`` holds them as parameters and is itself a
valid ``params`` argument of the functional ``multi_head_attention``. One function computes it:
``grouped_query_attention``, whose ``n_kv_heads`` key-value heads each serve a group of query heads
(chapter 20); ``multi_head_attention`` is the case ``n_kv_heads = n_heads``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from attnbook._validate import check_heads, check_mha_shapes, check_split_heads, require_int, shape_str
from attnbook.torch._checks import as_float, head_mask, require_tensor
from attnbook.torch.attention import masked_softmax, scaled_dot_product_attention
from attnbook.torch.kvcache import KVCache
from attnbook.torch.linear import Linear
from attnbook.torch.masks import causal_mask, combine_masks
from attnbook.torch.rotary import RotaryTables, sliding_window_mask


def split_heads(X: torch.Tensor, n_heads: int) -> torch.Tensor:
    """``(..., T, d_model)`` to ``(..., h, T, d_head)``: head ``i`` gets columns ``i*d_head`` onwards.

    ``d_model`` must be divisible by ``n_heads``; ``d_head = d_model / n_heads``.
    """
    require_tensor("X", X)
    check_split_heads(tuple(X.shape), n_heads)
    *batch, T, d_model = X.shape
    return X.reshape(*batch, T, n_heads, d_model // n_heads).transpose(-3, -2)


def merge_heads(X: torch.Tensor) -> torch.Tensor:
    """``(..., h, T, d_head)`` to ``(..., T, h * d_head)``: the inverse of ``split_heads``."""
    *batch, h, T, d_head = X.shape
    return X.transpose(-3, -2).reshape(*batch, T, h * d_head)


def repeat_kv(X: torch.Tensor, n_rep: int) -> torch.Tensor:
    """``(..., h_kv, T, d_head)`` to ``(..., h_kv * n_rep, T, d_head)``, each head repeated ``n_rep`` times
    in a row, so that query head ``i`` meets key-value head ``i // n_rep``. Refuses an ``n_rep`` that is not
    a positive integer (0 would leave no heads)."""
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

    Shapes: ``X_q`` ``(..., T_q, d_q)``, ``X_kv`` ``(..., T_k, d_kv)``; ``params.W_k`` and ``params.W_v``
    ``(d_kv, n_kv_heads * d_head)``, the others as in ``multi_head_attention``; ``mask`` broadcastable to
    ``(..., T_q, T_k)``, shared by all heads. Returns ``(output, weights)`` of shapes ``(..., T_q, d_model)``
    and ``(..., n_heads, T_q, T_k)``. Chapter 20; Ainslie et al. (2023).
    """
    require_tensor("X_q", X_q)
    require_tensor("X_kv", X_kv)
    X_q, X_kv = as_float("X_q", X_q), as_float("X_kv", X_kv)
    check_mha_shapes(tuple(X_q.shape), tuple(X_kv.shape), tuple(params.W_q.shape), tuple(params.W_k.shape),
                     params.W_o.shape[1], n_heads, n_kv_heads, tuple(params.W_v.shape))
    Q = _heads(affine(X_q, params.W_q, params.b_q), n_heads)  # (..., h, T_q, d_head)
    K = _heads(affine(X_kv, params.W_k, params.b_k), n_kv_heads)  # (..., h_kv, T_k, d_head): what a cache keeps
    V = _heads(affine(X_kv, params.W_v, params.b_v), n_kv_heads)
    if n_kv_heads != n_heads:  # each key-value head meets its group of query heads
        K, V = repeat_kv(K, n_heads // n_kv_heads), repeat_kv(V, n_heads // n_kv_heads)
    if mask is not None:
        mask = head_mask(mask, tuple(X_q.shape[:-1]) + (X_kv.shape[-2],), X_q.device)
    heads, weights = scaled_dot_product_attention(Q, K, V, mask=mask)  # (..., h, T_q, d_head)
    return affine(merge_heads(heads), params.W_o, params.b_o), weights


def multi_head_attention(
    X_q: torch.Tensor,
    X_kv: torch.Tensor,
    params: MultiHeadAttention,
    n_heads: int,
    mask: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Multi-head attention of the queries ``X_q`` to the context ``X_kv`` (self-attention: the same array).

    ``params`` has attributes ``W_q, b_q, W_k, b_k, W_v, b_v, W_o, b_o`` (row convention; a
    ``MultiHeadAttention`` module has them; a bias may be ``None``). Shapes: ``X_q`` ``(..., T_q, d_q)``,
    ``X_kv`` ``(..., T_k, d_kv)`` with the same batch dimensions; ``mask`` boolean, True where allowed,
    broadcastable to ``(..., T_q, T_k)`` and shared by all heads. Returns ``(output, weights)`` of shapes
    ``(..., T_q, d_model)`` and ``(..., h, T_q, T_k)``: grouped-query attention with as many key-value heads
    as heads. Chapters 9 and 12; Phuong and Hutter, algorithm 5.
    """
    return grouped_query_attention(X_q, X_kv, params, n_heads, n_heads, mask)


def affine(X: torch.Tensor, W: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
    """``X W + b`` in the row convention; a layer without biases has ``b = None``."""
    return X @ W if b is None else X @ W + b


def _heads(X: torch.Tensor, n_heads: int) -> torch.Tensor:
    """``split_heads`` without its checks, for callers that have checked the shapes once already."""
    *batch, T, d = X.shape
    return X.reshape(*batch, T, n_heads, d // n_heads).transpose(-3, -2)


QK_NORM_EPS = 1e-6  # inside the root of query-key normalisation (MultiHeadAttention(qk_norm=True))


class MultiHeadAttention(nn.Module):
    """Multi-head attention as a module: self-attention (``x_kv`` omitted) or cross-attention.

    ``forward(x_q, x_kv=None, mask=None, causal=False, need_weights=False, cache=None)`` returns
    ``(output, weights)``; ``weights`` is ``None`` unless asked for. ``causal=True`` adds the causal mask.
    With a ``cache`` (self-attention only), ``x_q`` holds the new tokens; their keys and values are
    appended to those cached, and the queries attend to all of them (chapter 17).
    ``n_kv_heads`` (default ``n_heads``) projects keys and values to fewer heads, each shared by a group
    of ``n_heads / n_kv_heads`` query heads: grouped-query attention, multi-query for ``n_kv_heads = 1``
    (chapter 20); the cache then holds ``n_kv_heads`` heads.
    ``rotary=True`` (self-attention only) rotates every head's queries and keys by their absolute positions
    (rotary position embeddings, base ``rope_base``, chapter 21): ``0 .. T-1``, or after the positions that went
    through the cache; a sliding cache (``KVCache(max_length=...)``) limits attention to its window. The
    cosines and sines are computed once, in ``rope`` (a ``RotaryTables``, which a ``GPT`` shares among its layers).
    ``qk_norm=True`` divides every head's query and key by its root mean square (``QK_NORM_EPS`` inside the
    root, no learned scale) before any rotation: query-key normalisation, which bounds each score by
    ``sqrt(d_head)`` in size however large the projections grow.
    Unless the weights are asked for, it calls PyTorch's fused ``scaled_dot_product_attention``, which
    gives the same result faster, masks and attention dropout included. Refuses a ``d_model`` or ``d_kv``
    below 1 and head counts that do not divide (``check_heads``).
    """

    def __init__(self, d_model: int, n_heads: int, d_kv: int | None = None, dropout: float = 0.0,
                 bias: bool = True, n_kv_heads: int | None = None, rotary: bool = False,
                 qk_norm: bool = False, rope_base: float = 10000.0) -> None:
        super().__init__()
        n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
        require_int("d_model", d_model, 1)
        if d_kv is not None:
            require_int("d_kv", d_kv, 1)
        check_heads(d_model, n_heads, n_kv_heads)
        if not 0 <= dropout < 1:
            raise ValueError(f"dropout must lie in [0, 1); got {dropout}")
        d_kv = d_model if d_kv is None else d_kv
        self.d_model, self.n_heads, self.n_kv_heads, self.dropout = d_model, n_heads, n_kv_heads, dropout
        self.rotary, self.qk_norm = rotary, qk_norm
        self.record = False  # set by attnbook.torch.inspect.record_attention
        self.last_weights: torch.Tensor | None = None
        d_kv_out = n_kv_heads * (d_model // n_heads)
        self.q_proj, self.k_proj = Linear(d_model, d_model, bias), Linear(d_kv, d_kv_out, bias)
        self.v_proj, self.out_proj = Linear(d_kv, d_kv_out, bias), Linear(d_model, d_model, bias)
        # The tables grow when positions pass their length; a GPT replaces them by one of block_size, shared.
        self.rope = RotaryTables(d_model // n_heads, 128, rope_base) if rotary else None

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
        q, k, v = self._project(x_q, x_kv, cache)  # (B, h, T_q, d_head) and (B, h_kv, T_k, d_head) twice
        need_weights = need_weights or self.record
        mask, fused_causal = self._attention_mask(mask, causal, need_weights, cache, x_q, T_k=k.shape[-2])
        k, v = self._repeat_kv(k), self._repeat_kv(v)  # (B, h, T_k, d_head)
        dropout = self.dropout if self.training else 0.0
        if not need_weights:  # PyTorch's fused kernel: the same softmax(q k^T / sqrt(d_head)) v, faster
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout, is_causal=fused_causal)
            return self.out_proj(merge_heads(out)), None
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, h, T_q, T_k)
        weights = masked_softmax(scores, mask)  # (B, h, T_q, T_k), each row sums to 1 (or is all zero)
        # Attention dropout acts on the weights, before the product with V (as the fused kernel does).
        weights = F.dropout(weights, dropout, self.training) if dropout else weights
        if self.record:
            self.last_weights = weights.detach()
        out = weights @ v  # (B, h, T_q, d_head)
        return self.out_proj(merge_heads(out)), weights  # heads side by side (B, T_q, d_model), then W_o

    def _project(self, x_q: torch.Tensor, x_kv: torch.Tensor | None,
                 cache: KVCache | None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Checked inputs to per-head queries, keys and values: normalised, rotated and cached as configured."""
        x_kv = self._check_inputs(x_q, x_kv, cache)
        q = _heads(self.q_proj(x_q), self.n_heads)  # (B, h, T_q, d_head)
        k = _heads(self.k_proj(x_kv), self.n_kv_heads)  # (B, h_kv, T_new, d_head)
        v = _heads(self.v_proj(x_kv), self.n_kv_heads)
        if self.qk_norm:  # per head, before the rotation (which keeps each vector's length anyway)
            q, k = self._rms(q), self._rms(k)
        if self.rotary:
            q, k = self._rotate(q, k, cache)
        if cache is not None:
            k, v = cache.update(self, k, v)  # (B, h_kv, T_seen + T_new, d_head)
        return q, k, v

    def _check_inputs(self, x_q: torch.Tensor, x_kv: torch.Tensor | None, cache: KVCache | None) -> torch.Tensor:
        """The context ``x_kv`` (``x_q`` itself for self-attention), once the inputs are checked: the one shape
        check of the forward pass; what follows uses the unchecked helpers."""
        if cache is not None and x_kv is not None and x_kv is not x_q:
            raise ValueError("a KVCache serves self-attention only; got a separate x_kv")
        if self.rotary and x_kv is not None and x_kv is not x_q:
            raise ValueError("rotary positions serve self-attention only (queries and keys at the same positions); "
                             "got a separate x_kv")
        x_kv = x_q if x_kv is None else x_kv
        require_tensor("x_q", x_q)
        require_tensor("x_kv", x_kv)
        check_mha_shapes(tuple(x_q.shape), tuple(x_kv.shape), tuple(self.W_q.shape), tuple(self.W_k.shape),
                         self.d_model, self.n_heads)
        return x_kv

    @staticmethod
    def _rms(x: torch.Tensor) -> torch.Tensor:
        """Query-key normalisation: each head's vectors divided by their root mean square (no learned scale)."""
        return F.rms_norm(x, x.shape[-1:], eps=QK_NORM_EPS)

    def _rotate(self, q: torch.Tensor, k: torch.Tensor,
                cache: KVCache | None) -> tuple[torch.Tensor, torch.Tensor]:
        """Rotary positions: queries and keys turned by their absolute positions (chapter 21)."""
        # The new tokens sit after every position that went through the cache (dropped ones included).
        start = cache.seen.get(self, 0) if cache is not None else 0
        return self.rope(q, start), self.rope(k, start)  # cached keys stay rotated

    def _repeat_kv(self, x: torch.Tensor) -> torch.Tensor:
        """Grouped-query attention: each of the ``n_kv_heads`` key or value heads repeated for its group of query
        heads, ``(B, h_kv, T, d_head)`` to ``(B, h, T, d_head)``; unchanged when every head has its own."""
        if self.n_kv_heads == self.n_heads:
            return x
        return x.repeat_interleave(self.n_heads // self.n_kv_heads, dim=-3)

    def _attention_mask(self, mask: torch.Tensor | None, causal: bool, need_weights: bool, cache: KVCache | None,
                        x_q: torch.Tensor, T_k: int) -> tuple[torch.Tensor | None, bool]:
        """The mask every head shares and whether the fused kernel should build the causal one itself (it does so
        when the causal mask is the only one, square, and no weights are asked for)."""
        # A sliding cache: each query sees the last max_length positions, itself included.
        window = cache.max_length if cache is not None and cache.max_length is not None and T_k > cache.max_length \
            else None
        fused_causal = causal and mask is None and window is None and x_q.shape[-2] == T_k and not need_weights
        mask = self._mask(mask, causal and not fused_causal, window, tuple(x_q.shape[:-1]), T_k, x_q.device)
        return mask, fused_causal

    @staticmethod
    def _mask(mask: torch.Tensor | None, causal: bool, window: int | None, query_shape: tuple[int, ...], T_k: int,
              device: torch.device) -> torch.Tensor | None:
        """The mask ``(..., 1, T_q, T_k)`` every head shares: the caller's, a sliding ``window`` and the causal
        mask combined (the queries are the last ``T_q`` positions), or ``None`` for none of them."""
        T_q = query_shape[-1]
        mask = None if mask is None else head_mask(mask, query_shape + (T_k,), device)
        parts = [sliding_window_mask(T_q, T_k, window=window)] if window is not None else []
        if causal:
            parts.append(causal_mask(T_q, T_k))
        for part in parts:
            part = part.to(device).unsqueeze(-3)  # (1, T_q, T_k)
            mask = part if mask is None else combine_masks(mask, part)
        return mask
