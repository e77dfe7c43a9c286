"""Chapter 19's checkers accept a backward pass written by hand, refuse one that delegates to the package's
backward passes or to autograd, and reject wrong answers a learner would plausibly write."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import attnbook.numpy as anp
import attnbook.numpy.backprop as bp
from attnbook.exercises import check_attention_backward, check_tied_head_grad


def by_hand_attention(dO, Q, K, V, mask):
    c = 1 / np.sqrt(Q.shape[-1])
    _, P = anp.scaled_dot_product_attention(Q, K, V, mask=mask)
    dP = dO @ np.swapaxes(V, -1, -2)
    dS = P * (dP - (dP * P).sum(axis=-1, keepdims=True))
    return np.stack((c * dS @ K, c * np.swapaxes(dS, -1, -2) @ Q, np.swapaxes(P, -1, -2) @ dO))


def by_hand_tied(ids, targets, E, gamma, eps, ddof=0):
    x = E[ids]
    mu = x.mean(-1, keepdims=True)
    r = 1 / np.sqrt(x.var(-1, ddof=ddof, keepdims=True) + eps)
    xhat = (x - mu) * r
    h = xhat * gamma
    z = h @ E.T
    p = np.exp(z - z.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    dz = (p - np.eye(E.shape[0])[targets]) / ids.size
    dxhat = (dz @ E) * gamma
    dx = r * (dxhat - dxhat.mean(-1, keepdims=True) - xhat * (dxhat * xhat).mean(-1, keepdims=True))
    dE = np.einsum("btv,btd->vd", dz, h)
    np.add.at(dE, ids, dx)
    return dE


def test_answers_by_hand_pass():
    assert check_attention_backward(by_hand_attention)
    assert check_tied_head_grad(by_hand_tied)


def test_the_planted_bugs_fail_without_a_hint_that_spells_them():
    # the chapter's Debug exercise: dS an alias of the weights P (so dV reads the changed P), and dS.T, which
    # also reverses the batch axes
    def colleagues(dO, Q, K, V, mask):
        c = 1 / np.sqrt(Q.shape[-1])
        _, P = anp.scaled_dot_product_attention(Q, K, V, mask=mask)
        dP = dO @ np.swapaxes(V, -1, -2)
        dS = P
        dS *= dP - (dP * P).sum(axis=-1, keepdims=True)
        dV = np.swapaxes(P, -1, -2) @ dO
        return np.stack((c * dS @ K, c * dS.T @ Q, dV))

    verdict = check_attention_backward(colleagues)
    assert not verdict and "Hint" not in verdict.message and "alias" not in verdict.message

    def only_the_alias_fixed(dO, Q, K, V, mask):
        c = 1 / np.sqrt(Q.shape[-1])
        _, P = anp.scaled_dot_product_attention(Q, K, V, mask=mask)
        dP = dO @ np.swapaxes(V, -1, -2)
        dS = P * (dP - (dP * P).sum(axis=-1, keepdims=True))
        return np.stack((c * dS @ K, c * dS.T @ Q, np.swapaxes(P, -1, -2) @ dO))

    verdict = check_attention_backward(only_the_alias_fixed)  # right on one sequence, wrong on a batch
    assert not verdict and "batch" in verdict.message


def by_autograd_attention(dO, Q, K, V, mask):
    Qt, Kt, Vt = (torch.tensor(a, requires_grad=True) for a in (Q, K, V))
    m = None if mask is None else torch.tensor(mask)
    anp_out = torch.nn.functional.scaled_dot_product_attention(Qt, Kt, Vt, attn_mask=m)
    anp_out.backward(torch.tensor(dO))
    return np.stack([Qt.grad.numpy(), Kt.grad.numpy(), Vt.grad.numpy()])


def delegating_attention(dO, Q, K, V, mask):
    return np.stack(bp.attention_backward(dO, bp.attention_forward(Q, K, V, mask=mask)[1]))


def by_autograd_tied(ids, targets, E, gamma, eps):
    Et = torch.tensor(E, requires_grad=True)
    h = F.layer_norm(Et[torch.tensor(ids)], E.shape[-1:], torch.tensor(gamma), None, eps)
    F.cross_entropy((h @ Et.T).reshape(-1, E.shape[0]), torch.tensor(targets).reshape(-1)).backward()
    return Et.grad.numpy()


def delegating_tied(ids, targets, E, gamma, eps):
    x, c_emb = bp.embedding_forward(ids, E)
    h, c_ln = bp.layer_norm_forward(x, gamma, None, eps)
    z, c_head = bp.linear_forward(h, E.T)
    _, c_ce = bp.cross_entropy_forward(z, targets)
    dh, dET, _ = bp.linear_backward(bp.cross_entropy_backward(c_ce), c_head)
    return dET.T + bp.embedding_backward(bp.layer_norm_backward(dh, c_ln)[0], c_emb)


@pytest.mark.parametrize(("checker", "answer", "named"), [
    (check_attention_backward, delegating_attention, "attention_backward"),
    (check_attention_backward, by_autograd_attention, "torch.autograd.backward"),
    (check_tied_head_grad, delegating_tied, "_backward"),
    (check_tied_head_grad, by_autograd_tied, "torch.autograd.backward"),
], ids=["attention-package", "attention-autograd", "tied-package", "tied-autograd"])
def test_delegating_answers_are_refused_by_name(checker, answer, named):
    verdict = checker(answer)
    assert not verdict and named in verdict.message and "calls" in verdict.message


def test_a_query_with_no_key_is_checked():
    def nan_for_empty_rows(dO, Q, K, V, mask):
        out = by_hand_attention(dO, Q, K, V, mask)
        if mask is not None:
            empty = ~np.broadcast_to(mask, Q.shape[:-1] + (K.shape[-2],)).any(-1)  # (..., T_q)
            out[0][empty] = np.nan
        return out

    assert not check_attention_backward(nan_for_empty_rows)


def test_a_layer_norm_with_unbiased_variance_is_refused():
    # np.var's and torch.var's defaults differ; a learner who uses ddof=1 (torch.var's default) is wrong
    def unbiased(ids, targets, E, gamma, eps):
        return by_hand_tied(ids, targets, E, gamma, eps, ddof=1)

    assert not check_tied_head_grad(unbiased)


def test_a_hard_coded_eps_is_caught():
    def fixed_eps(ids, targets, E, gamma, eps):
        return by_hand_tied(ids, targets, E, gamma, 1e-5)

    assert not check_tied_head_grad(fixed_eps)


def test_forgetting_that_the_table_is_used_twice_is_named():
    def head_only(ids, targets, E, gamma, eps):
        h, _ = bp.layer_norm_forward(E[ids], gamma, None, eps)
        z = h @ E.T
        p = np.exp(z - z.max(-1, keepdims=True))
        p /= p.sum(-1, keepdims=True)
        dz = (p - np.eye(E.shape[0])[targets]) / ids.size
        return np.einsum("btv,btd->vd", dz, h)

    verdict = check_tied_head_grad(head_only)
    assert not verdict and "used twice" in verdict.message
