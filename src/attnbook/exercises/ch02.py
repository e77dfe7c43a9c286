"""Checkers for the coding exercises of chapter 2 (softmax)."""

from __future__ import annotations

import numpy as np

from attnbook.exercises._harness import Case, Checker, Mistake
from attnbook.numpy import softmax


def _score_cases() -> list[Case]:
    rng = np.random.default_rng(201)
    cases = [
        Case("x=[1, 2, 3]", (np.array([1.0, 2.0, 3.0]),)),
        Case("x=[0, 0, 0, 0]", (np.zeros(4),)),
        Case("x=[5] (a single score)", (np.array([5.0]),)),
        Case("x=[-2, 0.5, 4, -7]", (np.array([-2.0, 0.5, 4.0, -7.0]),)),
        Case("x=[1000, 1001, 1002]", (np.array([1000.0, 1001.0, 1002.0]),)),
        Case("x=[-1000, -1001, -1002]", (np.array([-1000.0, -1001.0, -1002.0]),)),
        # Scores far apart: only a shift by the maximum keeps every exp finite (shifting by the
        # minimum, or by nothing, overflows to inf and gives NaN).
        Case("x=[0, 1000]", (np.array([0.0, 1000.0]),)),
        Case("x=[-1000, 0, -2000]", (np.array([-1000.0, 0.0, -2000.0]),)),
    ]
    for n in (7, 50):
        cases.append(Case(f"random scores, n={n}", (rng.normal(scale=3.0, size=n),)))
    return cases


def _naive(x: np.ndarray) -> np.ndarray:
    return np.exp(x) / np.exp(x).sum()


def _min_shifted(x: np.ndarray) -> np.ndarray:
    return np.exp(x - x.min()) / np.exp(x - x.min()).sum()


def _unnormalised(x: np.ndarray) -> np.ndarray:
    return np.exp(x - x.max())


def _divide_by_sum(x: np.ndarray) -> np.ndarray:
    return x / x.sum()


check_softmax = Checker(
    name="softmax",
    doc="Check ``fn(x) -> weights``: a softmax of a 1-D array that never overflows.",
    reference=softmax,
    cases=_score_cases(),
    mistakes=(
        Mistake(_min_shifted, "shift by the maximum, not the minimum: x - x.max() is at most 0, so np.exp "
                "cannot overflow; x - x.min() can be huge."),
        Mistake(_naive, "np.exp overflows for scores above about 709; subtract x.max() first."),
        Mistake(_unnormalised, "the weights must sum to 1: divide by their sum."),
        Mistake(_divide_by_sum, "dividing scores by their sum is not the softmax; exponentiate first."),
    ),
)


def _logsumexp(x: np.ndarray) -> float:
    m = float(np.max(x))
    return m + float(np.log(np.sum(np.exp(x - m))))


def _naive_lse(x: np.ndarray) -> float:
    return float(np.log(np.sum(np.exp(x))))


def _min_lse(x: np.ndarray) -> float:
    m = float(np.min(x))
    return m + float(np.log(np.sum(np.exp(x - m))))


def _forgot_max(x: np.ndarray) -> float:
    return float(np.log(np.sum(np.exp(x - np.max(x)))))


check_logsumexp = Checker(
    name="logsumexp",
    doc="Check ``fn(x) -> float``: ``log(sum(exp(x)))`` of a 1-D array, without overflow.",
    reference=_logsumexp,
    cases=_score_cases(),
    mistakes=(
        Mistake(_min_lse, "factor out exp(max(x)), not exp(min(x)): only then is every exp at most 1."),
        Mistake(_naive_lse, "np.exp overflows for large x; factor out exp(max(x)) first."),
        Mistake(_forgot_max, "after subtracting m inside, add m back outside the logarithm."),
    ),
)
