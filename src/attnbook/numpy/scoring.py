"""Scoring functions: the ways to turn a query and a key into a score (chapter 7).

Every scorer takes queries ``Q`` of shape ``(T_q, d_q)`` and keys ``K`` of shape ``(T_k, d_k)`` and
returns scores of shape ``(T_q, T_k)``; ``attention_with`` turns any of them into attention. Each also
reports its parameter count and its cost in multiply-adds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike

from attnbook._validate import require_ndim, shape_str
from attnbook.numpy._arrays import as_float, as_mask
from attnbook.numpy.attention import masked_softmax


def _check_qk(Q: ArrayLike, K: ArrayLike, same_d: bool) -> tuple[np.ndarray, np.ndarray]:
    Q, K = as_float("Q", Q), as_float("K", K)
    require_ndim("Q", Q.shape, 2, "(T_q, d_q): one query per row")
    require_ndim("K", K.shape, 2, "(T_k, d_k): one key per row")
    if same_d and Q.shape[1] != K.shape[1]:
        raise ValueError(f"this score needs queries and keys of the same size d; "
                         f"got Q {shape_str(Q.shape)} and K {shape_str(K.shape)}")
    return Q, K


class DotScore:
    """``s(q, k) = q . k``: no parameters; queries and keys must have the same size."""

    name = "dot"

    def __call__(self, Q: ArrayLike, K: ArrayLike) -> np.ndarray:
        Q, K = _check_qk(Q, K, same_d=True)
        return Q @ K.T  # (T_q, T_k)

    def n_params(self) -> int:
        return 0

    def cost(self, T_q: int, T_k: int, d: int) -> int:
        return T_q * T_k * d


class ScaledDotScore(DotScore):
    """``s(q, k) = q . k / sqrt(d)``, the Transformer's choice (chapter 6)."""

    name = "scaled dot"

    def __call__(self, Q: ArrayLike, K: ArrayLike) -> np.ndarray:
        Q, K = _check_qk(Q, K, same_d=True)
        return Q @ K.T / math.sqrt(Q.shape[1])


@dataclass
class BilinearScore:
    """Multiplicative (Luong "general") score ``s(q, k) = q W k^T``; ``W`` has shape ``(d_q, d_k)``."""

    W: np.ndarray
    name: str = field(default="multiplicative", init=False)

    def __call__(self, Q: ArrayLike, K: ArrayLike) -> np.ndarray:
        Q, K = _check_qk(Q, K, same_d=False)
        if self.W.shape != (Q.shape[1], K.shape[1]):
            raise ValueError(f"W must have shape (d_q, d_k) = ({Q.shape[1]}, {K.shape[1]}); "
                             f"got {shape_str(self.W.shape)}")
        return Q @ self.W @ K.T

    def n_params(self) -> int:
        return self.W.size

    def cost(self, T_q: int, T_k: int, d: int) -> int:
        # Q W once (T_q d^2), then the products with the keys (T_q T_k d).
        return T_q * d * d + T_q * T_k * d


@dataclass
class AdditiveScore:
    """Additive (Bahdanau) score ``s(q, k) = v . tanh(q W_q + k W_k + b)``, a one-hidden-layer network.

    Shapes: ``W_q`` ``(d_q, d_h)``, ``W_k`` ``(d_k, d_h)``, ``b`` and ``v`` ``(d_h,)``.
    """

    W_q: np.ndarray
    W_k: np.ndarray
    b: np.ndarray
    v: np.ndarray
    name: str = field(default="additive", init=False)

    def __call__(self, Q: ArrayLike, K: ArrayLike) -> np.ndarray:
        Q, K = _check_qk(Q, K, same_d=False)
        hidden = np.tanh((Q @ self.W_q)[:, None, :] + (K @ self.W_k)[None, :, :] + self.b)  # (T_q, T_k, d_h)
        return hidden @ self.v  # (T_q, T_k)

    def n_params(self) -> int:
        return self.W_q.size + self.W_k.size + self.b.size + self.v.size

    def cost(self, T_q: int, T_k: int, d: int) -> int:
        d_h = self.v.shape[0]
        return (T_q + T_k) * d * d_h + T_q * T_k * d_h


@dataclass
class GatedScore:
    """Gated score ``s(q, k) = sigmoid([q; k] . w_g + b_g) * (q . k / sqrt(d))``.

    A learned gate in (0, 1) scales each dot-product score. Shapes: ``w_g`` ``(d_q + d_k,)``,
    ``b_g`` a number.
    """

    w_g: np.ndarray
    b_g: float = 0.0
    name: str = field(default="gated", init=False)

    def __call__(self, Q: ArrayLike, K: ArrayLike) -> np.ndarray:
        Q, K = _check_qk(Q, K, same_d=True)
        d = Q.shape[1]
        if self.w_g.shape != (2 * d,):
            raise ValueError(f"w_g must have shape (2 d,) = ({2 * d},); got {shape_str(self.w_g.shape)}")
        gate = 1.0 / (1.0 + np.exp(-((Q @ self.w_g[:d])[:, None] + (K @ self.w_g[d:])[None, :] + self.b_g)))
        return gate * (Q @ K.T) / math.sqrt(d)

    def n_params(self) -> int:
        return self.w_g.size + 1

    def cost(self, T_q: int, T_k: int, d: int) -> int:
        return T_q * T_k * d + (T_q + T_k) * d


@dataclass
class LocalScore:
    """Local (sparse window) attention: another score, kept only for keys with ``|i - j| <= window``.

    Scores outside the window are ``-inf``: after the softmax those keys get weight 0. Position ``i``
    of the queries is compared with position ``j`` of the keys.
    """

    window: int
    base: object = field(default_factory=ScaledDotScore)
    name: str = field(default="local (window)", init=False)

    def __call__(self, Q: ArrayLike, K: ArrayLike) -> np.ndarray:
        if self.window < 0:
            raise ValueError(f"window must be 0 or more; got {self.window}")
        scores = self.base(Q, K)
        i, j = np.arange(scores.shape[0])[:, None], np.arange(scores.shape[1])[None, :]
        return np.where(np.abs(i - j) <= self.window, scores, -np.inf)

    def n_params(self) -> int:
        return self.base.n_params()

    def cost(self, T_q: int, T_k: int, d: int) -> int:
        # Only the scores inside the window need computing.
        kept = sum(min(T_k - 1, i + self.window) - max(0, i - self.window) + 1 for i in range(T_q))
        return self.base.cost(T_q, T_k, d) * kept // (T_q * T_k)


def attention_with(scorer, Q: ArrayLike, K: ArrayLike, V: ArrayLike, mask: ArrayLike | None = None):
    """Attention with any scoring function: ``softmax(scorer(Q, K)) V``.

    Shapes: ``Q`` ``(T_q, d_q)``, ``K`` ``(T_k, d_k)``, ``V`` ``(T_k, d_v)``; ``mask`` boolean
    ``(T_q, T_k)``, True where allowed. Returns ``(output, weights)``: ``(T_q, d_v)``, ``(T_q, T_k)``.
    """
    V = as_float("V", V)
    scores = scorer(Q, K)
    if V.ndim != 2 or V.shape[0] != scores.shape[1]:
        raise ValueError(f"V must have shape (T_k, d_v) with T_k = {scores.shape[1]}; got {shape_str(V.shape)}")
    weights = masked_softmax(scores, None if mask is None else as_mask(mask))
    return weights @ V, weights
