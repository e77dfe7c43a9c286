"""Chapter 25's checkers accept answers computed another way, name the typical mistakes, and refuse answers
that call the package's iteration, its exact factor or an SVD."""

import numpy as np
import torch

from attnbook.exercises import check_polar_from_gram, check_quintic_for_slope
from attnbook.training.muon import CUBIC, polar_factor


def quintic_by_sympy_free_solve(a):
    # the two conditions as a 2 x 2 system, solved by Cramer's rule
    det = 1 * 5 - 1 * 3
    b = ((1 - a) * 5 - 1 * (-a)) / det
    c = (1 * (-a) - 3 * (1 - a)) / det
    return [a, b, c]  # a list is accepted too


def polar_by_cholesky_free_numpy(G):
    # the same formula in NumPy, on the larger side's transpose where needed (a NumPy array is accepted)
    M = G.numpy()
    wide = M.shape[0] < M.shape[1]
    M = M.T if wide else M
    w, Q = np.linalg.eigh(M.T @ M)
    P = M @ Q @ np.diag(1 / np.sqrt(w)) @ Q.T
    return P.T if wide else P


def test_answers_computed_another_way_pass():
    assert check_quintic_for_slope(quintic_by_sympy_free_solve)
    assert check_polar_from_gram(polar_by_cholesky_free_numpy)


def test_the_slope_of_the_cubic_gives_the_cubic():
    a, b, c = quintic_by_sympy_free_solve(1.5)
    assert (a, b, c) == (CUBIC[0], CUBIC[1], CUBIC[2])  # the chapter's cubic is this family's member


def test_a_quintic_without_the_flat_slope_is_named():
    verdict = check_quintic_for_slope(lambda a: (a, 1 - a, 0.0))
    assert not verdict and "p'(1) = 0" in str(verdict)

    def second_derivative_zero(a):  # p''(1) = 6b + 20c = 0 instead of p'(1) = 0
        c = (1 - a) * 6 / (6 - 20)
        return (a, 1 - a - c, c)

    assert not check_quintic_for_slope(second_derivative_zero)


def test_delegating_answers_are_refused():
    def by_svd(G):
        U, _, Vh = torch.linalg.svd(G, full_matrices=False)
        return U @ Vh

    verdict = check_polar_from_gram(polar_factor)
    assert not verdict and "polar_factor" in str(verdict)
    verdict = check_polar_from_gram(by_svd)
    assert not verdict and "svd" in str(verdict)

    def by_numpy_svd(G):
        U, _, Vh = np.linalg.svd(G.numpy(), full_matrices=False)
        return U @ Vh

    verdict = check_polar_from_gram(by_numpy_svd)
    assert not verdict and "svd" in str(verdict)


def test_inverse_instead_of_inverse_root_is_named():
    def inverse(G):
        wide = G.shape[0] < G.shape[1]
        M = G.T if wide else G
        P = M @ torch.linalg.inv(M.T @ M)
        return P.T if wide else P

    verdict = check_polar_from_gram(inverse)
    assert not verdict and "inverse square root" in str(verdict)


def test_the_larger_gram_matrix_is_refused():
    def larger_side(G):  # for a wide G, G^T G is singular: its inverse square root is not finite
        w, Q = torch.linalg.eigh(G.T @ G)
        return G @ Q @ torch.diag(w.rsqrt()) @ Q.T

    verdict = check_polar_from_gram(larger_side)
    assert not verdict and ("NaN" in str(verdict) or "wrong value" in str(verdict))


def test_unattempted_answers_say_so():
    def stub(*args):
        raise NotImplementedError

    assert "not attempted" in str(check_quintic_for_slope(stub))
    assert "not attempted" in str(check_polar_from_gram(stub))
