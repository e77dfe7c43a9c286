"""Checkers for the coding exercises of chapter 4 (self-attention without parameters)."""

from __future__ import annotations

import numpy as np

from attnbook.data import toy_word_embeddings
from attnbook.exercises._harness import Case, Checker, Mistake
from attnbook.numpy import scaled_dot_product_attention, softmax
from attnbook.numpy.attention import masked_softmax

# --- self-attention that looks only at the others ------------------------------------------------------


def _others_cases() -> list[Case]:
    rng = np.random.default_rng(401)
    X = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    cases = [
        Case("X=[[1, 0], [0, 1], [1, 1]]", (X,)),
        Case("two tokens, X=[[0.5, -2], [3, 1]]", (np.array([[0.5, -2.0], [3.0, 1.0]]),)),
        # Scores up to 1800: an unshifted softmax overflows to inf and returns NaN.
        Case("X=[[30, 0], [0, 30], [30, 30]]", (30.0 * X,)),
    ]
    for T, d in ((4, 3), (7, 5), (2, 8)):
        cases.append(Case(f"random X of shape ({T}, {d})", (rng.normal(size=(T, d)),)))
    return cases


def _attend_to_others(X: np.ndarray) -> np.ndarray:
    return scaled_dot_product_attention(X, X, X, mask=~np.eye(len(X), dtype=bool), scale=1.0)[0]


def _zeroed_after_softmax(X: np.ndarray) -> np.ndarray:
    W = softmax(X @ X.T, axis=1)
    np.fill_diagonal(W, 0.0)
    return W @ X


def _zero_score(X: np.ndarray) -> np.ndarray:
    S = X @ X.T
    np.fill_diagonal(S, 0.0)
    return softmax(S, axis=1) @ X


def _columns(X: np.ndarray) -> np.ndarray:
    S = X @ X.T
    np.fill_diagonal(S, -np.inf)
    return softmax(S, axis=0) @ X


def _unshifted(X: np.ndarray) -> np.ndarray:
    e = np.exp(X @ X.T) * (1 - np.eye(len(X)))
    return e / e.sum(axis=1, keepdims=True) @ X


check_attend_to_others = Checker(
    name="attend_to_others",
    allowed=(softmax, "scipy.special.softmax"),  # any softmax: the exercise is the mask
    doc="Check ``fn(X) -> Y``: parameter-free self-attention ``softmax(X X^T) X`` for ``X`` of shape (T, d), "
        "T >= 2, in which no token attends to itself.",
    reference=_attend_to_others,
    cases=_others_cases(),
    mistakes=(
        Mistake(_zeroed_after_softmax, "a weight set to 0 after the softmax leaves the row summing to less than 1: "
                "rule the diagonal out before the softmax."),
        Mistake(_zero_score, "a score of 0 still gets weight e^0 = 1 in the softmax: a ruled-out score must be -inf."),
        Mistake(_columns, "each query's weights, a row, must sum to 1: softmax along axis=1."),
        Mistake(_unshifted, "large scores overflow exp: subtract each row's largest remaining score first."),
    ),
    forbidden=(scaled_dot_product_attention, masked_softmax, "attnbook.torch.scaled_dot_product_attention",
               "torch.nn.functional.scaled_dot_product_attention"),
)


# --- how far must a token be stretched to take over a query? -------------------------------------------

def _takeover_cases() -> list[Case]:
    rng = np.random.default_rng(402)
    words, E = toy_word_embeddings()
    sentence = ["queen", "crown", "palace", "girl", "apple"]
    X = E[[words.index(w) for w in sentence]]
    cases = [
        Case("the chapter's sentence, query 'crown' (1), key 'palace' (2)", (X, 1, 2)),
        Case("the chapter's sentence, query 'apple' (4), key 'palace' (2)", (X, 4, 2)),
        # 'queen' is already the favourite of 'crown': the factor is below 1.
        Case("the chapter's sentence, query 'crown' (1), key 'queen' (0)", (X, 1, 0)),
        Case("X=[[1, 0], [-1, 1], [2, 1]], query 0, key 1 (x_0 . x_1 < 0)",
             (np.array([[1.0, 0.0], [-1.0, 1.0], [2.0, 1.0]]), 0, 1)),
        Case("X=[[1, 0], [0, 1], [2, 1]], query 0, key 1 (x_0 . x_1 = 0)",
             (np.array([[1.0, 0.0], [0.0, 1.0], [2.0, 1.0]]), 0, 1)),
    ]
    for T, d in ((6, 4), (9, 8)):
        Xr = rng.normal(size=(T, d))
        S = Xr @ Xr.T
        i = 0
        j = int(np.argmax(np.where(np.arange(T) == i, -np.inf, S[i])))  # a key that query i scores positively
        cases.append(Case(f"random X of shape ({T}, {d}), query {i}, key {j}", (Xr, i, j)))
    return cases


def _takeover_factor(X: np.ndarray, i: int, j: int) -> float:
    # Stretching x_j by f multiplies one score of row i, x_i . x_j, by f and leaves the others alone:
    # j wins once f x_i . x_j passes the best of the others.
    scores = X @ X[i]
    if scores[j] <= 0:
        return float("inf")
    others = np.delete(scores, j)
    return float(others.max() / scores[j])


def _own_score_in_max(X, i, j) -> float:
    scores = X @ X[i]
    return float(scores.max() / scores[j]) if scores[j] > 0 else float("inf")


def _keys_row(X, i, j) -> float:
    return _takeover_factor(X, j, i)


def _no_inf(X, i, j) -> float:
    scores = X @ X[i]
    return float(np.delete(scores, j).max() / scores[j])


check_takeover_factor = Checker(
    name="takeover_factor",
    doc="Check ``fn(X, i, j) -> float``: the factor ``f*`` such that, with row ``j`` of ``X`` multiplied by "
        "``f > f*``, key ``j`` gets query ``i``'s largest weight (``i != j``); ``inf`` when ``x_i . x_j <= 0``.",
    reference=_takeover_factor,
    cases=_takeover_cases(),
    mistakes=(
        Mistake(_own_score_in_max, "key j's own score is the one that grows: compare it with the other keys' "
                "scores only."),
        Mistake(_keys_row, "the favourite is chosen in query i's row of scores, among the keys."),
        Mistake(_no_inf, "when x_i . x_j is 0 or less, a longer x_j never scores more: return float('inf')."),
    ),
)
