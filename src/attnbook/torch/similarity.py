"""Dot products and cosine similarity in PyTorch, twins of ``attnbook.numpy.similarity``."""

from __future__ import annotations

import torch

from attnbook._validate import (
    require_ndim,
    require_nonempty_last_dim,
    require_same_last_dim,
    require_same_shape,
)
from attnbook.torch._checks import as_float as _as_float


def _norms(name: str, x: torch.Tensor) -> torch.Tensor:
    """Euclidean norms along the last axis; a zero vector is an error, as in NumPy."""
    norms = torch.linalg.vector_norm(x, dim=-1)
    if bool((norms == 0).any()):
        raise ValueError(
            f"{name} contains a zero vector; cosine similarity is undefined for it "
            "(a vector of length 0 has no direction)"
        )
    return norms


def _directions(name: str, x: torch.Tensor) -> torch.Tensor:
    """Each vector scaled to length 1 without overflow: divide by the largest entry before the norm
    (float16 and bfloat16 are computed in float32), as in the NumPy twin."""
    work = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
    top = work.abs().amax(dim=-1, keepdim=True)
    if bool((top == 0).any()):
        _norms(name, torch.zeros_like(work))  # raises: a zero vector has no direction
    scaled = work / top
    return scaled / _norms(name, scaled)[..., None]


def dot(u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Dot product along the last axis: ``sum_i u_i v_i``.

    Shapes: ``u`` and ``v`` are both ``(..., d)``; the result is ``(...)``. Chapter 1.
    """
    u, v = _as_float("u", u), _as_float("v", v)
    require_same_shape(("u", "v"), u.shape, v.shape)
    require_nonempty_last_dim("u", u.shape)
    return (u * v).sum(dim=-1)


def cosine_similarity(u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Cosine of the angle between ``u`` and ``v`` along the last axis, in [-1, 1].

    Shapes: ``u`` and ``v`` are both ``(..., d)``; the result is ``(...)``.
    Raises ``ValueError`` for a zero vector. Chapter 1.
    """
    u, v = _as_float("u", u), _as_float("v", v)
    require_same_shape(("u", "v"), u.shape, v.shape)
    require_nonempty_last_dim("u", u.shape)
    cos = (_directions("u", u) * _directions("v", v)).sum(dim=-1)
    return cos.clamp(-1.0, 1.0).to(torch.promote_types(u.dtype, v.dtype))


def pairwise_cosine_similarity(X: torch.Tensor, Y: torch.Tensor) -> torch.Tensor:
    """Cosine similarity of every row of ``X`` with every row of ``Y``.

    Shapes: ``X`` is ``(n, d)``, ``Y`` is ``(m, d)``; the result is ``(n, m)``. Chapter 1.
    """
    X, Y = _as_float("X", X), _as_float("Y", Y)
    require_ndim("X", X.shape, 2, "(n, d): one vector per row")
    require_ndim("Y", Y.shape, 2, "(m, d): one vector per row")
    require_same_last_dim(("X", "Y"), X.shape, Y.shape)
    require_nonempty_last_dim("X", X.shape)
    X_hat, Y_hat = _directions("X", X), _directions("Y", Y)
    return (X_hat @ Y_hat.T).clamp(-1.0, 1.0).to(torch.promote_types(X.dtype, Y.dtype))
