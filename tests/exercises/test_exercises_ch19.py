"""Chapter 19's checkers accept a backward pass written by hand, refuse one that delegates to the package's
backward passes or to autograd, and reject wrong answers a learner would plausibly write."""

from types import SimpleNamespace

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import attnbook.numpy as anp
import attnbook.numpy.backprop as bp
import attnbook.torch as at
from attnbook.exercises import (
    check_cross_attention_grads,
    check_mha_input_grad,
    check_swiglu_input_grad,
    check_tied_head_grad,
)

# --- the Debug exercise: multi-head self-attention's input gradient -------------------------------------------


def by_hand_mha(dout, X, params, n_heads, mask, bugs=()):
    q, k, v = (X @ params[f"W_{n}"] + params[f"b_{n}"] for n in "qkv")
    Q, K, V = (anp.split_heads(a, n_heads) for a in (q, k, v))
    if mask is not None and "mask" not in bugs:
        mask = mask[..., None, :, :]
    heads, P = anp.scaled_dot_product_attention(Q, K, V, mask=mask)
    dmerged = dout @ params["W_o"].T
    dheads = dmerged.reshape(heads.shape) if "reshape" in bugs else anp.split_heads(dmerged, n_heads)
    c = 1 / np.sqrt(Q.shape[-1])
    dP = dheads @ np.swapaxes(V, -1, -2)
    dS = P * (dP - (dP * P).sum(axis=-1, keepdims=True))
    if "scale_d_model" in bugs:  # the scale of the whole width, not of one head's
        c = 1 / np.sqrt(X.shape[-1])
    dQ, dK, dV = c * dS @ K, c * np.swapaxes(dS, -1, -2) @ Q, np.swapaxes(P, -1, -2) @ dheads
    return sum(anp.merge_heads(g) @ params[f"W_{n}"].T for g, n in zip((dQ, dK, dV), "qkv", strict=True))


def test_mha_by_hand_passes_and_each_mistake_gets_its_hint():
    assert check_mha_input_grad(by_hand_mha)
    for mistake in check_mha_input_grad.mistakes:
        verdict = check_mha_input_grad(mistake.fn)
        assert not verdict and mistake.hint in verdict.message


@pytest.mark.parametrize(("bugs", "symptom"), [
    (("reshape",), "right with one head, wrong with two or more"),
    (("mask",), "right with no mask and with one causal (T, T) mask, wrong with one mask per sequence"),
    (("reshape", "mask"), "right with one head, wrong with two or more"),
], ids=["merge-reshape-left", "mask-axis-left", "both-left"])
def test_each_planted_bug_left_in_is_refused_with_its_symptom(bugs, symptom):
    # the colleague's code of the Debug exercise has both bugs; fixing one of them is not enough
    def answer(dout, X, params, n_heads, mask):
        return by_hand_mha(dout, X, params, n_heads, mask, bugs)

    verdict = check_mha_input_grad(answer)
    assert not verdict and symptom in verdict.message
    assert "split_heads" not in verdict.message and "None, :, :" not in verdict.message  # no fix spelled out


def test_the_cases_expose_each_bug_on_its_own():
    # one head without a mask hides both bugs; a causal mask hides the mask bug; B == h hides the mask bug's
    # broadcasting error, so it is a wrong value rather than an exception
    cases = check_mha_input_grad.cases
    assert cases[0].args[3] == 1 and cases[0].args[4] is None
    assert any(c.args[4] is not None and c.args[4].ndim == 2 for c in cases)
    assert any(c.args[4] is not None and c.args[4].ndim == 3 and c.args[4].shape[0] == c.args[3] for c in cases)


def test_mha_with_the_scale_of_the_whole_width_is_refused():
    # a plausible wrong answer of our own: 1 / sqrt(d_model) instead of 1 / sqrt(d_head)
    def answer(dout, X, params, n_heads, mask):
        return by_hand_mha(dout, X, params, n_heads, mask, ("scale_d_model",))

    verdict = check_mha_input_grad(answer)
    assert not verdict and "wrong value" in verdict.message and "2 heads" in verdict.message


def mha_by_autograd(dout, X, params, n_heads, mask):
    X_t = torch.tensor(X, requires_grad=True)
    weights = SimpleNamespace(**{k: torch.tensor(v) for k, v in params.items()})
    m = None if mask is None else torch.tensor(mask)
    at.multi_head_attention(X_t, X_t, weights, n_heads, mask=m)[0].backward(torch.tensor(dout))
    return X_t.grad.numpy()


def mha_by_the_package_attention(dout, X, params, n_heads, mask):
    q, k, v = (X @ params[f"W_{n}"] + params[f"b_{n}"] for n in "qkv")
    Q, K, V = (anp.split_heads(a, n_heads) for a in (q, k, v))
    m = None if mask is None else mask[..., None, :, :]
    dheads = anp.split_heads(dout @ params["W_o"].T, n_heads)
    dQ, dK, dV = bp.attention_backward(dheads, bp.attention_forward(Q, K, V, mask=m)[1])
    return sum(anp.merge_heads(g) @ params[f"W_{n}"].T for g, n in zip((dQ, dK, dV), "qkv", strict=True))


# --- the tied head: unit-length rows times g, logits soft-capped ----------------------------------------------

def by_hand_tied(ids, targets, E, g, cap, change=""):
    x = E[ids]
    n = np.sqrt((x**2).sum(-1, keepdims=True))
    xhat = x / n
    h = g * xhat
    t = np.tanh(h @ E.T / cap)
    z = cap * t
    p = np.exp(z - z.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    dz = (p - np.eye(E.shape[0])[targets]) / ids.size
    du = dz / cap * (1 - t**2) if change == "inner_only" else dz * (1 - t**2)
    dxhat = g * (du @ E)
    if change == "mean_norm":  # the row's root mean square taken for its length
        dx = (dxhat - xhat * (dxhat * xhat).mean(-1, keepdims=True)) / n
    else:
        dx = (dxhat - xhat * (dxhat * xhat).sum(-1, keepdims=True)) / n
    dE = np.einsum("btv,btd->vd", du, h)
    np.add.at(dE, ids, dx)
    return dE


def test_tied_by_hand_passes_and_each_mistake_gets_its_hint():
    assert check_tied_head_grad(by_hand_tied)
    for mistake in check_tied_head_grad.mistakes:
        verdict = check_tied_head_grad(mistake.fn)
        assert not verdict and mistake.hint in verdict.message


@pytest.mark.parametrize("change", ["inner_only", "mean_norm"])
def test_tied_plausible_slips_are_refused(change):
    # the cap's inner factor kept and the outer one lost; a projection with the mean instead of the sum
    def answer(ids, targets, E, g, cap):
        return by_hand_tied(ids, targets, E, g, cap, change)

    verdict = check_tied_head_grad(answer)
    assert not verdict and "wrong value" in verdict.message


def test_a_transcribed_layer_norm_backward_is_named():
    # cell 17's formula with 1 / |x| for r: the exercise is to derive the normalisation's own backward pass
    verdict = check_tied_head_grad(check_tied_head_grad.mistakes[7].fn)
    assert not verdict and "layer norm's backward pass" in verdict.message


def test_forgetting_that_the_table_is_used_twice_is_named():
    def head_only(ids, targets, E, g, cap):
        x = E[ids]
        h = g * x / np.linalg.norm(x, axis=-1, keepdims=True)
        t = np.tanh(h @ E.T / cap)
        p = np.exp(cap * t)
        p /= p.sum(-1, keepdims=True)
        du = (p - np.eye(E.shape[0])[targets]) / ids.size * (1 - t**2)
        return np.einsum("btv,btd->vd", du, h)

    verdict = check_tied_head_grad(head_only)
    assert not verdict and "used twice" in verdict.message


def by_autograd_tied(ids, targets, E, g, cap):
    Et = torch.tensor(E, requires_grad=True)
    x = Et[torch.tensor(ids)]
    z = cap * torch.tanh(g * F.normalize(x, dim=-1) @ Et.T / cap)
    F.cross_entropy(z.reshape(-1, E.shape[0]), torch.tensor(targets).reshape(-1)).backward()
    return Et.grad.numpy()


def delegating_tied(ids, targets, E, g, cap):
    x, c_emb = bp.embedding_forward(ids, E)
    n = np.linalg.norm(x, axis=-1, keepdims=True)
    h = g * x / n
    t = np.tanh(h @ E.T / cap)
    _, c_ce = bp.cross_entropy_forward(cap * t, targets)
    du = bp.cross_entropy_backward(c_ce) * (1 - t**2)
    dxhat = g * (du @ E)
    dx = (dxhat - x / n * (dxhat * x / n).sum(-1, keepdims=True)) / n
    return np.einsum("btv,btd->vd", du, h) + bp.embedding_backward(dx, c_emb)


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


# --- cross-attention with a distance bias, one intermediate at a time ------------------------------------------

def by_hand_cross(dO, X, M, W_q, W_k, W_v, rel, mask, wrt, change=None):
    Q, K, V = X @ W_q, M @ W_k, M @ W_v
    T_q, T_k = Q.shape[-2], K.shape[-2]
    idx = T_k - 1 + np.arange(T_q)[:, None] - np.arange(T_k)
    c = 1 / np.sqrt(Q.shape[-1])
    P = anp.masked_softmax(c * Q @ np.swapaxes(K, -1, -2) + rel[idx], mask)
    g = {"dV": np.swapaxes(P, -1, -2) @ dO, "dP": dO @ np.swapaxes(V, -1, -2)}
    g["dS"] = P * (g["dP"] - (g["dP"] * P).sum(-1, keepdims=True))
    g["drel"] = np.zeros_like(rel)
    np.add.at(g["drel"], np.broadcast_to(idx, g["dS"].shape), g["dS"])
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
    ("drel", lambda g, v: {**g, "drel": g["drel"][::-1]}),  # the table read with the distance's sign flipped
    ("drel", lambda g, v: {**g, "drel": np.bincount(v["idx"].ravel(), g["dS"].reshape(-1, v["idx"].size)[0],
                                                    minlength=v["rel"].size)}),  # the first sequence only
    ("dK", lambda g, v: {**g, "dK": v["c"] * np.swapaxes(g["dS"], -1, -2) @ v["Q"] * 2}),
    ("dX", lambda g, v: {**g, "dX": g["dQ"] @ v["W_q"].T * 0}),  # a placeholder left in
    ("dW_v", lambda g, v: {**g, "dW_v": g["dW_v"] + 1e-3}),
], ids=["dS", "drel-reversed", "drel-first-sequence", "dK", "dX", "dW_v"])
def test_a_wrong_intermediate_is_named(wrong, change):
    def answer(*args):
        return by_hand_cross(*args, change=change)

    verdict = check_cross_attention_grads(answer)
    assert not verdict and verdict.message.startswith(f"cross_attention_grads: `{wrong}`, the gradient of")


def test_cross_cases_have_distinct_shapes_and_a_key_no_query_sees():
    shapes = set()
    for case in check_cross_attention_grads.cases:
        dO, X, M, W_q, W_k, W_v, rel, mask, wrt = case.args
        assert X.shape[-2] != M.shape[-2] and W_q.shape[1] != W_v.shape[1]  # T_q != T_k and d_k != d_v
        assert rel.shape == (X.shape[-2] + M.shape[-2] - 1,)
        shapes.add(X.ndim)
        if wrt == "dK" and mask is not None and mask.ndim == 4:
            dK = check_cross_attention_grads.reference(*case.args)
            assert np.all(dK[..., 4, :] == 0)  # the key no query may see gets no gradient
    assert shapes == {2, 3, 4}


def cross_by_autograd(dO, X, M, W_q, W_k, W_v, rel, mask, wrt):
    leaves = [torch.tensor(a, requires_grad=True) for a in (X, M, W_q, W_k, W_v)]
    Q, K, V = leaves[0] @ leaves[2], leaves[1] @ leaves[3], leaves[1] @ leaves[4]
    V.retain_grad()
    m = None if mask is None else torch.tensor(np.broadcast_to(mask, (*Q.shape[:-1], K.shape[-2])).copy())
    F.scaled_dot_product_attention(Q, K, V, attn_mask=m).backward(torch.tensor(dO))
    return V.grad.numpy()


def cross_by_the_package(dO, X, M, W_q, W_k, W_v, rel, mask, wrt):
    def change(g, v):
        dP = dO @ np.swapaxes(v["V"], -1, -2)
        return {**g, "dS": bp.softmax_backward(dP, v["P"])}

    return by_hand_cross(dO, X, M, W_q, W_k, W_v, rel, mask, wrt, change=change)


@pytest.mark.parametrize(("checker", "answer", "named"), [
    (check_mha_input_grad, mha_by_autograd, "attnbook.torch.multihead.multi_head_attention"),
    (check_mha_input_grad, mha_by_the_package_attention, "attnbook.numpy.backprop.attention.attention_forward"),
    (check_tied_head_grad, delegating_tied, "attnbook.numpy.backprop.embedding.embedding_forward"),
    (check_tied_head_grad, by_autograd_tied, "torch.autograd.backward"),
    (check_swiglu_input_grad, swiglu_by_autograd, "torch.autograd.backward"),
    (check_swiglu_input_grad, swiglu_by_the_package, "attnbook.numpy.backprop.linear.linear_forward"),
    (check_cross_attention_grads, cross_by_autograd, "torch.autograd.backward"),
    (check_cross_attention_grads, cross_by_the_package, "softmax_backward"),
], ids=["mha-autograd", "mha-package", "tied-package", "tied-autograd", "swiglu-autograd", "swiglu-package",
        "cross-autograd", "cross-package"])
def test_delegating_answers_are_refused_by_name(checker, answer, named):
    verdict = checker(answer)
    assert not verdict and named in verdict.message and "calls" in verdict.message
