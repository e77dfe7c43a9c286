"""Chapter 4's checkers: answers written another way pass, an answer that calls the package's attention is
refused by name, and wrong answers a learner writes beyond the listed mistakes are refused."""

import numpy as np
import torch

import attnbook.numpy as anp
from attnbook.exercises import check_attend_to_others, check_takeover_factor


def loop_attend_to_others(X):
    """One query at a time, over the other tokens only, with a stable softmax."""
    T = len(X)
    Y = np.zeros_like(X)
    for i in range(T):
        others = [j for j in range(T) if j != i]
        s = np.array([X[i] @ X[j] for j in others])
        w = np.exp(s - s.max())
        Y[i] = (w / w.sum()) @ X[others]
    return Y


def bisection_takeover(X, i, j):
    """The stretch found by search: the favourite of query i, recomputed for trial factors."""
    if X[i] @ X[j] <= 0:
        return float("inf")

    def wins(f):
        Xs = X.copy()
        Xs[j] *= f
        return int(np.argmax(Xs @ Xs[i])) == j

    lo, hi = 0.0, 1.0
    while not wins(hi):
        hi *= 2
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if wins(mid) else (mid, hi)
    return hi


def test_answers_written_another_way_pass():
    assert check_attend_to_others(loop_attend_to_others)
    assert check_takeover_factor(bisection_takeover), check_takeover_factor(bisection_takeover).message


def test_attend_to_others_agrees_with_torch():
    X = np.random.default_rng(0).normal(size=(5, 3))
    Xt = torch.tensor(X)
    expected = torch.nn.functional.scaled_dot_product_attention(
        Xt, Xt, Xt, attn_mask=~torch.eye(5, dtype=torch.bool), scale=1.0).numpy()
    assert np.allclose(check_attend_to_others.reference(X), expected)


# --- an answer that calls the package is refused by name -------------------------------------------

def test_attend_to_others_through_the_package_is_refused_by_name():
    def delegating(X):
        return anp.scaled_dot_product_attention(X, X, X, mask=~np.eye(len(X), dtype=bool), scale=1.0)[0]

    verdict = check_attend_to_others(delegating)
    assert not verdict and "attnbook.numpy.attention.scaled_dot_product_attention" in verdict.message


def test_takeover_factor_has_no_package_function_to_forbid():
    # The package has no function that answers this exercise: its checker forbids nothing, and an answer
    # that searches with the package's attention (as the learner may) is accepted.
    def search_with_package(X, i, j):
        if X[i] @ X[j] <= 0:
            return float("inf")
        lo, hi = 0.0, 64.0
        for _ in range(200):
            mid = (lo + hi) / 2
            Xs = X.copy()
            Xs[j] *= mid
            w = anp.scaled_dot_product_attention(Xs[i:i + 1], Xs, Xs, scale=1.0)[1][0]
            lo, hi = (lo, mid) if int(np.argmax(w)) == j else (mid, hi)
        return hi

    assert not check_takeover_factor.forbidden  # no function of the package answers it; the policy still applies
    verdict = check_takeover_factor(search_with_package)
    assert not verdict and "scaled_dot_product_attention" in verdict.message
    assert "from the book's own package" in verdict.message


# --- wrong answers a learner writes, beyond the listed mistakes -------------------------------------

def test_attend_to_others_that_drops_the_diagonal_of_x_is_refused():
    # Removing the token from the values but not from the scores: its weight goes nowhere.
    def values_only(X):
        W = anp.softmax(X @ X.T, axis=1)
        return W @ X - np.diag(W)[:, None] * X

    verdict = check_attend_to_others(values_only)
    assert not verdict and "wrong value" in verdict.message


def test_takeover_factor_by_cosine_is_refused():
    def by_cosine(X, i, j):
        unit = X / np.linalg.norm(X, axis=1, keepdims=True)
        c = unit @ unit[i]
        return float("inf") if c[j] <= 0 else float(np.delete(c, j).max() / c[j])

    verdict = check_takeover_factor(by_cosine)
    assert not verdict and "wrong value" in verdict.message


def test_takeover_factor_that_lets_a_perpendicular_key_win_is_refused():
    # x_i . x_j = 0: stretching x_j leaves its score at 0, below query i's score on itself, so no factor
    # makes key j the favourite. A search that rules out only negative scores returns the top of its range.
    def search_from_negative_only(X, i, j):
        if X[i] @ X[j] < 0:
            return float("inf")
        lo, hi = 0.0, 64.0
        for _ in range(200):
            mid = (lo + hi) / 2
            Xs = X.copy()
            Xs[j] *= mid
            lo, hi = (lo, mid) if int(np.argmax(Xs @ Xs[i])) == j else (mid, hi)
        return hi

    X = np.array([[1.0, 0.0], [0.0, 1.0], [2.0, 1.0]])
    assert X[0] @ X[1] == 0 and check_takeover_factor.reference(X, 0, 1) == float("inf")
    assert search_from_negative_only(X, 0, 1) == 64.0
    verdict = check_takeover_factor(search_from_negative_only)
    assert not verdict and "wrong value" in verdict.message and "x_0 . x_1 = 0" in verdict.message
