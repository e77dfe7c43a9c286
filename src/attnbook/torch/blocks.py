"""Encoder and decoder blocks (chapters 13 and 14), post-norm as in the original paper or pre-norm.

Post-norm: ``x = LN(x + sublayer(x))``. Pre-norm: ``x = x + sublayer(LN(x))``. The layouts match
``torch.nn.TransformerEncoderLayer`` and ``torch.nn.TransformerDecoderLayer`` with ``norm_first``.
Masks are boolean, True where attention is allowed.
"""

from __future__ import annotations

import torch
from torch import nn

from attnbook.torch.feedforward import FeedForward, SwiGLU
from attnbook.torch.kvcache import KVCache
from attnbook.torch.layernorm import LayerNorm
from attnbook.torch.multihead import MultiHeadAttention
from attnbook.torch.rmsnorm import make_norm


class EncoderBlock(nn.Module):
    """Self-attention then feed-forward, each with a residual connection and a layer norm.

    ``forward(x, mask=None)``: ``x`` ``(B, T, d_model)``; ``mask`` broadcastable to ``(B, T, T)``.
    """

    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.0, norm_first: bool = False,
                 activation: str = "relu", eps: float = 1e-5) -> None:
        super().__init__()
        self.norm_first = norm_first
        self.attn = MultiHeadAttention(d_model, n_heads, dropout=dropout)
        self.ff = FeedForward(d_model, d_ff, activation, dropout)
        self.norm1, self.norm2 = LayerNorm(d_model, eps), LayerNorm(d_model, eps)
        self.drop1, self.drop2 = nn.Dropout(dropout), nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None, causal: bool = False) -> torch.Tensor:
        if self.norm_first:
            h = self.norm1(x)
            x = x + self.drop1(self.attn(h, h, mask=mask, causal=causal)[0])
            return x + self.drop2(self.ff(self.norm2(x)))
        x = self.norm1(x + self.drop1(self.attn(x, x, mask=mask, causal=causal)[0]))
        return self.norm2(x + self.drop2(self.ff(x)))


class DecoderBlock(nn.Module):
    """Causal self-attention, cross-attention to the encoder's output, and feed-forward.

    With ``cross_attention=False`` it is the block of a decoder-only model (GPT). ``forward(x, memory=None,
    self_mask=None, memory_mask=None)``: ``x`` ``(B, T, d_model)``, ``memory`` ``(B, S, d_model)``;
    ``self_mask`` is combined with the causal mask; ``memory_mask`` broadcastable to ``(B, T, S)``.
    ``cache``, a ``KVCache``, keeps the self-attention's keys and values for generation (chapter 17).
    ``n_kv_heads`` (default: ``n_heads``, plain multi-head attention) gives the self-attention that many
    key-value heads, grouped-query attention (chapter 20). ``rotary=True`` gives the self-attention rotary
    positions (chapter 21), of base ``rope_base``. ``activation="swiglu"`` makes the feed-forward network a
    ``SwiGLU`` of hidden width ``d_ff``, and ``norm="rms"`` its norms ``RMSNorm`` (chapter 22).
    ``qk_norm=True`` normalises the self-attention's queries and keys (see ``MultiHeadAttention``).
    """

    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.0, norm_first: bool = False,
                 activation: str = "relu", eps: float = 1e-5, cross_attention: bool = True, bias: bool = True,
                 n_kv_heads: int | None = None, rotary: bool = False, norm: str = "layer",
                 qk_norm: bool = False, rope_base: float = 10000.0) -> None:
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout=dropout, bias=bias, n_kv_heads=n_kv_heads,
                                            rotary=rotary, qk_norm=qk_norm, rope_base=rope_base)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout=dropout, bias=bias) if cross_attention else None
        self.ff = (SwiGLU(d_model, d_ff, dropout, bias) if activation == "swiglu"
                   else FeedForward(d_model, d_ff, activation, dropout, bias))
        self.norm1, self.norm3 = make_norm(norm, d_model, eps, bias), make_norm(norm, d_model, eps, bias)
        self.norm2 = make_norm(norm, d_model, eps, bias) if cross_attention else None
        self.drop1, self.drop2, self.drop3 = nn.Dropout(dropout), nn.Dropout(dropout), nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, memory: torch.Tensor | None = None, self_mask: torch.Tensor | None = None,
                memory_mask: torch.Tensor | None = None, cache: KVCache | None = None) -> torch.Tensor:
        self._check_memory(memory)
        if self.norm_first:
            h = self.norm1(x)
            x = x + self.drop1(self.self_attn(h, mask=self_mask, causal=True, cache=cache)[0])
            if self.cross_attn is not None:
                x = x + self.drop2(self.cross_attn(self.norm2(x), memory, mask=memory_mask)[0])
            return x + self.drop3(self.ff(self.norm3(x)))
        x = self.norm1(x + self.drop1(self.self_attn(x, mask=self_mask, causal=True, cache=cache)[0]))
        if self.cross_attn is not None:
            x = self.norm2(x + self.drop2(self.cross_attn(x, memory, mask=memory_mask)[0]))
        return self.norm3(x + self.drop3(self.ff(x)))

    def _check_memory(self, memory: torch.Tensor | None) -> None:
        if (memory is None) != (self.cross_attn is None):
            raise ValueError("memory (the encoder output) is required exactly when the block has cross-attention")
