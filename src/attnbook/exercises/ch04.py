"""Checkers for the coding exercises of chapter 4 (self-attention without parameters)."""

from __future__ import annotations

import numpy as np

from attnbook.exercises._harness import Case, Checker, Mistake
from attnbook.numpy import scaled_dot_product_attention, softmax


def _cases() -> list[Case]:
    rng = np.random.default_rng(401)
    X = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    cases = [Case("X=[[1, 0], [0, 1], [1, 1]]", (X,)), Case("X of one token, [[0.5, -2]]", (np.array([[0.5, -2.0]]),)),
             # Scores up to 1800: an unstable softmax overflows to inf and returns NaN.
             Case("X=[[30, 0], [0, 30], [30, 30]]", (30.0 * X,))]
    for T, d in ((4, 3), (7, 5), (2, 8)):
        cases.append(Case(f"random X of shape ({T}, {d})", (rng.normal(size=(T, d)),)))
    return cases


def _reference(X: np.ndarray) -> np.ndarray:
    return scaled_dot_product_attention(X, X, X, scale=1.0)[0]


def _columns(X: np.ndarray) -> np.ndarray:
    return softmax(X @ X.T, axis=0) @ X


def _no_softmax(X: np.ndarray) -> np.ndarray:
    return (X @ X.T) @ X


def _scaled(X: np.ndarray) -> np.ndarray:
    return scaled_dot_product_attention(X, X, X)[0]


check_self_attention = Checker(
    name="self_attention",
    doc="Check ``fn(X) -> Y``: parameter-free self-attention ``softmax(X X^T) X`` for ``X`` of shape (T, d).",
    reference=_reference,
    cases=_cases(),
    mistakes=(
        Mistake(_columns, "each row of weights (one query) must sum to 1: softmax along axis=1, not axis=0."),
        Mistake(_no_softmax, "X @ X.T are scores; turn each row into weights with a softmax first."),
        Mistake(_scaled, "this exercise uses the plain dot product, without dividing by sqrt(d)."),
    ),
)
