"""Boolean attention masks, True where attention is allowed (chapter 8).

Shapes follow the scores they mask: ``(..., T_q, T_k)``. A padding mask has shape ``(B, 1, T_k)`` so
that it broadcasts over the queries.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from attnbook._validate import require_int, shape_str


def causal_mask(T_q: int, T_k: int | None = None) -> np.ndarray:
    """Query ``i`` may attend to keys ``j <= i``: the past and itself, never the future.

    Shapes: returns ``(T_q, T_k)`` (``T_k`` defaults to ``T_q``). When ``T_k > T_q`` the queries are
    taken to be the last ``T_q`` positions, so query ``i`` sees keys ``j <= i + T_k - T_q``. Refuses sizes
    that are not integers, at least 1.
    """
    T_k = T_q if T_k is None else T_k
    require_int("T_q", T_q)
    require_int("T_k", T_k)
    if T_q < 1 or T_k < 1:
        raise ValueError(f"causal_mask needs T_q >= 1 and T_k >= 1; got T_q={T_q}, T_k={T_k}")
    return np.tril(np.ones((T_q, T_k), dtype=bool), k=T_k - T_q)


def padding_mask(lengths: ArrayLike, T: int) -> np.ndarray:
    """Keys at positions ``>= lengths[b]`` are padding and may not be attended to.

    Shapes: ``lengths`` ``(B,)`` of integers in ``[0, T]``; returns ``(B, 1, T)``, which broadcasts
    against scores of shape ``(B, T_q, T)``. Refuses a ``T`` that is not an integer, 0 or more.
    """
    require_int("T", T, 0)
    lengths = np.asarray(lengths)
    if lengths.ndim != 1 or not np.issubdtype(lengths.dtype, np.integer):
        raise ValueError(f"lengths must be a 1-D array of integers; got shape {shape_str(lengths.shape)} "
                         f"and dtype {lengths.dtype}")
    if np.any(lengths < 0) or np.any(lengths > T):
        raise ValueError(f"every length must lie in [0, T={T}]; got {lengths.tolist()}")
    return (np.arange(T)[None, :] < lengths[:, None])[:, None, :]


def token_padding_mask(ids: ArrayLike, pad_id: int) -> np.ndarray:
    """Keys whose token is ``pad_id`` may not be attended to, wherever they stand.

    Shapes: ``ids`` ``(B, T)`` integer token ids; returns ``(B, 1, T)``, like ``padding_mask``, which it
    equals for sequences padded at the end.
    """
    ids = np.asarray(ids)
    if ids.ndim != 2:
        raise ValueError(f"ids must have shape (B, T); got shape {shape_str(ids.shape)}")
    return (ids != pad_id)[:, None, :]


def combine_masks(*masks: ArrayLike) -> np.ndarray:
    """Allowed only where every mask allows: the logical AND, broadcast to a common shape.

    Each mask must be boolean; shapes must broadcast together (for example a causal ``(T, T)`` with a
    padding ``(B, 1, T)`` gives ``(B, T, T)``).
    """
    if not masks:
        raise ValueError("combine_masks needs at least one mask")
    arrays = [np.asarray(m) for m in masks]
    for m in arrays:
        if m.dtype != bool:
            raise ValueError(f"masks must be boolean, True where attention is allowed; got dtype {m.dtype}")
    try:
        shape = np.broadcast_shapes(*(m.shape for m in arrays))
    except ValueError:
        raise ValueError("masks of shapes " + ", ".join(shape_str(m.shape) for m in arrays)
                         + " do not broadcast to one shape") from None
    return np.logical_and.reduce([np.broadcast_to(m, shape) for m in arrays])
