"""Checkers for the coding exercises of chapter 2 (softmax)."""

from __future__ import annotations

import numpy as np

from attnbook.exercises._harness import BudgetChecker, Case, Checker, Mistake
from attnbook.numpy import online_softmax, softmax, softmax_jacobian
from attnbook.numpy.attention import masked_softmax
from attnbook.numpy.backprop.softmax import softmax_backward

# The package's softmax and PyTorch's: an answer that calls one has not written the softmax.
_SOFTMAXES = (softmax, masked_softmax, online_softmax, "attnbook.torch.softmax", "torch.softmax",
              "torch.nn.functional.softmax")


def _row_cases() -> list[Case]:
    rng = np.random.default_rng(201)
    inf = np.inf
    cases = [
        Case("S=[[1, 2], [3, 4]]", (np.array([[1.0, 2.0], [3.0, 4.0]]),)),
        Case("one row, S=[[2, 1, 0.5, -1, 3]]", (np.array([[2.0, 1.0, 0.5, -1.0, 3.0]]),)),
        # Rows 2000 apart: one maximum for the whole matrix leaves the lower row with exp(...) = 0 everywhere.
        Case("S=[[0, 1], [-2000, -1999]]", (np.array([[0.0, 1.0], [-2000.0, -1999.0]]),)),
        # The last row spreads over 1600: shifted by its mean, 800, its largest score still overflows exp.
        Case("S=[[1000, 1001, 1002], [-1000, -1001, -1002], [0, 1600, 800]]",
             (np.array([[1000.0, 1001.0, 1002.0], [-1000.0, -1001.0, -1002.0], [0.0, 1600.0, 800.0]]),)),
        Case("S=[[0, -inf, 1], [-inf, 5, -inf]] (-inf: ruled out)",
             (np.array([[0.0, -inf, 1.0], [-inf, 5.0, -inf]]),)),
    ]
    for n, k in ((4, 4), (3, 7), (6, 2)):
        cases.append(Case(f"random scores of shape ({n}, {k})", (rng.normal(scale=3.0, size=(n, k)),)))
    return cases


def _softmax_rows(S: np.ndarray) -> np.ndarray:
    return softmax(S, axis=1)


def _column_max(S: np.ndarray) -> np.ndarray:
    e = np.exp(S - S.max(axis=0))
    return e / e.sum(axis=1, keepdims=True)


def _global_max(S: np.ndarray) -> np.ndarray:
    e = np.exp(S - S.max())
    return e / e.sum(axis=1, keepdims=True)


def _normalised_down_columns(S: np.ndarray) -> np.ndarray:
    e = np.exp(S - S.max(axis=0, keepdims=True))
    return e / e.sum(axis=0, keepdims=True)


def _max_without_keepdims(S: np.ndarray) -> np.ndarray:
    e = np.exp(S - S.max(axis=1))
    return e / e.sum(axis=1, keepdims=True)


def _finite_mean(S: np.ndarray) -> np.ndarray:
    """Each row's mean over its finite scores (the -inf of a ruled-out entry left out)."""
    return np.nanmean(np.where(np.isfinite(S), S, np.nan), axis=1, keepdims=True)


def _mean_shift(S: np.ndarray) -> np.ndarray:
    e = np.exp(S - _finite_mean(S))
    return e / e.sum(axis=1, keepdims=True)


def _plain_mean_shift(S: np.ndarray) -> np.ndarray:
    e = np.exp(S - S.mean(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


_BY_THE_MAXIMUM = ("shift by the row's largest score, not its mean: a score more than 709.78 above the mean still "
                   "overflows exp in float64, whereas after subtracting the largest score no exponent is above 0.")


check_softmax_rows = Checker(
    name="softmax_rows",
    doc="Check ``fn(S) -> W``: the softmax of every row of ``S`` (shape (n, k)), without overflow; entries of "
        "``-inf`` get weight 0.",
    reference=_softmax_rows,
    cases=_row_cases(),
    mistakes=(
        Mistake(_column_max, "the shift must be one constant per row: subtracting each column's maximum "
                "changes the differences within a row, and so the weights."),
        Mistake(_global_max, "a row far below the largest score of the whole matrix has exp of every entry "
                "underflow to 0, and 0/0: shift each row by its own maximum."),
        Mistake(_normalised_down_columns, "each row is one softmax: its weights, along axis=1, sum to 1."),
        Mistake(_max_without_keepdims, "S.max(axis=1) has shape (n,) and lines up with the columns when "
                "broadcast: keep the reduced axis so that row i loses its own maximum."),
        Mistake(_mean_shift, _BY_THE_MAXIMUM),
        Mistake(_plain_mean_shift, _BY_THE_MAXIMUM),
    ),
    forbidden=_SOFTMAXES,
)


# --- log-softmax ---------------------------------------------------------------------------------

def _log_cases() -> list[Case]:
    rng = np.random.default_rng(202)
    inf = np.inf
    cases = [
        Case("S=[[1, 2, 3]]", (np.array([[1.0, 2.0, 3.0]]),)),
        # The second weight is exp(-1000), 0 in float64: its logarithm, -1000, is still a number.
        Case("S=[[0, -1000]]", (np.array([[0.0, -1000.0]]),)),
        Case("S=[[1000, 1000], [-1000, -1000]]", (np.array([[1000.0, 1000.0], [-1000.0, -1000.0]]),)),
        Case("S=[[0, -inf, 1], [3, 2, -inf]] (-inf: ruled out)",
             (np.array([[0.0, -inf, 1.0], [3.0, 2.0, -inf]]),)),
        # The second row spreads over 2200: shifted by its mean, 1263.3, its largest score still overflows exp.
        Case("S=[[-800, 0, 5], [2000, 1990, -200]]", (np.array([[-800.0, 0.0, 5.0], [2000.0, 1990.0, -200.0]]),)),
    ]
    for n, k in ((3, 5), (2, 9)):
        cases.append(Case(f"random scores of shape ({n}, {k})", (rng.normal(scale=3.0, size=(n, k)),)))
    return cases


def _log_softmax_rows(S: np.ndarray) -> np.ndarray:
    # PyTorch's own log-softmax as the oracle (the package has none: chapter 2's exercise derives it).
    import torch  # only here: the NumPy chapters' checkers import without PyTorch

    return torch.log_softmax(torch.from_numpy(np.array(S, dtype=np.float64)), dim=1).numpy()


def _log_of_weights(S: np.ndarray) -> np.ndarray:
    e = np.exp(S - S.max(axis=1, keepdims=True))
    return np.log(e / e.sum(axis=1, keepdims=True))


def _max_once(S: np.ndarray) -> np.ndarray:
    m = S.max(axis=1, keepdims=True)
    return S - np.log(np.exp(S - m).sum(axis=1, keepdims=True))


def _unshifted_log(S: np.ndarray) -> np.ndarray:
    return S - np.log(np.exp(S).sum(axis=1, keepdims=True))


def _mean_shifted_log(S: np.ndarray) -> np.ndarray:
    m = _finite_mean(S)
    return S - m - np.log(np.exp(S - m).sum(axis=1, keepdims=True))


def _plain_mean_shifted_log(S: np.ndarray) -> np.ndarray:
    m = S.mean(axis=1, keepdims=True)
    return S - m - np.log(np.exp(S - m).sum(axis=1, keepdims=True))


check_log_softmax_rows = Checker(
    name="log_softmax_rows",
    doc="Check ``fn(S) -> log W``: the logarithm of the softmax of every row of ``S`` (shape (n, k)), finite "
        "wherever the score is finite; ``-inf`` where the score is ``-inf`` (each row holds a finite score).",
    reference=_log_softmax_rows,
    cases=_log_cases(),
    mistakes=(
        Mistake(_log_of_weights, "a weight such as exp(-1000) underflows to 0 before the logarithm sees it: "
                "never form the weights; subtract the logarithm of the denominator from the scores."),
        Mistake(_max_once, "you took the maximum out of the sum but never put it back: log(sum(exp(s))) is "
                "the maximum plus the logarithm of the shifted sum."),
        # Before the unshifted sum: on the row that spreads over 2200 both give -inf everywhere, and an answer
        # without any shift fails earlier, on [1000, 1000].
        Mistake(_mean_shifted_log, _BY_THE_MAXIMUM),
        Mistake(_plain_mean_shifted_log, _BY_THE_MAXIMUM),
        Mistake(_unshifted_log, "exp overflows for scores in the hundreds: take each row's maximum out of the "
                "sum first."),
    ),
    # np.logaddexp.reduce is the logarithm of a sum of exponentials in one call: the denominator the exercise
    # asks for.
    forbidden=(*_SOFTMAXES, "torch.log_softmax", "torch.nn.functional.log_softmax", np.logaddexp.reduce),
)


# --- the backward pass -------------------------------------------------------------------------------

def _backward_cases() -> list[Case]:
    rng = np.random.default_rng(203)
    # Two rows first: on one row, summing down the columns (axis 0) gives the same numbers as keeping only the
    # i = j term, and the hint could not tell the two mistakes apart.
    cases = [
        Case("uniform W of shape (2, 4), G=[[1, 2, 3, 4], [0, 0, 0, 1]]",
             (np.full((2, 4), 0.25), np.array([[1.0, 2.0, 3.0, 4.0], [0.0, 0.0, 0.0, 1.0]]))),
        Case("W=softmax([[0, ln 2, ln 3]]), G=[[1, 0, 0]]",
             (softmax(np.log(np.array([[1.0, 2.0, 3.0]])), axis=1), np.array([[1.0, 0.0, 0.0]]))),
        Case("W with a ruled-out entry, softmax([[1, -inf, 2]]), G=[[0.5, -1, 2]]",
             (softmax(np.array([[1.0, -np.inf, 2.0]]), axis=1), np.array([[0.5, -1.0, 2.0]]))),
    ]
    for n, k in ((3, 5), (4, 4), (1, 8)):
        W, G = softmax(rng.normal(scale=2.0, size=(n, k)), axis=1), rng.normal(size=(n, k))
        cases.append(Case(f"W = softmax of random scores ({n}, {k}), random G", (W, G)))
    return cases


def _softmax_vjp(W: np.ndarray, G: np.ndarray) -> np.ndarray:
    return softmax_backward(G, W, axis=1)


def _diagonal_only(W: np.ndarray, G: np.ndarray) -> np.ndarray:
    return W * (1 - W) * G  # dw_j / ds_j = w_j (1 - w_j), the i = j term alone


def _denominator_fixed(W: np.ndarray, G: np.ndarray) -> np.ndarray:
    return W * G  # as if the denominator did not depend on s_j


def _plain_mean(W: np.ndarray, G: np.ndarray) -> np.ndarray:
    return W * (G - G.mean(axis=1, keepdims=True))


def _summed_down_columns(W: np.ndarray, G: np.ndarray) -> np.ndarray:
    return W * (G - (G * W).sum(axis=0, keepdims=True))


def _off_diagonal_only(W: np.ndarray, G: np.ndarray) -> np.ndarray:
    return -W * (G * W).sum(axis=1, keepdims=True)


def _vjp_big_case() -> Case:
    rng = np.random.default_rng(204)
    W = softmax(rng.normal(scale=2.0, size=(2000, 64)), axis=1)
    return Case("W = softmax of random scores (2000, 64), random G", (W, rng.normal(size=(2000, 64))))


check_softmax_vjp = BudgetChecker(
    name="softmax_vjp",
    doc="Check ``fn(W, G) -> dS``: the gradient with respect to the scores ``S`` of rows ``W = softmax(S)`` "
        "(shape (n, k)), given ``G = dL/dW``, without building a (k, k) Jacobian.",
    reference=_softmax_vjp,
    cases=_backward_cases(),
    mistakes=(
        Mistake(_diagonal_only, "every score moves every weight of its row (they share one denominator): "
                "you kept only the i = j term of the derivative."),
        Mistake(_denominator_fixed, "d w_j / d s_j is not w_j alone: the denominator, the sum of exp over the row, "
                "depends on s_j and on every other score of the row too."),
        Mistake(_off_diagonal_only, "you kept only the i != j terms: the i = j term adds w_j times g_j."),
        Mistake(_plain_mean, "what is subtracted from G is an average of G weighted by W, not its plain mean."),
        Mistake(_summed_down_columns, "each row is its own softmax: sum over the entries of a row (axis=1)."),
    ),
    forbidden=(softmax_backward, softmax_jacobian, "torch.autograd.grad", "torch.autograd.backward"),
    big_case=_vjp_big_case(),
    budget_bytes=16 * 2**20,  # a (2000, 64) array is 1 MiB; the (2000, 64, 64) Jacobians are 62.5 MiB
    budget_hint="it builds a (k, k) Jacobian for every row, which the statement rules out. dS_j = w_j (g_j - sum_i "
                "w_i g_i) needs only arrays of W's shape and one number per row.",
)
