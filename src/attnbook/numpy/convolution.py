"""A 1-D convolution rebuilt as multi-head attention with fixed positional weights (chapter 10).

Head ``h`` attends with weight 1 to the single key at offset ``o_h`` from the query and 0 elsewhere;
its value projection holds the kernel's weights for that offset; summing the heads gives the
convolution. Attention can express convolution; what it adds is weights that depend on the input.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from attnbook._validate import shape_str
from attnbook.numpy._arrays import as_float


def offset_attention_weights(T: int, offsets: list[int]) -> np.ndarray:
    """One-hot attention patterns, one per head: query ``i`` looks at key ``i + offset``.

    Shape ``(h, T, T)`` with ``h = len(offsets)``. Near the edges a query's key may not exist; its row
    is all zeros, which acts as zero padding.
    """
    A = np.zeros((len(offsets), T, T))
    for h, o in enumerate(offsets):
        for i in range(T):
            if 0 <= i + o < T:
                A[h, i, i + o] = 1.0
    return A


def conv1d_as_attention(x: ArrayLike, kernel: ArrayLike) -> np.ndarray:
    """Cross-correlation with zero 'same' padding, computed as multi-head attention.

    Shapes: ``x`` ``(T, C_in)``; ``kernel`` ``(C_out, C_in, k)`` in the layout of
    ``torch.nn.functional.conv1d``, with ``k`` odd. Returns ``(T, C_out)``, equal to
    ``conv1d(x.T[None], kernel, padding=k // 2)[0].T``.
    """
    x, kernel = as_float("x", x), as_float("kernel", kernel)
    if x.ndim != 2:
        raise ValueError(f"x must have shape (T, C_in); got {shape_str(x.shape)}")
    if kernel.ndim != 3 or kernel.shape[1] != x.shape[1] or kernel.shape[2] % 2 == 0:
        raise ValueError(f"kernel must have shape (C_out, C_in={x.shape[1]}, k) with k odd; "
                         f"got {shape_str(kernel.shape)}")
    k = kernel.shape[2]
    offsets = list(range(-(k // 2), k // 2 + 1))
    A = offset_attention_weights(x.shape[0], offsets)  # (h, T, T): fixed, input-independent weights
    W_v = np.transpose(kernel, (2, 1, 0))  # (h, C_in, C_out): head h's value projection
    heads = A @ (x @ W_v)  # (h, T, C_out)
    return heads.sum(axis=0)  # the output projection: add the heads
