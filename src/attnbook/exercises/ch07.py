"""Checkers for the coding exercises of chapter 7 (scoring functions)."""

from __future__ import annotations

import numpy as np

from attnbook.exercises._harness import Case, Checker, Mistake
from attnbook.numpy import BilinearScore, LocalScore


def _bilinear_cases() -> list[Case]:
    rng = np.random.default_rng(701)
    cases = [Case("Q=[[1, 0]], K=[[0, 1], [1, 1]], W=[[0, 1], [0, 0]]",
                  (np.array([[1.0, 0.0]]), np.array([[0.0, 1.0], [1.0, 1.0]]), np.array([[0.0, 1.0], [0.0, 0.0]])))]
    for T_q, T_k, d_q, d_k in ((3, 4, 2, 2), (2, 5, 3, 6), (4, 1, 5, 2)):
        Q, K, W = rng.normal(size=(T_q, d_q)), rng.normal(size=(T_k, d_k)), rng.normal(size=(d_q, d_k))
        cases.append(Case(f"Q ({T_q}, {d_q}), K ({T_k}, {d_k}), W ({d_q}, {d_k})", (Q, K, W)))
    return cases


def _bilinear(Q, K, W) -> np.ndarray:
    return BilinearScore(W)(Q, K)


def _w_transposed(Q, K, W) -> np.ndarray:
    return Q @ W.T @ K.T


def _result_transposed(Q, K, W) -> np.ndarray:
    return (Q @ W @ K.T).T


check_bilinear_score = Checker(
    name="bilinear_score",
    doc="Check ``fn(Q, K, W) -> (T_q, T_k)``: the multiplicative score ``Q W K^T``.",
    reference=_bilinear,
    cases=_bilinear_cases(),
    mistakes=(
        Mistake(_w_transposed, "the score is q W k^T: W multiplies the query from the right, untransposed."),
        Mistake(_result_transposed, "rows are queries and columns are keys: the result has shape (T_q, T_k)."),
    ),
)


def _local(T: int, window: int) -> np.ndarray:
    return np.isfinite(LocalScore(window)(np.ones((T, 1)), np.ones((T, 1))))


def _strict(T: int, window: int) -> np.ndarray:
    i, j = np.indices((T, T))
    return np.abs(i - j) < window


def _one_sided(T: int, window: int) -> np.ndarray:
    i, j = np.indices((T, T))
    return (j <= i) & (i - j <= window)


check_local_mask = Checker(
    name="local_mask",
    doc="Check ``fn(T, window) -> (T, T)`` booleans: True where ``|i - j| <= window``.",
    reference=_local,
    cases=[Case(f"T={T}, window={w}", (T, w)) for T, w in ((4, 1), (6, 2), (3, 0), (5, 10))],
    mistakes=(
        Mistake(_strict, "keys at distance exactly `window` are inside the window: use <=, not <."),
        Mistake(_one_sided, "a local window looks both ways, at keys before and after the query."),
    ),
)
