"""The backward pass of multi-head attention (chapter 19; forward in chapter 9).

Four linear layers around ``h`` attentions that run side by side. ``split_heads`` and ``merge_heads`` only
move numbers, so their backward passes are each other: the gradient is moved back the same way.
"""

from __future__ import annotations

import numpy as np

from attnbook._validate import check_mha_shapes
from attnbook.numpy._arrays import head_mask
from attnbook.numpy.backprop.attention import attention_backward, attention_forward
from attnbook.numpy.backprop.linear import linear_backward, linear_forward
from attnbook.numpy.multihead import MultiHeadParams, merge_heads, split_heads


def mha_forward(X_q: np.ndarray, X_kv: np.ndarray, params: MultiHeadParams, n_heads: int,
                mask: np.ndarray | None = None) -> tuple[np.ndarray, dict]:
    """``attnbook.numpy.multi_head_attention`` with a cache; returns ``(output, cache)``.

    Shapes: ``X_q`` ``(..., T_q, d_q)``, ``X_kv`` ``(..., T_k, d_kv)`` (the same array for self-attention);
    ``mask`` boolean, broadcastable to ``(..., T_q, T_k)``, shared by the heads. Output ``(..., T_q, d_model)``.
    The cache holds the inputs of the four projections, and the attention's ``Q``, ``K``, ``V`` and weights.
    """
    check_mha_shapes(X_q.shape, X_kv.shape, params.W_q.shape, params.W_k.shape, params.d_model, n_heads)
    if mask is not None:
        mask = head_mask(mask, X_q.shape[:-1] + (X_kv.shape[-2],))  # (..., 1, T_q, T_k)
    q, cq = linear_forward(X_q, params.W_q, params.b_q)
    k, ck = linear_forward(X_kv, params.W_k, params.b_k)
    v, cv = linear_forward(X_kv, params.W_v, params.b_v)
    Q, K, V = (split_heads(a, n_heads) for a in (q, k, v))  # (..., h, T, d_head)
    heads, ca = attention_forward(Q, K, V, mask=mask)  # (..., h, T_q, d_head)
    out, co = linear_forward(merge_heads(heads), params.W_o, params.b_o)  # (..., T_q, d_model)
    return out, {"q": cq, "k": ck, "v": cv, "attn": ca, "o": co, "n_heads": n_heads}


def mha_backward(dout: np.ndarray, cache: dict) -> tuple[np.ndarray, np.ndarray, MultiHeadParams]:
    """Gradients ``(dX_q, dX_kv, grads)`` given ``dout`` ``(..., T_q, d_model)``.

    ``grads`` is a ``MultiHeadParams`` of the weights' gradients. For self-attention ``X_q`` and ``X_kv`` are
    one array, and its gradient is ``dX_q + dX_kv``: a variable used twice collects both gradients.
    """
    h = cache["n_heads"]
    dmerged, dW_o, db_o = linear_backward(dout, cache["o"])
    dQ, dK, dV = attention_backward(split_heads(dmerged, h), cache["attn"])
    dX_q, dW_q, db_q = linear_backward(merge_heads(dQ), cache["q"])
    dX_k, dW_k, db_k = linear_backward(merge_heads(dK), cache["k"])
    dX_v, dW_v, db_v = linear_backward(merge_heads(dV), cache["v"])
    grads = MultiHeadParams(dW_q, db_q, dW_k, db_k, dW_v, db_v, dW_o, db_o)
    return dX_q, dX_k + dX_v, grads
