"""Chapter 1's checkers, as a learner meets them: wrong answers written independently of the checkers'
own mistakes get the right words (tests/test_checkers.py runs every checker on its reference and mistakes)."""

import numpy as np
import pytest

from attnbook.exercises import (
    Verdict,
    check_analogy,
    check_cosine_similarity,
    check_pairwise_cosine_similarity,
)
from attnbook.numpy import analogy, cosine_similarity, pairwise_cosine_similarity


def not_attempted(*args):
    raise NotImplementedError


def test_verdict_reads_as_its_message_and_its_truth():
    v = Verdict(True, "f: all 3 checks passed.")
    assert repr(v) == "f: all 3 checks passed." and bool(v)
    assert not Verdict(False, "f: wrong")


@pytest.mark.parametrize(
    "check", [check_cosine_similarity, check_pairwise_cosine_similarity, check_analogy]
)
def test_every_checker_reports_not_attempted_and_non_functions(check):
    verdict = check(not_attempted)
    assert not verdict and not verdict.attempted
    assert "not attempted yet" in verdict.message
    assert "expected a function, got int" in check(3).message


# --- cosine similarity ---------------------------------------------------------------------------

def test_cosine_checker_accepts_a_float_returning_version():
    # (every checker accepting its reference is tests/test_checkers.py's business)
    assert check_cosine_similarity(lambda u, v: float(u @ v) / float(np.linalg.norm(u) * np.linalg.norm(v)))


def test_cosine_checker_recognises_the_plain_dot_product():
    v = check_cosine_similarity(lambda u, w: u @ w)
    assert not v
    assert "wrong value: expected 1, got 28" in v.message
    assert "Hint: that is the plain dot product" in v.message


def test_cosine_checker_recognises_one_norm_and_squared_norms():
    one = check_cosine_similarity(lambda u, w: u @ w / np.linalg.norm(u))
    assert "divided by the length of u only" in one.message
    squared = check_cosine_similarity(lambda u, w: u @ w / ((u @ u) * (w @ w)))
    assert "not u @ u itself" in squared.message


def test_cosine_checker_reports_exceptions_none_nan_and_shape():
    def crashes(u, v):
        return u @ v[:1]

    assert "raised ValueError" in check_cosine_similarity(crashes).message
    assert "returned None" in check_cosine_similarity(lambda u, v: None).message
    assert "returned NaN" in check_cosine_similarity(lambda u, v: float("nan")).message
    shape = check_cosine_similarity(lambda u, v: u * v)
    assert "returned an array of shape (2,), expected a single number" in shape.message
    assert "returned str 'x'" in check_cosine_similarity(lambda u, v: "x").message


def test_checker_inputs_survive_a_function_that_changes_them_in_place():
    def correct_then_clobbers(u, v):
        result = cosine_similarity(u, v)
        u[:] = 0.0  # were the checker's stored cases handed over, they would now hold zero vectors
        return result

    # The change is reported (its caller would lose its data), and the stored cases stay whole.
    for _ in range(2):
        verdict = check_cosine_similarity(correct_then_clobbers)
        assert not verdict and "changed its input `u` in place" in verdict.message
    assert check_cosine_similarity(cosine_similarity)


# --- pairwise cosine similarity ------------------------------------------------------------------

def test_pairwise_checker_recognises_transposed_result():
    v = check_pairwise_cosine_similarity(lambda X, Y: pairwise_cosine_similarity(Y, X))
    assert "returned shape (3, 2), expected shape (2, 3)" in v.message
    assert "rows of the result belong to X" in v.message


def test_pairwise_checker_recognises_missing_and_wrong_axis_normalisation():
    raw = check_pairwise_cosine_similarity(lambda X, Y: X @ Y.T)
    assert "X @ Y.T gives dot products" in raw.message
    cols = check_pairwise_cosine_similarity(
        lambda X, Y: (X / np.linalg.norm(X, axis=0)) @ (Y / np.linalg.norm(Y, axis=0)).T
    )
    assert "you normalised the columns" in cols.message


def test_pairwise_checker_reports_a_matmul_error_as_a_sentence():
    v = check_pairwise_cosine_similarity(lambda X, Y: X @ Y)
    assert v.message.startswith("pairwise_cosine_similarity: raised ValueError")
    assert "(input: X of shape (2, 2), Y of shape (3, 2))" in v.message


# --- analogy ---------------------------------------------------------------------------------------

def test_analogy_checker_catches_forgotten_exclusion():
    def no_exclusion(a, b, c, E, words):
        target = E[words.index(b)] - E[words.index(a)] + E[words.index(c)]
        return words[int(np.argmax(pairwise_cosine_similarity(target[None, :], E)[0]))]

    v = check_analogy(no_exclusion)
    assert not v and "leave a, b and c out of the candidates" in v.message


def test_analogy_checker_catches_wrong_direction():
    v = check_analogy(lambda a, b, c, E, words: analogy(b, a, c, E, words))
    assert "returned 'monarch', expected 'princess'" in v.message
    assert "start from b, remove a, add c" in v.message
