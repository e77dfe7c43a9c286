"""Chapter 5's checker: answers written another way pass, an answer that calls PyTorch's autograd is
refused by name, and wrong answers a learner writes beyond the listed mistakes are refused."""

import numpy as np
import torch

from attnbook.exercises import check_value_weight_grad


def entry_by_entry(Z, A, G):
    """dL/dW_v[i, k] = sum over b, j, t of G[b, i, j] A[b, t, j] Z[b, k, t], in Python loops."""
    B, d_z, T_k = Z.shape
    d_v, T_q = G.shape[1], G.shape[2]
    out = np.zeros((d_v, d_z))
    for b in range(B):
        for i in range(d_v):
            for k in range(d_z):
                out[i, k] += sum(G[b, i, j] * A[b, t, j] * Z[b, k, t] for j in range(T_q) for t in range(T_k))
    return out


def by_einsum(Z, A, G):
    return np.einsum("bij,btj,bkt->ik", G, A, Z)


def by_finite_differences(Z, A, G):
    """Central differences of L = sum G * (W_v Z A), which is linear in W_v: exact up to rounding."""
    d_v, d_z = G.shape[1], Z.shape[1]
    out = np.zeros((d_v, d_z))
    for i in range(d_v):
        for k in range(d_z):
            E = np.zeros((d_v, d_z))
            E[i, k] = 1e-3
            out[i, k] = (np.sum(G * ((E @ Z) @ A)) - np.sum(G * ((-E @ Z) @ A))) / 2e-3
    return out


def test_the_reference_agrees_with_loops_and_finite_differences():
    for case in check_value_weight_grad.cases:
        expected = check_value_weight_grad.reference(*case.args)
        assert np.allclose(entry_by_entry(*case.args), expected)
        assert np.allclose(by_finite_differences(*case.args), expected)


def test_answers_written_another_way_pass():
    assert check_value_weight_grad(entry_by_entry)
    assert check_value_weight_grad(by_einsum)


def test_an_answer_through_autograd_is_refused_by_name():
    def through_backward(Z, A, G):
        W = torch.zeros(G.shape[1], Z.shape[1], dtype=torch.float64, requires_grad=True)
        (W @ torch.tensor(Z) @ torch.tensor(A)).backward(torch.tensor(G))
        return W.grad.numpy()

    def through_grad(Z, A, G):
        W = torch.zeros(G.shape[1], Z.shape[1], dtype=torch.float64, requires_grad=True)
        return torch.autograd.grad(W @ torch.tensor(Z) @ torch.tensor(A), W, torch.tensor(G))[0].numpy()

    verdict = check_value_weight_grad(through_backward)
    assert not verdict and "torch.autograd" in verdict.message and "backward" in verdict.message
    verdict = check_value_weight_grad(through_grad)
    assert not verdict and "torch.autograd" in verdict.message and "grad" in verdict.message


def test_the_listed_mistakes_give_their_hints():
    def row_convention(Z, A, G):
        return np.einsum("btj,bkt,bij->ki", A, Z, G)

    verdict = check_value_weight_grad(row_convention)
    assert not verdict and "row convention" in verdict.message


# --- wrong answers a learner writes, beyond the listed mistakes -------------------------------------

def test_an_answer_with_the_full_transpose_is_refused():
    # .T on a 3-D array reverses every axis: the batch axis ends up last.
    verdict = check_value_weight_grad(lambda Z, A, G: np.sum(G @ (Z @ A).T, axis=0))
    assert not verdict


def test_an_answer_that_adds_the_bias_gradient_is_refused():
    # The value bias's gradient, the sum of G over batch and queries, added to every column of W_v's.
    def with_bias(Z, A, G):
        return by_einsum(Z, A, G) + G.sum(axis=(0, 2))[:, None]

    verdict = check_value_weight_grad(with_bias)
    assert not verdict and "wrong value" in verdict.message


def test_unattempted_says_so():
    def todo(Z, A, G):
        raise NotImplementedError

    assert not check_value_weight_grad(todo).attempted
