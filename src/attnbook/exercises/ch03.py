"""Checkers for the coding exercises of chapter 3 (attention as a soft dictionary)."""

from __future__ import annotations

import numpy as np

from attnbook.data import grades_and_salaries
from attnbook.exercises._harness import BudgetChecker, Case, Mistake
from attnbook.numpy import scaled_dot_product_attention, soft_lookup, softmax
from attnbook.numpy.scoring import attention_with

# --- attention by a weighted distance, with one matrix product --------------------------------------


def _distance_cases() -> list[Case]:
    rng = np.random.default_rng(301)
    grades, salaries = grades_and_salaries()
    K = np.array([[1.0, 0.0], [0.0, 2.0], [3.0, 3.0]])
    V = np.array([[10.0, 0.0], [0.0, 10.0], [5.0, 5.0]])
    cases = [
        Case("Q=[[1, 1]], keys [[1, 0], [0, 2], [3, 3]] of different lengths, lam=[1, 1]",
             (np.array([[1.0, 1.0]]), K, V, np.array([1.0, 1.0]))),
        Case("Q=[[0, 0], [2, 2]], the same keys, lam=[4, 0.5]",
             (np.array([[0.0, 0.0], [2.0, 2.0]]), K, V, np.array([4.0, 0.5]))),
        # A weight of 0: the second coordinate takes no part, so only the keys' first coordinates count.
        Case("Q=[[1, 5]], the same keys, lam=[2, 0]", (np.array([[1.0, 5.0]]), K, V, np.array([2.0, 0.0]))),
        # d = 1 with lam = [sharpness]: the chapter's soft lookup of salaries by GPA.
        Case("the grades and salaries as 1-D keys and values, queries [[2.5], [3.1]], lam=[10]",
             (np.array([[2.5], [3.1]]), grades[:, None], salaries[:, None], np.array([10.0]))),
        # A query far from every key: every score is below -10000, and exp of each underflows to 0
        # unless the softmax first subtracts the largest.
        Case("Q=[[100, -100]], keys [[1, 0], [0, 2], [3, 3]], lam=[1, 2]",
             (np.array([[100.0, -100.0]]), K, V, np.array([1.0, 2.0]))),
        # Far out along the keys: the cross terms reach thousands, and exp of them overflows unless shifted first.
        Case("Q=[[400, 400]], the same keys, lam=[1, 3]", (np.array([[400.0, 400.0]]), K, V, np.array([1.0, 3.0]))),
    ]
    for m, n, d, d_v in ((4, 5, 3, 2), (1, 7, 6, 1), (3, 2, 4, 5)):
        lengths = np.exp(rng.uniform(-1.0, 1.0, size=(n, 1)))
        Q, K, V = rng.normal(size=(m, d)), lengths * rng.normal(size=(n, d)), rng.normal(size=(n, d_v))
        lam = rng.uniform(0.1, 3.0, size=d)
        cases.append(Case(f"random Q ({m}, {d}), keys of different lengths ({n}, {d}), V ({n}, {d_v}), random lam",
                          (Q, K, V, lam)))
    return cases


def _weighted_distance_attention(Q: np.ndarray, K: np.ndarray, V: np.ndarray, lam: np.ndarray) -> np.ndarray:
    # Every difference q - k as an (m, n, d) array: the direct route the exercise avoids.
    return softmax(-np.sum(lam * (Q[:, None, :] - K[None, :, :]) ** 2, axis=-1), axis=1) @ V


def _dot_only(Q, K, V, lam) -> np.ndarray:
    return softmax(2 * (Q * lam) @ K.T, axis=1) @ V


def _cross_term_once(Q, K, V, lam) -> np.ndarray:
    return softmax((Q * lam) @ K.T - K**2 @ lam, axis=1) @ V


def _key_length_added(Q, K, V, lam) -> np.ndarray:
    return softmax(2 * (Q * lam) @ K.T + K**2 @ lam, axis=1) @ V


def _unweighted_key_length(Q, K, V, lam) -> np.ndarray:
    return softmax(2 * (Q * lam) @ K.T - np.sum(K**2, axis=1), axis=1) @ V


def _weights_squared(Q, K, V, lam) -> np.ndarray:
    Qw, Kw = Q * lam, K * lam  # both scaled by lam: each squared difference gets lam squared
    return softmax(2 * Qw @ Kw.T - np.sum(Kw**2, axis=1), axis=1) @ V


def _unshifted_weights(scores: np.ndarray) -> np.ndarray:
    """A softmax of each row without the shift by its maximum: the typical unstable one."""
    e = np.exp(scores)
    return e / e.sum(axis=1, keepdims=True)


def _unshifted(Q, K, V, lam) -> np.ndarray:
    return _unshifted_weights(-(Q**2 @ lam)[:, None] + 2 * (Q * lam) @ K.T - K**2 @ lam) @ V


def _distance_big_case() -> Case:
    rng = np.random.default_rng(304)
    Q, K = rng.normal(size=(400, 64)), rng.normal(size=(400, 64))
    return Case("400 queries and 400 keys of d=64, values of d=8", (Q, K, rng.normal(size=(400, 8)),
                                                                     rng.uniform(0.0, 2.0, size=64)))


check_weighted_distance_attention = BudgetChecker(
    name="weighted_distance_attention",
    allowed=(softmax,),  # the statement's "with the chapter's softmax"
    doc="Check ``fn(Q, K, V, lam) -> (m, d_v)``: attention with the similarity ``-sum_j lam_j (q_j - k_j)^2`` "
        "for every query row of ``Q`` (m, d) over the key rows of ``K`` (n, d) and value rows of ``V`` "
        "(n, d_v), with one weight ``lam_j >= 0`` per coordinate.",
    reference=_weighted_distance_attention,
    cases=_distance_cases(),
    mistakes=(
        Mistake(_dot_only, "for keys of different lengths the distance is not the dot product: each key's "
                "weighted squared length stays in its score."),
        Mistake(_cross_term_once, "expand lam_j (q_j - k_j)^2 again: the cross term lam_j q_j k_j appears twice."),
        Mistake(_key_length_added, "a longer key is further from the query: its weighted squared length lowers "
                "the score."),
        Mistake(_unweighted_key_length, "the key's squared length comes from the same weighted distance: weight "
                "each coordinate's k_j^2 by lam_j too."),
        Mistake(_weights_squared, "scaling q and k by lam weights each squared difference by lam squared: lam "
                "enters each term of the expansion once."),
        Mistake(_unshifted, "far from every key, exp of each score underflows to 0 and 0/0 is NaN: subtract "
                "each row's largest score before exp."),
    ),
    forbidden=(scaled_dot_product_attention, attention_with, soft_lookup),
    big_case=_distance_big_case(),
    budget_bytes=16 * 2**20,  # a (400, 400) array of scores is 1.2 MiB; the (400, 400, 64) differences 78 MiB
    budget_hint="it builds the (m, n, d) array of differences, which the statement rules out. Expand the square: "
                "q^2, -2 q k and k^2 each weighted by lam, two matrix products and two sums.",
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


def _every_equal_key_left_out(keys, values, sharpness) -> np.ndarray:
    S = _scores(keys, sharpness)
    S[keys[:, None] == keys[None, :]] = -np.inf  # every pair under the same key, not pair i alone
    return softmax(S, axis=1) @ values


def _loo_big_case() -> Case:
    rng = np.random.default_rng(305)
    x = np.sort(rng.uniform(0.0, 6.0, size=300))
    return Case("300 random keys, noisy sine values, sharpness=3", (x, np.sin(x) + rng.normal(size=300), 3.0))


def _loo_unshifted(keys, values, sharpness) -> np.ndarray:
    S = _scores(keys, sharpness)
    np.fill_diagonal(S, -np.inf)
    return _unshifted_weights(S) @ values


check_loo_predictions = BudgetChecker(
    name="loo_predictions",
    allowed=(softmax,),
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
        Mistake(_every_equal_key_left_out, "leave out pair i alone: another pair under an equal key stays in "
                "the table, so rule out the diagonal of the score matrix, not every entry whose keys are equal."),
    ),
    forbidden=(soft_lookup,),
    big_case=_loo_big_case(),
    calls_budget=60,  # a handful per array operation; a loop over the 300 pairs makes 300 at the least
    calls_hint="it loops over the pairs in Python, which the statement rules out. Build the (n, n) scores of "
               "every key against every key at once and rule out the diagonal before one softmax of the rows.",
)
