"""A key-value cache for generation (chapter 17).

When a decoder-only model generates, every step would recompute the keys and values of all earlier
tokens, although they do not change: causal attention means a token's keys and values depend only on
the tokens before it. The cache keeps them, one pair of tensors per attention module, so each new step
computes the query, key and value of the new token only.
"""

from __future__ import annotations

import weakref

import torch
from torch import nn

from attnbook._validate import require_int, shape_str


class KVCache:
    """Keys and values seen so far, per attention module, each ``(B, h, T_seen, d_head)``.

    ``max_length`` (default ``None``: no limit) makes it a sliding cache (chapter 21): after each update it
    keeps only the last ``max_length`` positions, and attention through it sees at most the last
    ``max_length`` positions. Only a model with rotary positions can use one: its cached keys stay valid
    when older ones are dropped, since a score depends only on the offset between query and key.

    A cache belongs to the model that first fills it (``claim``, called by ``GPT.forward``): passing it to
    another model raises ``ValueError`` naming both, since that model would read the first one's keys and
    positions. Use one cache per model and per generated batch.
    """

    def __init__(self, max_length: int | None = None) -> None:
        if max_length is not None and (isinstance(max_length, bool) or not isinstance(max_length, int)
                                       or max_length < 1):
            raise ValueError(f"max_length must be None (no limit) or an integer, at least 1; got {max_length!r}")
        self.max_length = max_length
        self.keys: dict[nn.Module, torch.Tensor] = {}
        self.values: dict[nn.Module, torch.Tensor] = {}
        self.seen: dict[nn.Module, int] = {}  # positions appended per module, dropped ones included
        self._owner: weakref.ref[nn.Module] | None = None  # a weak reference: the cache does not keep a model alive
        self._owner_name = ""

    def claim(self, model: nn.Module) -> None:
        """Record ``model`` as the one this cache serves, or raise ``ValueError`` if another model has filled it.

        One identity comparison per forward pass, no tensor is touched. Chapter 17."""
        owner = self._owner() if self._owner is not None else None
        if owner is model:
            return
        name = f"{type(model).__name__} at {id(model):#x}"
        if self._owner is not None and self.keys:  # an empty cache holds nothing of anyone's: it may change hands
            state = "" if owner is not None else " (since deleted)"
            raise ValueError(f"this KVCache holds the keys and values of {self._owner_name}{state}; it cannot serve "
                             f"another model, {name}, which would read them as its own. Give each model its own "
                             "KVCache()")
        self._owner, self._owner_name = weakref.ref(model), name

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
        window), and keeps only the last ``max_length`` of them for the next step. Refuses new keys or values
        whose batch, heads or ``d_head`` differ from those cached for ``module`` (a shape comparison only).
        """
        self._check_new(module, k, v)
        self.seen[module] = self.seen.get(module, 0) + k.shape[-2]
        if module in self.keys:
            old_k, old_v = self.keys[module], self.values[module]
            if self.max_length is not None and k.shape[-2] == 1:
                # One new token sees itself and the max_length - 1 positions before it: drop the others now,
                # so that attention gets exactly its window and needs no mask.
                start = max(old_k.shape[-2] - (self.max_length - 1), 0)
                old_k, old_v = old_k[..., start:, :], old_v[..., start:, :]
            k = torch.cat([old_k, k], dim=-2)  # (B, h, T_seen + T_new, d_head)
            v = torch.cat([old_v, v], dim=-2)
        if self.max_length is not None and k.shape[-2] > self.max_length:
            self.keys[module], self.values[module] = k[..., -self.max_length:, :], v[..., -self.max_length:, :]
        else:
            self.keys[module], self.values[module] = k, v
        return k, v

    def _check_new(self, module: nn.Module, k: torch.Tensor, v: torch.Tensor) -> None:
        """Refuse new keys and values of different shapes, or that do not continue those cached for ``module``."""
        if k.shape != v.shape or k.dim() != 4:
            raise ValueError(f"k and v must have the same shape (B, h, T_new, d_head); got k {shape_str(k.shape)} "
                             f"and v {shape_str(v.shape)}")
        if module in self.keys and (cached := self.keys[module].shape)[:2] + cached[3:] != k.shape[:2] + k.shape[3:]:
            raise ValueError(f"the new keys {shape_str(k.shape)} do not continue the cached ones {shape_str(cached)}: "
                             "batch, heads and d_head must match (only T grows). Start a new KVCache() for a new "
                             "batch")

    def __repr__(self) -> str:
        window = f", max_length={self.max_length}, position={self.position}" if self.max_length is not None else ""
        return f"KVCache(modules={len(self.keys)}, length={self.length}{window})"


def kv_cache_bytes(n_layers: int, n_kv_heads: int, d_head: int, n_tokens: int = 1, bytes_per_value: int = 4,
                   batch: int = 1) -> int:
    """Bytes a key-value cache needs: ``2 * n_layers * n_kv_heads * d_head * bytes_per_value`` per token.

    The 2 counts keys and values; every layer caches both for each of its ``n_kv_heads`` key-value heads
    (``n_heads`` for multi-head attention). Multiply by ``n_tokens`` and ``batch``. Chapter 20. Refuses
    arguments that are not integers, at least 1 (``n_tokens`` at least 0).
    """
    for name, value in (("n_layers", n_layers), ("n_kv_heads", n_kv_heads), ("d_head", d_head),
                        ("bytes_per_value", bytes_per_value), ("batch", batch)):
        require_int(name, value, 1)
    require_int("n_tokens", n_tokens, 0)
    return 2 * n_layers * n_kv_heads * d_head * bytes_per_value * n_tokens * batch
