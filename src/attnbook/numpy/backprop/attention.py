"""The backward pass of scaled dot-product attention with a mask (chapter 19).

Forward, row convention: ``S = Q K^T * c``, ``P = softmax(S)`` over the keys (masked scores get weight 0),
``O = P V``. Backward, given ``dO``: ``dV = P^T dO``, ``dP = dO V^T``, ``dS = P * (dP - rowsum(dP * P))``,
``dQ = c dS K``, ``dK = c dS^T Q``.
"""

from __future__ import annotations

import math

import numpy as np

from attnbook.numpy.attention import scaled_dot_product_attention
from attnbook.numpy.backprop.softmax import softmax_backward


def attention_forward(Q: np.ndarray, K: np.ndarray, V: np.ndarray, mask: np.ndarray | None = None,
                      scale: float | None = None) -> tuple[np.ndarray, dict]:
    """``softmax(Q K^T * scale) V`` as in ``attnbook.numpy.scaled_dot_product_attention``, plus a cache.

    Shapes: ``Q`` ``(..., T_q, d_k)``, ``K`` ``(..., T_k, d_k)``, ``V`` ``(..., T_k, d_v)``; ``mask``
    boolean, broadcastable to ``(..., T_q, T_k)``, True where allowed. Returns ``(O, cache)`` with ``O``
    ``(..., T_q, d_v)``. The cache keeps ``Q``, ``K``, ``V`` and the weights ``P`` ``(..., T_q, T_k)``:
    the one activation whose size grows with ``T^2``. The mask need not be kept: masked weights are 0,
    and the softmax's backward gives them gradient 0 by itself.
    """
    scale = 1.0 / math.sqrt(Q.shape[-1]) if scale is None else scale
    out, P = scaled_dot_product_attention(Q, K, V, mask=mask, scale=scale)
    return out, {"Q": Q, "K": K, "V": V, "P": P, "scale": scale}


def attention_backward(dO: np.ndarray, cache: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Gradients ``(dQ, dK, dV)`` of the shapes of ``Q``, ``K``, ``V``, given ``dO`` ``(..., T_q, d_v)``."""
    Q, K, V, P, c = cache["Q"], cache["K"], cache["V"], cache["P"], cache["scale"]
    dV = np.swapaxes(P, -1, -2) @ dO  # (..., T_k, d_v): each value is used by every query, weighted by P
    dP = dO @ np.swapaxes(V, -1, -2)  # (..., T_q, T_k)
    dS = softmax_backward(dP, P)  # (..., T_q, T_k); zero wherever the mask forbade attention
    dQ = (dS @ K) * c  # (..., T_q, d_k)
    dK = (np.swapaxes(dS, -1, -2) @ Q) * c  # (..., T_k, d_k)
    return dQ, dK, dV
