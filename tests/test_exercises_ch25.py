"""Chapter 25's checkers accept answers computed another way and name the typical mistakes."""

import numpy as np
import torch

from attnbook.exercises import check_newton_schulz, check_polar_factor


def polar_by_eigh(G):
    # G (G^T G)^(-1/2): the polar factor from the eigendecomposition of the Gram matrix (G of full rank)
    wide = G.shape[0] < G.shape[1]
    M = G.T if wide else G
    w, V = torch.linalg.eigh(M.T @ M)
    P = M @ V @ torch.diag(w.rsqrt()) @ V.T
    return P.T if wide else P


def polar_in_numpy(G):
    U, _, Vh = np.linalg.svd(G.numpy(), full_matrices=False)
    return U @ Vh  # a NumPy array is an accepted answer


def newton_schulz_right_side(G, steps, coefficients):
    # the Gram matrix on the other side: X (b A + c A A) with A = X^T X is the same polynomial
    a, b, c = coefficients
    X = G / torch.linalg.norm(G)
    for _ in range(steps):
        A = X.T @ X
        X = a * X + X @ (b * A + c * A @ A)
    return X


def test_answers_computed_another_way_pass():
    assert check_polar_factor(polar_by_eigh)
    assert check_polar_factor(polar_in_numpy)
    assert check_newton_schulz(newton_schulz_right_side)


def test_adam_like_sign_is_named():
    verdict = check_polar_factor(torch.sign)
    assert not verdict and "sign of every entry" in str(verdict)


def test_missing_normalisation_is_named():
    def unnormalised(G, steps, coefficients):
        a, b, c = coefficients
        X = G
        for _ in range(steps):
            A = X.T @ X
            X = a * X + X @ (b * A + c * A @ A)
        return X

    verdict = check_newton_schulz(unnormalised)
    assert not verdict and "Frobenius norm first" in str(verdict)
