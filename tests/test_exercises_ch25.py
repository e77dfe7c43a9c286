"""Chapter 25's checkers accept answers computed another way, name the typical mistakes, and refuse answers
that call the package's iteration, its exact factor or an SVD."""

import numpy as np
import torch

from attnbook.exercises import check_newton_schulz_stack, check_polar_from_gram
from attnbook.training.muon import newton_schulz, polar_factor


def stack_with_gram_on_the_right(G, steps, coefficients):
    # X (b A + c A A) with A = X^T X is the same odd polynomial of X, on every matrix of the stack
    a, b, c = coefficients
    X = G / G.pow(2).sum(dim=(-2, -1), keepdim=True).sqrt()
    for _ in range(steps):
        A = X.mT @ X
        X = a * X + X @ (b * A + c * A @ A)
    return X


def stack_by_loop(G, steps, coefficients):
    # one matrix at a time, by hand: slower than the batched products, but the same numbers
    out = torch.empty_like(G)
    flat, res = G.reshape(-1, *G.shape[-2:]), out.view(-1, *G.shape[-2:])
    a, b, c = coefficients
    for i, M in enumerate(flat):
        X = M / torch.linalg.norm(M)
        for _ in range(steps):
            A = X @ X.T
            X = a * X + (b * A + c * A @ A) @ X
        res[i] = X
    return out


def polar_by_cholesky_free_numpy(G):
    # the same formula in NumPy, on the larger side's transpose where needed (a NumPy array is accepted)
    M = G.numpy()
    wide = M.shape[0] < M.shape[1]
    M = M.T if wide else M
    w, Q = np.linalg.eigh(M.T @ M)
    P = M @ Q @ np.diag(1 / np.sqrt(w)) @ Q.T
    return P.T if wide else P


def test_answers_computed_another_way_pass():
    assert check_newton_schulz_stack(stack_with_gram_on_the_right)
    assert check_newton_schulz_stack(stack_by_loop)
    assert check_polar_from_gram(polar_by_cholesky_free_numpy)


def test_one_norm_for_the_whole_stack_is_named():
    def one_norm(G, steps, coefficients):
        a, b, c = coefficients
        tall = G.shape[-2] > G.shape[-1]
        X = G.mT if tall else G
        X = X / torch.linalg.norm(X)
        for _ in range(steps):
            A = X @ X.mT
            X = a * X + (b * A + c * A @ A) @ X
        return X.mT if tall else X

    verdict = check_newton_schulz_stack(one_norm)
    assert not verdict and "its own Frobenius norm" in str(verdict)


def test_a_stack_that_loses_its_leading_axes_is_refused():
    def flattened(G, steps, coefficients):
        return stack_by_loop(G, steps, coefficients).reshape(-1, *G.shape[-2:])

    verdict = check_newton_schulz_stack(flattened)
    assert not verdict and "shape" in str(verdict)


def test_delegating_answers_are_refused():
    def per_matrix(G, steps, coefficients):
        flat = G.reshape(-1, *G.shape[-2:])
        return torch.stack([newton_schulz(M, steps, coefficients) for M in flat]).reshape(G.shape)

    def by_svd(G):
        U, _, Vh = torch.linalg.svd(G, full_matrices=False)
        return U @ Vh

    verdict = check_newton_schulz_stack(per_matrix)
    assert not verdict and "newton_schulz" in str(verdict)
    verdict = check_polar_from_gram(polar_factor)
    assert not verdict and "polar_factor" in str(verdict)
    verdict = check_polar_from_gram(by_svd)
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

    assert "not attempted" in str(check_newton_schulz_stack(stub))
    assert "not attempted" in str(check_polar_from_gram(stub))
