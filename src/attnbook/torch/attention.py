"""Scaled dot-product attention in PyTorch, twin of ``attnbook.numpy.scaled_dot_product_attention``."""

from __future__ import annotations

import math

import torch

from attnbook._validate import shape_str
from attnbook.torch._checks import as_mask, check_mask_fits
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
        if x.dim() < 2:
            raise ValueError(f"{name} must have shape (..., T, d) with at least 2 dimensions; got shape "
                             f"{shape_str(x.shape)}")
    if Q.shape[-1] != K.shape[-1]:
        raise ValueError(f"Q and K must have the same last dimension d_k; got Q {shape_str(Q.shape)} "
                         f"and K {shape_str(K.shape)}")
    if K.shape[-2] != V.shape[-2]:
        raise ValueError("K and V must have the same number of positions T_k (second-to-last axis); "
                         f"got K {shape_str(K.shape)} and V {shape_str(V.shape)}")
    if not Q.shape[:-2] == K.shape[:-2] == V.shape[:-2]:
        raise ValueError("Q, K and V must have the same batch dimensions (all but the last two); got "
                         f"Q {shape_str(Q.shape)}, K {shape_str(K.shape)} and V {shape_str(V.shape)}")
    scale = 1.0 / math.sqrt(Q.shape[-1]) if scale is None else scale
    scores = (Q @ K.transpose(-2, -1)) * scale  # (..., T_q, T_k)
    if mask is not None:
        mask = as_mask(mask).to(scores.device)
        check_mask_fits(mask, tuple(scores.shape))
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = softmax(scores, axis=-1)  # (..., T_q, T_k)
    return weights @ V, weights
