"""Scaled dot-product attention in PyTorch (chapters 5, 8 and 12), twin of ``attnbook.numpy.attention``.

Masks are boolean, True where attention is allowed.
"""

from __future__ import annotations

import math

import torch

from attnbook._validate import check_qkv_shapes, shape_str
from attnbook.torch._checks import as_float, as_mask, check_mask_fits, require_tensor
from attnbook.torch.softmax import softmax


def masked_softmax(scores: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Softmax over the last axis where ``mask`` is True; masked positions get weight 0.

    A row whose keys are all masked gets all-zero weights (it attends to nothing), so its output
    is the zero vector and no NaN reaches later layers. Shapes: ``scores`` ``(..., T_q, T_k)``;
    ``mask`` boolean (True where allowed), broadcastable to it; an additive mask of 0 and ``-inf`` is
    refused, since read as booleans it would mean the opposite.
    """
    require_tensor("scores", scores)
    scores = as_float("scores", scores)
    if scores.dim() < 1:
        raise ValueError(f"scores must have shape (..., T_q, T_k); got shape {shape_str(scores.shape)}")
    if mask is None:
        return softmax(scores, axis=-1)
    mask = as_mask(mask).to(scores.device)
    check_mask_fits(mask, tuple(scores.shape))
    return softmax(scores.masked_fill(~mask, float("-inf")), axis=-1)


def scaled_dot_product_attention(
    Q: torch.Tensor,
    K: torch.Tensor,
    V: torch.Tensor,
    mask: torch.Tensor | None = None,
    scale: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``softmax(Q K^T * scale) V``, the attention of every query to every key.

    Shapes: ``Q`` ``(..., T_q, d_k)``, ``K`` ``(..., T_k, d_k)``, ``V`` ``(..., T_k, d_v)``, with the
    same batch dimensions ``...``; ``mask`` boolean, broadcastable to ``(..., T_q, T_k)``, True where
    query i may attend to key j. ``scale`` defaults to ``1 / sqrt(d_k)`` (chapter 6).
    Returns ``(output, weights)`` of shapes ``(..., T_q, d_v)`` and ``(..., T_q, T_k)``; a query
    whose keys are all masked gets zero weights and a zero output.
    """
    Q, K, V = _checked_qkv(Q, K, V)
    scale = 1.0 / math.sqrt(Q.shape[-1]) if scale is None else scale
    scores = (Q @ K.transpose(-2, -1)) * scale  # (..., T_q, T_k)
    weights = masked_softmax(scores, mask)  # (..., T_q, T_k); checks the mask
    return weights @ V, weights  # (..., T_q, d_v), (..., T_q, T_k)


def _checked_qkv(Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``Q``, ``K`` and ``V`` as floating tensors, once their shapes are checked to fit together."""
    for name, x in (("Q", Q), ("K", K), ("V", V)):
        require_tensor(name, x)
    Q, K, V = as_float("Q", Q), as_float("K", K), as_float("V", V)
    check_qkv_shapes(tuple(Q.shape), tuple(K.shape), tuple(V.shape))
    return Q, K, V
