"""Checkers for the coding exercises of chapter 6 (why divide by sqrt(d))."""

from __future__ import annotations

import math

import numpy as np

from attnbook.exercises._harness import Case, Checker, Mistake
from attnbook.numpy import softmax, softmax_jacobian


def _jacobian_cases() -> list[Case]:
    rng = np.random.default_rng(601)
    cases = [
        Case("p=[0.5, 0.5]", (np.array([0.5, 0.5]),)),
        Case("p=[0.2, 0.3, 0.5]", (np.array([0.2, 0.3, 0.5]),)),
        Case("p=[0, 1, 0] (one-hot)", (np.array([0.0, 1.0, 0.0]),)),
        Case("p=[1] (a single option)", (np.array([1.0]),)),
    ]
    for n in (4, 9):
        cases.append(Case(f"p = softmax of {n} random scores", (softmax(rng.normal(size=n)),)))
    return cases


def _diag_only(p: np.ndarray) -> np.ndarray:
    return np.diag(p)


def _sign_flipped(p: np.ndarray) -> np.ndarray:
    return np.outer(p, p) - np.diag(p)


def _inner(p: np.ndarray) -> np.ndarray:
    return np.diag(p) - p @ p


check_softmax_jacobian = Checker(
    name="softmax_jacobian",
    doc="Check ``fn(p) -> (n, n)``: the Jacobian of the softmax at output ``p``.",
    reference=softmax_jacobian,
    cases=_jacobian_cases(),
    mistakes=(
        Mistake(_diag_only, "changing s_j moves every output, not only p_j: subtract the outer product p p^T."),
        Mistake(_sign_flipped, "the diagonal entries p_i (1 - p_i) are positive: it is diag(p) - p p^T."),
        Mistake(_inner, "p p^T is the outer product np.outer(p, p), a matrix; p @ p is a number."),
    ),
)


def _scale(d: int, a: float) -> float:
    return 3.0 / (a * a * math.sqrt(d))


def _plain(d: int, a: float) -> float:
    return 1.0 / math.sqrt(d)


def _std_of_entry(d: int, a: float) -> float:
    return math.sqrt(3.0) / (a * math.sqrt(d))


check_unit_variance_scale = Checker(
    name="unit_variance_scale",
    doc="Check ``fn(d, a) -> float``: the factor that gives ``x . y`` variance 1 for Uniform[-a, a] entries.",
    reference=_scale,
    cases=[Case(f"d={d}, a={a}", (d, a)) for d, a in ((1, 1.0), (64, 1.0), (64, 2.0), (512, 0.5), (3, math.sqrt(3)))],
    mistakes=(
        Mistake(_plain, "1/sqrt(d) is right only when each entry has variance 1; here it is a**2 / 3."),
        Mistake(_std_of_entry, "each product x_i y_i has variance (a**2/3)**2, the square of an entry's variance."),
    ),
)
