"""Copying weights between attnbook's NumPy layers and ``torch.nn`` modules (used by tests and chapters).

PyTorch stores linear weights in the column convention, shape ``(out, in)``; attnbook keeps them in
the row convention, ``(in, out)``. Every copy therefore transposes.
"""

from __future__ import annotations

import numpy as np

from attnbook.numpy.multihead import MultiHeadParams


def multihead_params_from_torch(mha) -> MultiHeadParams:
    """The weights of a ``torch.nn.MultiheadAttention`` as ``MultiHeadParams`` (float64 NumPy arrays)."""

    def t(x) -> np.ndarray:
        return x.detach().cpu().double().numpy().copy()

    E = mha.embed_dim
    if mha.in_proj_weight is not None:
        W_q, W_k, W_v = (t(w).T for w in mha.in_proj_weight.split(E, dim=0))
    else:
        W_q, W_k, W_v = t(mha.q_proj_weight).T, t(mha.k_proj_weight).T, t(mha.v_proj_weight).T
    if mha.in_proj_bias is not None:
        b_q, b_k, b_v = (t(b) for b in mha.in_proj_bias.split(E))
    else:
        b_q = b_k = b_v = np.zeros(E)
    b_o = t(mha.out_proj.bias) if mha.out_proj.bias is not None else np.zeros(E)
    return MultiHeadParams(W_q, b_q, W_k, b_k, W_v, b_v, t(mha.out_proj.weight).T, b_o)
