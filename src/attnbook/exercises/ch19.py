"""Checkers for the coding exercises of chapter 19 (backpropagation by hand)."""

from __future__ import annotations

import numpy as np

from attnbook.exercises._harness import Case, Checker, Mistake
from attnbook.numpy import causal_mask
from attnbook.numpy.backprop import attention_backward, attention_forward, layer_norm_backward, layer_norm_forward


def _ln_backward(dy, x, gamma, eps):
    return layer_norm_backward(dy, layer_norm_forward(x, gamma, None, eps)[1])[0]


def _ln_through_xhat_only(dy, x, gamma, eps):
    # treats the mean and the variance as constants: forgets that they depend on x
    _, cache = layer_norm_forward(x, gamma, None, eps)
    return dy * gamma * cache["rstd"]


def _ln_mean_only(dy, x, gamma, eps):
    # remembers the mean but not the variance
    _, cache = layer_norm_forward(x, gamma, None, eps)
    dxhat = dy * gamma
    return cache["rstd"] * (dxhat - dxhat.mean(axis=-1, keepdims=True))


def _ln_no_gamma(dy, x, gamma, eps):
    return _ln_backward(dy, x, np.ones_like(gamma), eps)


def _ln_cases() -> list[Case]:
    rng = np.random.default_rng(1901)
    cases = [Case("dy=[[1, 0, 0, 0]], x=[[1, 2, 3, 4]], gamma=1",
                  (np.array([[1.0, 0.0, 0.0, 0.0]]), np.array([[1.0, 2.0, 3.0, 4.0]]), np.ones(4), 1e-5))]
    for shape in ((3, 5), (2, 3, 8)):
        cases.append(Case(f"random dy and x {shape}, random gamma",
                          (rng.normal(size=shape), rng.normal(size=shape) * 2 + 1, rng.normal(size=shape[-1]), 1e-5)))
    # small rows and a large eps: an answer that ignores its eps argument fails here
    cases.append(Case("random dy, x of scale 0.05 (4, 6), eps=1e-3",
                      (rng.normal(size=(4, 6)), rng.normal(size=(4, 6)) * 0.05, rng.normal(size=6), 1e-3)))
    return cases


check_layer_norm_backward = Checker(
    name="layer_norm_backward",
    doc="Check ``fn(dy, x, gamma, eps) -> dx``: the backward pass of layer norm (without beta) over the last axis.",
    reference=_ln_backward,
    cases=_ln_cases(),
    mistakes=(
        Mistake(_ln_through_xhat_only, "the mean and the variance depend on x too: subtract mean(dxhat) and "
                "xhat * mean(dxhat * xhat) before multiplying by rstd."),
        Mistake(_ln_mean_only, "you handled the mean; the variance depends on x as well: also subtract "
                "xhat * mean(dxhat * xhat)."),
        Mistake(_ln_no_gamma, "the gradient reaches xhat through gamma: start from dxhat = dy * gamma."),
    ),
    atol=1e-9,
)


def _attn_backward(dO, Q, K, V, mask):
    return np.stack(attention_backward(dO, attention_forward(Q, K, V, mask=mask)[1]))


def _attn_no_scale(dO, Q, K, V, mask):
    dQ, dK, dV = attention_backward(dO, attention_forward(Q, K, V, mask=mask)[1])
    c = np.sqrt(Q.shape[-1])
    return np.stack((dQ * c, dK * c, dV))


def _attn_diagonal_softmax(dO, Q, K, V, mask):
    # uses only the diagonal of the softmax's Jacobian, p * (1 - p)
    _, cache = attention_forward(Q, K, V, mask=mask)
    P, c = cache["P"], cache["scale"]
    dS = P * (1 - P) * (dO @ np.swapaxes(V, -1, -2))
    return np.stack((dS @ K * c, np.swapaxes(dS, -1, -2) @ Q * c, np.swapaxes(P, -1, -2) @ dO))


def _attn_unmasked(dO, Q, K, V, mask):
    return _attn_backward(dO, Q, K, V, None)


def _attn_cases() -> list[Case]:
    rng = np.random.default_rng(1902)
    cases = []
    for label, B, T, d, masked in (("one sequence, T=4, d=2, no mask", (), 4, 2, False),
                                   ("batch of 2, T=5, d=4, causal mask", (2,), 5, 4, True),
                                   ("batch of 2, T=6, d=8, random mask, one query with no key", (2,), 6, 8, "random")):
        Q, K, V, dO = (rng.normal(size=(*B, T, d)) for _ in range(4))
        mask = None
        if masked is True:
            mask = causal_mask(T)
        elif masked == "random":
            mask = rng.random((*B, T, T)) > 0.4
            mask[..., 0] = True
            mask[0, 2] = False  # query 2 of sequence 0 sees no key: zero weights, zero gradients
        cases.append(Case(label, (dO, Q, K, V, mask)))
    return cases


check_attention_backward = Checker(
    name="attention_backward",
    doc="Check ``fn(dO, Q, K, V, mask) -> np.stack((dQ, dK, dV))`` (``T_q = T_k``): attention's backward pass.",
    reference=_attn_backward,
    cases=_attn_cases(),
    mistakes=(
        Mistake(_attn_no_scale, "the scores are Q K^T / sqrt(d): dQ and dK carry that factor too."),
        Mistake(_attn_diagonal_softmax, "p * (1 - p) is only the diagonal of the softmax's Jacobian: every weight "
                "depends on every score, so use p * (dp - sum(dp * p)) along the keys."),
        Mistake(_attn_unmasked, "the weights of the forward pass are the masked ones: compute them with the mask."),
    ),
    atol=1e-9,
)
