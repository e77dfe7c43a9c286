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
    """Keys and values seen so far, per attention module, each ``(B, h, T_seen, d_head)``.

    ``max_length`` (default ``None``: no limit) makes it a sliding cache (chapter 21): after each update it
    keeps only the last ``max_length`` positions, and attention through it sees at most the last
    ``max_length`` positions. Only a model with rotary positions can use one: its cached keys stay valid
    when older ones are dropped, since a score depends only on the offset between query and key.
    """

    def __init__(self, max_length: int | None = None) -> None:
        if max_length is not None and (isinstance(max_length, bool) or not isinstance(max_length, int)
                                       or max_length < 1):
            raise ValueError(f"max_length must be None (no limit) or an integer, at least 1; got {max_length!r}")
        self.max_length = max_length
        self.keys: dict[nn.Module, torch.Tensor] = {}
        self.values: dict[nn.Module, torch.Tensor] = {}
        self.seen: dict[nn.Module, int] = {}  # positions appended per module, dropped ones included

    @property
    def length(self) -> int:
        """How many positions are cached (0 when empty)."""
        return next(iter(self.keys.values())).shape[-2] if self.keys else 0

    @property
    def position(self) -> int:
        """How many positions have gone through the cache: the absolute position of the next token.
        It equals ``length`` until a sliding cache drops its first positions (chapter 21)."""
        return next(iter(self.seen.values())) if self.seen else 0

    @property
    def nbytes(self) -> int:
        """Bytes held by the cached keys and values of all modules (chapter 20)."""
        return sum(t.numel() * t.element_size() for d in (self.keys, self.values) for t in d.values())

    def update(self, module: nn.Module, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Append the new keys and values ``(B, h, T_new, d_head)`` of ``module``; return all of them.

        A sliding cache returns the kept positions and the new ones (the caller masks what lies beyond the
        window), and keeps only the last ``max_length`` of them for the next step.
        """
        self.seen[module] = self.seen.get(module, 0) + k.shape[-2]
        if module in self.keys:
            k = torch.cat([self.keys[module], k], dim=-2)  # (B, h, T_seen + T_new, d_head)
            v = torch.cat([self.values[module], v], dim=-2)
        if self.max_length is not None and k.shape[-2] > self.max_length:
            self.keys[module], self.values[module] = k[..., -self.max_length:, :], v[..., -self.max_length:, :]
        else:
            self.keys[module], self.values[module] = k, v
        return k, v

    def __repr__(self) -> str:
        window = f", max_length={self.max_length}, position={self.position}" if self.max_length is not None else ""
        return f"KVCache(modules={len(self.keys)}, length={self.length}{window})"


def kv_cache_bytes(n_layers: int, n_kv_heads: int, d_head: int, n_tokens: int = 1, bytes_per_value: int = 4,
                   batch: int = 1) -> int:
    """Bytes a key-value cache needs: ``2 * n_layers * n_kv_heads * d_head * bytes_per_value`` per token.

    The 2 counts keys and values; every layer caches both for each of its ``n_kv_heads`` key-value heads
    (``n_heads`` for multi-head attention). Multiply by ``n_tokens`` and ``batch``. Chapter 20.
    """
    return 2 * n_layers * n_kv_heads * d_head * bytes_per_value * n_tokens * batch
