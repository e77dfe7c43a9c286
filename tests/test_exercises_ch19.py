"""Chapter 19's checkers accept a backward pass written by hand, refuse one that delegates to the package's
backward passes or to autograd, and reject wrong answers a learner would plausibly write."""

import sys

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import attnbook.numpy as anp
import attnbook.numpy.backprop as bp
from attnbook.exercises import (
    check_attention_backward,
    check_cross_attention_grads,
    check_swiglu_input_grad,
    check_tied_head_grad,
)


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


# --- SwiGLU's input gradient ---------------------------------------------------------------------------------

def by_hand_swiglu(dy, x, W1, W3, W2, second=None):
    a, b = x @ W1, x @ W3
    with np.errstate(over="ignore"):
        sig = 1 / (1 + np.exp(-a))
    dh = dy @ W2.T
    da = dh * b * sig * (1 + a * (1 - sig))
    db = dh * a * sig
    return da @ W1.T + db @ (W3 if second is None else second).T


def test_swiglu_by_hand_passes_and_each_mistake_gets_its_hint():
    assert check_swiglu_input_grad(by_hand_swiglu)
    for mistake in check_swiglu_input_grad.mistakes:
        verdict = check_swiglu_input_grad(mistake.fn)
        assert not verdict and mistake.hint in verdict.message


def test_swiglu_through_the_wrong_weight_is_refused():
    # a plausible slip: the up projection's path sent back through the gate's weights
    def wrong_weight(dy, x, W1, W3, W2):
        return by_hand_swiglu(dy, x, W1, W3, W2, second=W1)

    verdict = check_swiglu_input_grad(wrong_weight)
    assert not verdict and "wrong value" in verdict.message


def test_swiglu_overflow_is_checked():
    # the sigmoid as exp(a) / (1 + exp(a)) gives inf / inf = NaN at a = 800
    def naive(dy, x, W1, W3, W2):
        a, b = x @ W1, x @ W3
        sig = np.exp(a) / (1 + np.exp(a))
        dh = dy @ W2.T
        return (dh * b * sig * (1 + a * (1 - sig))) @ W1.T + (dh * a * sig) @ W3.T

    verdict = check_swiglu_input_grad(naive)
    assert not verdict and "NaN" in verdict.message and "overflows" in verdict.message


def swiglu_by_autograd(dy, x, W1, W3, W2):
    x_t = torch.tensor(x, requires_grad=True)
    y = (F.silu(x_t @ torch.tensor(W1)) * (x_t @ torch.tensor(W3))) @ torch.tensor(W2)
    y.backward(torch.tensor(dy))
    return x_t.grad.numpy()


def swiglu_by_the_package(dy, x, W1, W3, W2):
    a, b = x @ W1, x @ W3
    sig = 0.5 * (1 + np.tanh(a / 2))
    h, cache = bp.linear_forward(a * sig * b, W2, np.zeros(W2.shape[1]))
    dh = bp.linear_backward(dy, cache)[0]
    return (dh * b * sig * (1 + a * (1 - sig))) @ W1.T + (dh * a * sig) @ W3.T


# --- cross-attention, one intermediate at a time -------------------------------------------------------------

def by_hand_cross(dO, X, M, W_q, W_k, W_v, mask, wrt, change=None):
    Q, K, V = X @ W_q, M @ W_k, M @ W_v
    _, P = anp.scaled_dot_product_attention(Q, K, V, mask=mask)
    c = 1 / np.sqrt(Q.shape[-1])
    g = {"dV": np.swapaxes(P, -1, -2) @ dO, "dP": dO @ np.swapaxes(V, -1, -2)}
    g["dS"] = P * (g["dP"] - (g["dP"] * P).sum(-1, keepdims=True))
    g["dQ"], g["dK"] = c * g["dS"] @ K, c * np.swapaxes(g["dS"], -1, -2) @ Q
    g["dX"], g["dM"] = g["dQ"] @ W_q.T, g["dK"] @ W_k.T + g["dV"] @ W_v.T
    for name, a, out in (("dW_q", X, "dQ"), ("dW_k", M, "dK"), ("dW_v", M, "dV")):
        g[name] = np.einsum("...ti,...tj->...ij", a, g[out]).reshape(-1, a.shape[-1], g[out].shape[-1]).sum(0)
    if change is not None:
        g = change(g, locals())
    return g[wrt]


def test_cross_by_hand_passes_and_each_mistake_gets_its_hint():
    assert check_cross_attention_grads(by_hand_cross)
    for mistake in check_cross_attention_grads.mistakes:
        verdict = check_cross_attention_grads(mistake.fn)
        assert not verdict and mistake.hint in verdict.message
        assert "is the first intermediate that disagrees" in verdict.message


@pytest.mark.parametrize(("wrong", "change"), [
    ("dS", lambda g, v: {**g, "dS": g["dP"]}),  # the softmax's backward pass left out
    ("dK", lambda g, v: {**g, "dK": v["c"] * np.swapaxes(g["dS"], -1, -2) @ v["Q"] * 2}),
    ("dX", lambda g, v: {**g, "dX": g["dQ"] @ v["W_q"].T * 0}),  # a placeholder left in
    ("dW_v", lambda g, v: {**g, "dW_v": g["dW_v"] + 1e-3}),
], ids=["dS", "dK", "dX", "dW_v"])
def test_a_wrong_intermediate_is_named(wrong, change):
    def answer(*args):
        return by_hand_cross(*args, change=change)

    verdict = check_cross_attention_grads(answer)
    assert not verdict and verdict.message.startswith(f"cross_attention_grads: `{wrong}`, the gradient of")


def test_cross_weights_of_the_first_sequence_only_are_refused():
    # a plausible answer for one sequence that forgets the other sequences of the batch in the weights
    def first_sequence(dO, X, M, W_q, W_k, W_v, mask, wrt):
        if wrt == "dW_q":
            dQ = by_hand_cross(dO, X, M, W_q, W_k, W_v, mask, "dQ")
            return X.reshape(-1, *X.shape[-2:])[0].T @ dQ.reshape(-1, *dQ.shape[-2:])[0]
        return by_hand_cross(dO, X, M, W_q, W_k, W_v, mask, wrt)

    verdict = check_cross_attention_grads(first_sequence)
    assert not verdict and "`dW_q`" in verdict.message and "batch of 2" in verdict.message


def cross_by_autograd(dO, X, M, W_q, W_k, W_v, mask, wrt):
    leaves = [torch.tensor(a, requires_grad=True) for a in (X, M, W_q, W_k, W_v)]
    Q, K, V = leaves[0] @ leaves[2], leaves[1] @ leaves[3], leaves[1] @ leaves[4]
    for t in (Q, K, V):
        t.retain_grad()
    m = None if mask is None else torch.tensor(np.broadcast_to(mask, (*Q.shape[:-1], K.shape[-2])).copy())
    F.scaled_dot_product_attention(Q, K, V, attn_mask=m).backward(torch.tensor(dO))
    return {"dV": V.grad, "dQ": Q.grad, "dK": K.grad}.get(wrt, V.grad).numpy()


def cross_by_the_package(dO, X, M, W_q, W_k, W_v, mask, wrt):
    Q, K, V = X @ W_q, M @ W_k, M @ W_v
    dQ, dK, dV = bp.attention_backward(dO, bp.attention_forward(Q, K, V, mask=mask)[1])
    return by_hand_cross(dO, X, M, W_q, W_k, W_v, mask, wrt, change=lambda g, v: {**g, "dQ": dQ, "dK": dK, "dV": dV})


def test_cross_refuses_the_debug_exercise_answer(monkeypatch):
    # in the notebook, the Debug exercise's fixed `attention_backward` lives in the kernel's __main__
    def attention_backward(dO, Q, K, V, mask):
        dQ, dK, dV = bp.attention_backward(dO, bp.attention_forward(Q, K, V, mask=mask)[1])
        return dQ, dK, dV

    attention_backward.__module__, attention_backward.__qualname__ = "__main__", "attention_backward"
    monkeypatch.setattr(sys.modules["__main__"], "attention_backward", attention_backward, raising=False)

    def reuses_it(dO, X, M, W_q, W_k, W_v, mask, wrt):
        Q, K, V = X @ W_q, M @ W_k, M @ W_v
        sys.modules["__main__"].attention_backward(dO, Q, K, V, mask)
        return by_hand_cross(dO, X, M, W_q, W_k, W_v, mask, wrt)

    verdict = check_cross_attention_grads(reuses_it)
    assert not verdict and "calls `__main__.attention_backward`" in verdict.message


def test_cross_cases_have_distinct_shapes_and_a_key_no_query_sees():
    shapes = set()
    for case in check_cross_attention_grads.cases:
        dO, X, M, W_q, W_k, W_v, mask, wrt = case.args
        assert X.shape[-2] != M.shape[-2] and W_q.shape[1] != W_v.shape[1]  # T_q != T_k and d_k != d_v
        shapes.add(X.ndim)
        if wrt == "dK" and mask is not None and mask.shape[-2] > 1:
            dK = check_cross_attention_grads.reference(*case.args)
            assert np.all(dK[..., 4, :] == 0)  # the key no query may see gets no gradient
    assert shapes == {2, 3, 4}


@pytest.mark.parametrize(("checker", "answer", "named"), [
    (check_attention_backward, delegating_attention, "attention_backward"),
    (check_attention_backward, by_autograd_attention, "torch.autograd.backward"),
    (check_tied_head_grad, delegating_tied, "_backward"),
    (check_tied_head_grad, by_autograd_tied, "torch.autograd.backward"),
    (check_swiglu_input_grad, swiglu_by_autograd, "torch.autograd.backward"),
    (check_swiglu_input_grad, swiglu_by_the_package, "linear_backward"),
    (check_cross_attention_grads, cross_by_autograd, "torch.autograd.backward"),
    (check_cross_attention_grads, cross_by_the_package, "attention_backward"),
], ids=["attention-package", "attention-autograd", "tied-package", "tied-autograd", "swiglu-autograd",
        "swiglu-package", "cross-autograd", "cross-package"])
def test_delegating_answers_are_refused_by_name(checker, answer, named):
    verdict = checker(answer)
    assert not verdict and named in verdict.message and "calls" in verdict.message
