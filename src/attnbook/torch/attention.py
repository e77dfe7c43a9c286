"""Scaled dot-product attention in PyTorch, twin of ``attnbook.numpy.scaled_dot_product_attention``."""

from __future__ import annotations

import math

import torch

from attnbook._validate import check_qkv_shapes
from attnbook.torch._checks import as_mask, check_mask_fits, require_tensor
from attnbook.torch.softmax import softmax


def scaled_dot_product_attention(
    Q: torch.Tensor,
    K: torch.Tensor,
    V: torch.Tensor,
    mask: torch.Tensor | None = None,
    scale: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``softmax(Q K^T * scale) V``, returning the output and the weights.

    Shapes: ``Q`` ``(..., T_q, d_k)``, ``K`` ``(..., T_k, d_k)``, ``V`` ``(..., T_k, d_v)`` with equal
    batch dimensions; ``mask`` boolean, broadcastable to ``(..., T_q, T_k)``, True where allowed.
    ``scale`` defaults to ``1 / sqrt(d_k)``. Returns ``(..., T_q, d_v)`` and ``(..., T_q, T_k)``; a query
    with no allowed key gets zero weights and a zero output. Chapters 5, 8 and 12.
    """
    for name, x in (("Q", Q), ("K", K), ("V", V)):
        require_tensor(name, x)
    check_qkv_shapes(tuple(Q.shape), tuple(K.shape), tuple(V.shape))
    scale = 1.0 / math.sqrt(Q.shape[-1]) if scale is None else scale
    scores = (Q @ K.transpose(-2, -1)) * scale  # (..., T_q, T_k)
    if mask is not None:
        mask = as_mask(mask).to(scores.device)
        check_mask_fits(mask, tuple(scores.shape))
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = softmax(scores, axis=-1)  # (..., T_q, T_k)
    return weights @ V, weights
