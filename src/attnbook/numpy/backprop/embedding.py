"""The backward pass of an embedding lookup: a scatter-add (chapter 19)."""

from __future__ import annotations

import numpy as np

from attnbook._validate import shape_str


def embedding_forward(ids: np.ndarray, E: np.ndarray) -> tuple[np.ndarray, dict]:
    """Rows of ``E`` ``(V, d)`` for integer ``ids`` of any shape ``(...)``; returns ``((..., d), cache)``.

    The cache keeps the ids and the table's shape; no activation.
    """
    ids = np.asarray(ids)
    if not np.issubdtype(ids.dtype, np.integer):
        raise ValueError(f"ids must be integers; got dtype {ids.dtype}")
    if ids.size and (ids.min() < 0 or ids.max() >= E.shape[0]):
        raise ValueError(f"ids must lie in [0, {E.shape[0] - 1}] for a table of shape {shape_str(E.shape)}; "
                         f"got values from {ids.min()} to {ids.max()}")
    return E[ids], {"ids": ids, "shape": E.shape}


def embedding_backward(dout: np.ndarray, cache: dict) -> np.ndarray:
    """``dE`` ``(V, d)``: row ``i`` is the sum of ``dout`` over every position holding id ``i``.

    ``np.add.at`` accumulates repeated ids; ``dE[ids] += dout`` would keep only one of them.
    """
    dE = np.zeros(cache["shape"], dtype=dout.dtype)
    np.add.at(dE, cache["ids"], dout)
    return dE
