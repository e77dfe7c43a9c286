"""Chapter 2's checkers: answers written another way pass, an answer that calls the package's (or PyTorch's)
softmax is refused by name, and wrong answers a learner writes beyond the listed mistakes are refused."""

import math

import numpy as np
import torch

import attnbook.numpy as anp
from attnbook.exercises import check_log_softmax_rows, check_softmax_rows, check_softmax_vjp
from attnbook.numpy.backprop.softmax import softmax_backward


def loop_log_softmax(S):
    """One row at a time in plain Python floats: the definition, shifted by the row's maximum."""
    out = np.empty_like(S)
    for i, row in enumerate(S):
        m = max(row)
        lse = m + math.log(math.fsum(math.exp(s - m) for s in row))
        out[i] = [s - lse for s in row]
    return out


def jacobian_vjp(W, G):
    """Builds each row's Jacobian diag(w) - w w^T explicitly: the slow way the exercise avoids."""
    return np.stack([(np.diag(w) - np.outer(w, w)) @ g for w, g in zip(W, G, strict=True)])


def test_answers_written_another_way_pass():
    assert check_softmax_rows(lambda S: np.exp(loop_log_softmax(S)))
    assert check_log_softmax_rows(loop_log_softmax)
    assert check_softmax_vjp(jacobian_vjp)


def test_the_vjp_reference_agrees_with_autograd():
    g = np.random.default_rng(0)
    S, G = g.normal(size=(3, 5)), g.normal(size=(3, 5))
    St = torch.tensor(S, requires_grad=True)
    torch.softmax(St, dim=1).backward(torch.tensor(G))
    assert np.allclose(check_softmax_vjp.reference(anp.softmax(S, axis=1), G), St.grad.numpy())


# --- an answer that calls the package, or PyTorch, is refused by name --------------------------------

def test_softmax_rows_through_the_package_is_refused_by_name():
    verdict = check_softmax_rows(lambda S: anp.softmax(S, axis=1))
    assert not verdict and "attnbook.numpy.softmax.softmax" in verdict.message
    verdict = check_softmax_rows(lambda S: torch.softmax(torch.from_numpy(S), dim=1))
    assert not verdict and "softmax" in verdict.message and "a library's ready-made answer" in verdict.message


def test_log_softmax_rows_through_torch_is_refused_by_name():
    verdict = check_log_softmax_rows(lambda S: torch.log_softmax(torch.from_numpy(S), dim=1).numpy())
    assert not verdict and "log_softmax" in verdict.message


def test_softmax_vjp_through_the_package_or_autograd_is_refused_by_name():
    verdict = check_softmax_vjp(lambda W, G: softmax_backward(G, W, axis=1))
    assert not verdict and "attnbook.numpy.backprop.softmax.softmax_backward" in verdict.message
    verdict = check_softmax_vjp(lambda W, G: np.stack([anp.softmax_jacobian(w) @ g for w, g in zip(W, G, strict=True)]))
    assert not verdict and "attnbook.numpy.softmax.softmax_jacobian" in verdict.message

    def by_autograd(W, G):
        S = torch.tensor(np.log(np.where(W > 0, W, 1e-300)), requires_grad=True)
        (grad,) = torch.autograd.grad(torch.softmax(S, dim=1), S, torch.tensor(G))
        return grad.numpy()

    verdict = check_softmax_vjp(by_autograd)
    assert not verdict and "torch.autograd" in verdict.message


# --- wrong answers a learner writes, beyond the listed mistakes -------------------------------------

def test_softmax_rows_normalised_by_the_whole_matrix_is_refused():
    def whole_sum(S):
        e = np.exp(S - S.max(axis=1, keepdims=True))
        return e / e.sum()

    verdict = check_softmax_rows(whole_sum)
    assert not verdict and "wrong value" in verdict.message


def test_log_softmax_rows_with_the_whole_matrix_in_the_sum_is_refused():
    def whole_sum(S):
        m = S.max(axis=1, keepdims=True)
        return S - m - np.log(np.exp(S - m).sum())

    verdict = check_log_softmax_rows(whole_sum)
    assert not verdict and "wrong value" in verdict.message


def test_softmax_vjp_with_only_the_jacobians_diagonal_is_refused():
    verdict = check_softmax_vjp(lambda W, G: W * (1 - W) * G)
    assert not verdict and "wrong value" in verdict.message
