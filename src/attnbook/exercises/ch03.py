"""Checkers for the coding exercises of chapter 3 (attention as a soft dictionary)."""

from __future__ import annotations

import numpy as np

from attnbook.data import grades_and_salaries
from attnbook.exercises._harness import Case, Checker, Mistake
from attnbook.numpy import scaled_dot_product_attention, soft_lookup, softmax


def _lookup_cases() -> list[Case]:
    grades, salaries = grades_and_salaries()
    keys, values = np.array([1.0, 2.0, 3.0]), np.array([10.0, 20.0, 40.0])
    cases = [
        Case("q=2, keys=[1, 2, 3], values=[10, 20, 40], sharpness=1", (2.0, keys, values, 1.0)),
        Case("q=2.5, keys=[1, 2, 3], values=[10, 20, 40], sharpness=4", (2.5, keys, values, 4.0)),
        Case("q=2, keys=[1, 2, 3], values=[10, 20, 40], sharpness=0", (2.0, keys, values, 0.0)),
        Case("q=3.5, the grades and salaries, sharpness=10", (3.5, grades, salaries, 10.0)),
        Case("q=3.0, the grades and salaries, sharpness=1000", (3.0, grades, salaries, 1000.0)),
        # Every key far from the query: each similarity is below -40000, exp of every one underflows to
        # 0, and only a softmax shifted by the maximum still finds the nearest key.
        Case("q=10, keys=[1, 2, 3], values=[10, 20, 40], sharpness=1000", (10.0, keys, values, 1000.0)),
    ]
    return cases


def _lookup(q, keys, values, sharpness) -> float:
    return float(soft_lookup(np.array([q]), keys, values, sharpness=sharpness)[0][0])


def _unnormalised(q, keys, values, sharpness) -> float:
    return float(np.exp(-sharpness * (q - keys) ** 2) @ values)


def _unshifted(q, keys, values, sharpness) -> float:
    e = np.exp(-sharpness * (q - keys) ** 2)
    return float(e @ values / e.sum())


def _wrong_sign(q, keys, values, sharpness) -> float:
    return float(softmax(sharpness * (q - keys) ** 2) @ values)


check_soft_lookup = Checker(
    name="soft_lookup",
    doc="Check ``fn(q, keys, values, sharpness) -> float``: a soft lookup for one numeric query.",
    reference=_lookup,
    cases=_lookup_cases(),
    mistakes=(
        Mistake(_unnormalised, "the weights must sum to 1: take a softmax of the similarities."),
        Mistake(_unshifted, "far from every key, exp of each similarity underflows to 0 and 0 / 0 is NaN: "
                "subtract the largest similarity first (a stable softmax)."),
        Mistake(_wrong_sign, "close keys must score high: the similarity is minus sharpness times (q - k)**2."),
    ),
)


def _vector_cases() -> list[Case]:
    rng = np.random.default_rng(301)
    K = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    V = np.array([[10.0, 0.0], [0.0, 10.0], [5.0, 5.0]])
    cases = [
        Case("q=[2, 0] against three keys in 2-D", (np.array([2.0, 0.0]), K, V)),
        # Scores of 1000: exp overflows unless the softmax subtracts the maximum score first.
        Case("q=[1000, 0] against three keys in 2-D", (np.array([1000.0, 0.0]), K, V)),
    ]
    for n, d_k, d_v in ((5, 4, 3), (8, 6, 1), (1, 3, 2)):
        q, K, V = rng.normal(size=d_k), rng.normal(size=(n, d_k)), rng.normal(size=(n, d_v))
        cases.append(Case(f"random q ({d_k},), K ({n}, {d_k}), V ({n}, {d_v})", (q, K, V)))
    return cases


def _attend(q, K, V) -> np.ndarray:
    return scaled_dot_product_attention(q[None, :], K, V, scale=1.0)[0][0]


def _raw_scores(q, K, V) -> np.ndarray:
    return (K @ q) @ V


def _keys_as_values(q, K, V) -> np.ndarray:
    return softmax(K @ q) @ K


check_attend = Checker(
    name="attend",
    doc="Check ``fn(q, K, V) -> (d_v,)``: ``softmax(K q)`` weights applied to the rows of ``V``.",
    reference=_attend,
    cases=_vector_cases(),
    mistakes=(
        Mistake(_raw_scores, "the dot products are scores; turn them into weights with a softmax."),
        Mistake(_keys_as_values, "mix the values V with the weights, not the keys."),
    ),
)
