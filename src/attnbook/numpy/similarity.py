"""Dot products and cosine similarity (chapter 1).

Vectors are rows: a batch of n vectors of size d is an array of shape (n, d).
"""

from __future__ import annotations

from collections.abc import Sequence
from numbers import Integral

import numpy as np
from numpy.typing import ArrayLike

from attnbook._validate import (
    require_ndim,
    require_nonempty_last_dim,
    require_same_last_dim,
    require_same_shape,
    shape_str,
)
from attnbook.numpy._arrays import as_float as _as_float


def _norms(name: str, x: np.ndarray) -> np.ndarray:
    """Euclidean norms along the last axis; a zero vector has no direction, so it is an error."""
    norms = np.linalg.norm(x, axis=-1)
    if np.any(norms == 0):
        raise ValueError(
            f"{name} contains a zero vector; cosine similarity is undefined for it "
            "(a vector of length 0 has no direction)"
        )
    return norms


def _directions(name: str, x: np.ndarray) -> np.ndarray:
    """Each vector along the last axis scaled to length 1, computed without overflow or underflow.

    Dividing by the largest entry first keeps the squares in the norm finite (``1e155**2`` overflows
    float64, and float16 overflows above 65504); half precision is computed in float32.
    """
    work = x.astype(np.float32) if x.dtype == np.float16 else x
    top = np.max(np.abs(work), axis=-1, keepdims=True)
    if np.any(top == 0):
        _norms(name, np.zeros_like(work))  # raises: a zero vector has no direction
    scaled = work / top
    return scaled / _norms(name, scaled)[..., None]


def dot(u: ArrayLike, v: ArrayLike) -> np.ndarray:
    """Dot product along the last axis: ``sum_i u_i v_i``.

    Shapes: ``u`` and ``v`` are both ``(..., d)``; the result is ``(...)``.
    Chapter 1 derives it and its geometric form ``|u| |v| cos(theta)``.
    """
    u, v = _as_float("u", u), _as_float("v", v)
    require_same_shape(("u", "v"), u.shape, v.shape)
    require_nonempty_last_dim("u", u.shape)
    return np.sum(u * v, axis=-1)


def cosine_similarity(u: ArrayLike, v: ArrayLike) -> np.ndarray:
    """Cosine of the angle between ``u`` and ``v`` along the last axis, in [-1, 1].

    Shapes: ``u`` and ``v`` are both ``(..., d)``; the result is ``(...)``.
    Raises ``ValueError`` for a zero vector, whose direction is undefined. Chapter 1.
    """
    u, v = _as_float("u", u), _as_float("v", v)
    require_same_shape(("u", "v"), u.shape, v.shape)
    require_nonempty_last_dim("u", u.shape)
    cos = np.sum(_directions("u", u) * _directions("v", v), axis=-1)
    # Rounding can push |cos| a hair above 1; clip so arccos of the result is always defined.
    return np.clip(cos, -1.0, 1.0).astype(np.result_type(u, v), copy=False)


def pairwise_cosine_similarity(X: ArrayLike, Y: ArrayLike) -> np.ndarray:
    """Cosine similarity of every row of ``X`` with every row of ``Y``.

    Shapes: ``X`` is ``(n, d)``, ``Y`` is ``(m, d)``; the result ``S`` is ``(n, m)`` with
    ``S[i, j] = cos(X[i], Y[j])``. It is ``X_hat @ Y_hat.T`` for the row-normalised matrices,
    the same product ``Q @ K.T`` that attention scores are made of. Chapter 1.
    """
    X, Y = _as_float("X", X), _as_float("Y", Y)
    require_ndim("X", X.shape, 2, "(n, d): one vector per row")
    require_ndim("Y", Y.shape, 2, "(m, d): one vector per row")
    require_same_last_dim(("X", "Y"), X.shape, Y.shape)
    require_nonempty_last_dim("X", X.shape)
    X_hat, Y_hat = _directions("X", X), _directions("Y", Y)
    return np.clip(X_hat @ Y_hat.T, -1.0, 1.0).astype(np.result_type(X, Y), copy=False)


def nearest(
    query: ArrayLike,
    E: ArrayLike,
    k: int = 1,
    exclude: Sequence[int] = (),
) -> np.ndarray:
    """Indices of the ``k`` rows of ``E`` most cosine-similar to ``query``, best first.

    Shapes: ``query`` is ``(d,)``, ``E`` is ``(V, d)`` (one embedding per row); the result is
    ``(k,)``. Rows listed in ``exclude`` are never returned. Ties go to the lower index. Chapter 1.
    Refuses an ``exclude`` index outside ``[0, V)``: a negative one would silently mean a row from the end.
    """
    query, E = _as_float("query", query), _as_float("E", E)
    require_ndim("query", query.shape, 1, "(d,)")
    require_ndim("E", E.shape, 2, "(V, d): one embedding per row")
    require_same_last_dim(("query", "E"), query.shape, E.shape)
    bad = [i for i in exclude if isinstance(i, bool) or not isinstance(i, Integral) or not 0 <= i < E.shape[0]]
    if bad:
        raise ValueError(f"exclude must list row indices of E, integers in [0, {E.shape[0] - 1}]; got {bad}")
    available = E.shape[0] - len(set(exclude))
    if not 1 <= k <= available:
        raise ValueError(f"k must be between 1 and {available} (rows not excluded); got k={k}")
    sims = pairwise_cosine_similarity(query[None, :], E)[0]
    sims[list(exclude)] = -np.inf
    # A stable sort keeps ties in index order, so the answer does not depend on the platform.
    return np.argsort(-sims, kind="stable")[:k]


def analogy(a: str, b: str, c: str, E: ArrayLike, words: Sequence[str]) -> str:
    """Answer "``a`` is to ``b`` as ``c`` is to ?" by vector arithmetic.

    Returns the word whose embedding is most cosine-similar to ``E[b] - E[a] + E[c]``, leaving out
    ``a``, ``b`` and ``c`` themselves. Shapes: ``E`` is ``(V, d)`` with row ``i`` the embedding of
    ``words[i]``. Chapter 1 (king - man + woman).
    """
    E = _as_float("E", E)
    require_ndim("E", E.shape, 2, "(V, d): one embedding per row")
    if len(words) != E.shape[0]:
        raise ValueError(
            f"words must name every row of E: E has shape {shape_str(E.shape)} "
            f"but {len(words)} words were given"
        )
    index = {w: i for i, w in enumerate(words)}
    for w in (a, b, c):
        if w not in index:
            raise ValueError(f"{w!r} is not in the vocabulary")
    target = E[index[b]] - E[index[a]] + E[index[c]]
    best = nearest(target, E, k=1, exclude=[index[a], index[b], index[c]])[0]
    return words[best]
