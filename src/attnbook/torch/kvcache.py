"""A key-value cache for generation (chapter 17).

When a decoder-only model generates, every step would recompute the keys and values of all earlier
tokens, although they do not change: causal attention means a token's keys and values depend only on
the tokens before it. The cache keeps them, one pair of tensors per attention module, so each new step
computes the query, key and value of the new token only.
"""

from __future__ import annotations

import torch
from torch import nn


class KVCache:
    """Keys and values seen so far, per attention module, each ``(B, h, T_seen, d_head)``."""

    def __init__(self) -> None:
        self.keys: dict[nn.Module, torch.Tensor] = {}
        self.values: dict[nn.Module, torch.Tensor] = {}

    @property
    def length(self) -> int:
        """How many positions are cached (0 when empty)."""
        return next(iter(self.keys.values())).shape[-2] if self.keys else 0

    @property
    def nbytes(self) -> int:
        """Bytes held by the cached keys and values of all modules (chapter 20)."""
        return sum(t.numel() * t.element_size() for d in (self.keys, self.values) for t in d.values())

    def update(self, module: nn.Module, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Append the new keys and values ``(B, h, T_new, d_head)`` of ``module``; return all of them."""
        if module in self.keys:
            k = torch.cat([self.keys[module], k], dim=-2)  # (B, h, T_seen + T_new, d_head)
            v = torch.cat([self.values[module], v], dim=-2)
        self.keys[module], self.values[module] = k, v
        return k, v

    def __repr__(self) -> str:
        return f"KVCache(modules={len(self.keys)}, length={self.length})"


def kv_cache_bytes(n_layers: int, n_kv_heads: int, d_head: int, n_tokens: int = 1, bytes_per_value: int = 4,
                   batch: int = 1) -> int:
    """Bytes a key-value cache needs: ``2 * n_layers * n_kv_heads * d_head * bytes_per_value`` per token.

    The 2 counts keys and values; every layer caches both for each of its ``n_kv_heads`` key-value heads
    (``n_heads`` for multi-head attention). Multiply by ``n_tokens`` and ``batch``. Chapter 20.
    """
    return 2 * n_layers * n_kv_heads * d_head * bytes_per_value * n_tokens * batch
