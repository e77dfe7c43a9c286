"""Checkers for the coding exercises of chapter 3 (attention as a soft dictionary)."""

from __future__ import annotations

import numpy as np

from attnbook.data import grades_and_salaries
from attnbook.exercises._harness import Case, Checker, Mistake
from attnbook.numpy import scaled_dot_product_attention, soft_lookup, softmax
from attnbook.numpy.scoring import attention_with

# --- attention by distance, with one matrix product ----------------------------------------------------


def _distance_cases() -> list[Case]:
    rng = np.random.default_rng(301)
    K = np.array([[1.0, 0.0], [0.0, 2.0], [3.0, 3.0]])
    V = np.array([[10.0, 0.0], [0.0, 10.0], [5.0, 5.0]])
    cases = [
        Case("Q=[[1, 1]], keys [[1, 0], [0, 2], [3, 3]] of different lengths", (np.array([[1.0, 1.0]]), K, V)),
        Case("Q=[[0, 0], [2, 2]], the same keys", (np.array([[0.0, 0.0], [2.0, 2.0]]), K, V)),
        # A query far from every key: every score is below -10000, and exp of each underflows to 0
        # unless the softmax first subtracts the largest.
        Case("Q=[[100, -100]], the same keys", (np.array([[100.0, -100.0]]), K, V)),
        # Far out along the keys: 2 q . k reaches 4800, and exp of it overflows unless shifted first.
        Case("Q=[[400, 400]], the same keys", (np.array([[400.0, 400.0]]), K, V)),
    ]
    for m, n, d, d_v in ((4, 5, 3, 2), (1, 7, 6, 1), (3, 2, 4, 5)):
        lengths = np.exp(rng.uniform(-1.0, 1.0, size=(n, 1)))
        Q, K, V = rng.normal(size=(m, d)), lengths * rng.normal(size=(n, d)), rng.normal(size=(n, d_v))
        cases.append(Case(f"random Q ({m}, {d}), keys of different lengths ({n}, {d}), V ({n}, {d_v})", (Q, K, V)))
    return cases


def _distance_attention(Q: np.ndarray, K: np.ndarray, V: np.ndarray) -> np.ndarray:
    # Every difference q - k as an (m, n, d) array: the direct route the exercise avoids.
    return softmax(-np.sum((Q[:, None, :] - K[None, :, :]) ** 2, axis=-1), axis=1) @ V


def _dot_only(Q, K, V) -> np.ndarray:
    return softmax(2 * Q @ K.T, axis=1) @ V


def _cross_term_once(Q, K, V) -> np.ndarray:
    return softmax(Q @ K.T - np.sum(K**2, axis=1), axis=1) @ V


def _key_length_added(Q, K, V) -> np.ndarray:
    return softmax(2 * Q @ K.T + np.sum(K**2, axis=1), axis=1) @ V


def _unshifted_weights(scores: np.ndarray) -> np.ndarray:
    """A softmax of each row without the shift by its maximum: the typical unstable one."""
    e = np.exp(scores)
    return e / e.sum(axis=1, keepdims=True)


def _unshifted(Q, K, V) -> np.ndarray:
    return _unshifted_weights(-np.sum(Q**2, axis=1, keepdims=True) + 2 * Q @ K.T - np.sum(K**2, axis=1)) @ V


check_distance_attention = Checker(
    name="distance_attention",
    doc="Check ``fn(Q, K, V) -> (m, d_v)``: attention with the similarity ``-|q - k|^2`` for every query row "
        "of ``Q`` (m, d) over the key rows of ``K`` (n, d) and value rows of ``V`` (n, d_v).",
    reference=_distance_attention,
    cases=_distance_cases(),
    mistakes=(
        Mistake(_dot_only, "for keys of different lengths the distance is not the dot product: each key's "
                "squared length stays in its score."),
        Mistake(_cross_term_once, "expand (q - k) . (q - k) again: the cross term q . k appears twice."),
        Mistake(_key_length_added, "a longer key is further from the query: its squared length lowers the score."),
        Mistake(_unshifted, "far from every key, exp of each score underflows to 0 and 0/0 is NaN: subtract "
                "each row's largest score before exp."),
    ),
    forbidden=(scaled_dot_product_attention, attention_with, soft_lookup),
)


# --- leave-one-out predictions -----------------------------------------------------------------------

def _loo_cases() -> list[Case]:
    rng = np.random.default_rng(302)
    grades, salaries = grades_and_salaries()
    keys, values = np.array([1.0, 2.0, 3.0]), np.array([10.0, 20.0, 40.0])
    cases = [
        Case("keys=[1, 2, 3], values=[10, 20, 40], sharpness=1", (keys, values, 1.0)),
        Case("keys=[1, 2, 3], values=[10, 20, 40], sharpness=0", (keys, values, 0.0)),
        Case("the grades and salaries, sharpness=10", (grades, salaries, 10.0)),
        # Two pairs under the same key: leaving out pair 0 must keep pair 1, whose key is equal.
        Case("keys=[1, 1, 2, 4], values=[0, 10, 20, 30], sharpness=2",
             (np.array([1.0, 1.0, 2.0, 4.0]), np.array([0.0, 10.0, 20.0, 30.0]), 2.0)),
        # Keys 10 apart: every score is -10000 or below, and exp of each underflows to 0 unless shifted.
        Case("keys=[0, 10, 20], values=[1, 2, 3], sharpness=100",
             (np.array([0.0, 10.0, 20.0]), np.array([1.0, 2.0, 3.0]), 100.0)),
    ]
    x = np.sort(rng.uniform(0.0, 6.0, size=12))
    cases.append(Case("12 random keys, noisy sine values, sharpness=3", (x, np.sin(x) + rng.normal(size=12), 3.0)))
    return cases


def _loo_predictions(keys: np.ndarray, values: np.ndarray, sharpness: float) -> np.ndarray:
    # One soft lookup per pair, on the table without that pair: the slow route the exercise avoids.
    n = len(keys)
    return np.array([soft_lookup(keys[i:i + 1], np.delete(keys, i), np.delete(values, i), sharpness=sharpness)[0][0]
                     for i in range(n)])


def _scores(keys, sharpness) -> np.ndarray:
    return -sharpness * (keys[:, None] - keys[None, :]) ** 2


def _with_itself(keys, values, sharpness) -> np.ndarray:
    return softmax(_scores(keys, sharpness), axis=1) @ values


def _zeroed_after_softmax(keys, values, sharpness) -> np.ndarray:
    W = softmax(_scores(keys, sharpness), axis=1)
    np.fill_diagonal(W, 0.0)
    return W @ values


def _loo_unshifted(keys, values, sharpness) -> np.ndarray:
    S = _scores(keys, sharpness)
    np.fill_diagonal(S, -np.inf)
    return _unshifted_weights(S) @ values


check_loo_predictions = Checker(
    name="loo_predictions",
    doc="Check ``fn(keys, values, sharpness) -> (n,)``: entry ``i`` is the soft lookup of ``keys[i]`` in the "
        "table without pair ``i``, with similarity ``-sharpness (q - k)^2``.",
    reference=_loo_predictions,
    cases=_loo_cases(),
    mistakes=(
        Mistake(_with_itself, "leave each pair out of its own prediction: with it, the value mostly predicts itself."),
        Mistake(_zeroed_after_softmax, "a weight set to 0 after the softmax leaves the others summing to less "
                "than 1: rule the pair out before the softmax."),
        Mistake(_loo_unshifted, "far from every other key, exp of each score underflows to 0 and 0/0 is NaN: "
                "subtract each row's largest score before exp."),
    ),
    forbidden=(soft_lookup,),
)
