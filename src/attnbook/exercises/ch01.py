"""Checkers for the coding exercises of chapter 1 (vectors, dot products and similarity)."""

from __future__ import annotations

import numpy as np

from attnbook.data import toy_word_embeddings
from attnbook.exercises._harness import Case, Checker, Mistake
from attnbook.numpy import analogy, cosine_similarity, pairwise_cosine_similarity


def _vector_cases() -> list[Case]:
    rng = np.random.default_rng(101)
    cases = [
        Case("u=[1, 0], v=[0, 1]", (np.array([1.0, 0.0]), np.array([0.0, 1.0]))),
        Case("u=[1, 2, 3], v=[2, 4, 6]", (np.array([1.0, 2.0, 3.0]), np.array([2.0, 4.0, 6.0]))),
        Case("u=[3, 4], v=[4, 3]", (np.array([3.0, 4.0]), np.array([4.0, 3.0]))),
        Case("u=[1, -2], v=[-2, 4]", (np.array([1.0, -2.0]), np.array([-2.0, 4.0]))),
        Case("u=[0.5, 0.5], v=[10, 0]", (np.array([0.5, 0.5]), np.array([10.0, 0.0]))),
    ]
    for d in (5, 64):
        u, v = rng.normal(size=d), rng.normal(size=d)
        cases.append(Case(f"two random vectors with d={d}", (u, v)))
    return cases


def _dot(u: np.ndarray, v: np.ndarray) -> float:
    return float(u @ v)


def _one_norm(u: np.ndarray, v: np.ndarray) -> float:
    return float(u @ v / np.linalg.norm(u))


def _squared_norms(u: np.ndarray, v: np.ndarray) -> float:
    return float(u @ v / (u @ u * (v @ v)))


check_cosine_similarity = Checker(
    name="cosine_similarity",
    doc="Check ``fn(u, v) -> float``: the cosine similarity of two 1-D vectors of equal length.",
    reference=lambda u, v: float(cosine_similarity(u, v)),
    cases=_vector_cases(),
    mistakes=(
        Mistake(_dot, "that is the plain dot product; divide it by both vectors' lengths."),
        Mistake(_one_norm, "you divided by the length of u only; v's length counts too."),
        Mistake(_squared_norms, "the length is the square root of u @ u, not u @ u itself."),
    ),
)


def _matrix_cases() -> list[Case]:
    rng = np.random.default_rng(102)
    X = np.array([[1.0, 0.0], [1.0, 1.0]])
    Y = np.array([[0.0, 2.0], [3.0, 0.0], [-1.0, -1.0]])
    cases = [Case("X of shape (2, 2), Y of shape (3, 2)", (X, Y))]
    for n, m, d in ((4, 4, 3), (3, 5, 8), (1, 6, 2)):
        X, Y = rng.normal(size=(n, d)), rng.normal(size=(m, d))
        cases.append(Case(f"random X of shape {X.shape}, Y of shape {Y.shape}", (X, Y)))
    return cases


def _transposed(X: np.ndarray, Y: np.ndarray) -> np.ndarray:
    return pairwise_cosine_similarity(Y, X)


def _unnormalised(X: np.ndarray, Y: np.ndarray) -> np.ndarray:
    return X @ Y.T


def _columns_normalised(X: np.ndarray, Y: np.ndarray) -> np.ndarray:
    return (X / np.linalg.norm(X, axis=0)) @ (Y / np.linalg.norm(Y, axis=0)).T


check_pairwise_cosine_similarity = Checker(
    name="pairwise_cosine_similarity",
    doc="Check ``fn(X, Y) -> S``: ``S[i, j]`` is the cosine of row ``i`` of X and row ``j`` of Y.",
    reference=pairwise_cosine_similarity,
    cases=_matrix_cases(),
    mistakes=(
        Mistake(_transposed, "rows of the result belong to X and columns to Y, not the reverse."),
        Mistake(_unnormalised, "X @ Y.T gives dot products; normalise each row to length 1 first."),
        Mistake(
            _columns_normalised,
            "you normalised the columns; each vector is a row, so normalise along axis=1.",
        ),
    ),
)


def _analogy_cases() -> list[Case]:
    words, E = toy_word_embeddings()
    cases = [
        Case(f"{a!r} is to {b!r} as {c!r} is to ?, toy embeddings", (a, b, c, E, words))
        for a, b, c in (("man", "king", "woman"), ("king", "prince", "queen"), ("man", "boy", "woman"))
    ]
    # In random embeddings the target vector b - a + c lies closest to b or c themselves, so these
    # cases tell apart a solution that forgets to leave the three question words out.
    rng = np.random.default_rng(103)
    vocab = [f"w{i}" for i in range(20)]
    for _ in range(3):
        E_rand = np.round(rng.normal(size=(20, 6)), 2)
        a, b, c = (vocab[i] for i in rng.choice(20, size=3, replace=False))
        cases.append(Case(f"{a!r} : {b!r} :: {c!r} : ?, random 20-word vocabulary", (a, b, c, E_rand, vocab)))
    return cases


def _no_exclusion(a, b, c, E, words) -> str:
    target = E[words.index(b)] - E[words.index(a)] + E[words.index(c)]
    return words[int(np.argmax(pairwise_cosine_similarity(target[None, :], E)[0]))]


def _wrong_direction(a, b, c, E, words) -> str:
    return analogy(b, a, c, E, words)


check_analogy = Checker(
    name="analogy",
    doc='Check ``fn(a, b, c, E, words) -> str``: "a is to b as c is to ?" by vector arithmetic.',
    reference=analogy,
    cases=_analogy_cases(),
    mistakes=(
        Mistake(_no_exclusion, "leave a, b and c out of the candidates: the target is often closest to one of them."),
        Mistake(_wrong_direction, "the target is E[b] - E[a] + E[c]: start from b, remove a, add c."),
    ),
)
