"""Checkers for the coding exercises of chapter 19 (backpropagation by hand).

Both exercises ask for a backward pass written by hand, so an answer that calls one of the package's
backward passes, or PyTorch's autograd, is refused: the chapter already shows that those agree.
"""

from __future__ import annotations

import numpy as np

from attnbook.exercises._harness import Case, Checker, Mistake
from attnbook.numpy import causal_mask
from attnbook.numpy.backprop import (
    attention_backward,
    attention_forward,
    block_backward,
    cross_entropy_backward,
    cross_entropy_forward,
    embedding_backward,
    embedding_forward,
    gpt_backward,
    gpt_loss_and_grads,
    layer_norm_backward,
    layer_norm_forward,
    linear_backward,
    linear_forward,
    mha_backward,
    softmax_backward,
)

_BACKWARDS = (attention_backward, block_backward, cross_entropy_backward, embedding_backward, gpt_backward,
              gpt_loss_and_grads, layer_norm_backward, linear_backward, mha_backward, softmax_backward,
              "torch.autograd.backward", "torch.autograd.grad", "torch.autograd.functional.vjp",
              "torch.func.grad", "torch.func.vjp")


def _attn_backward(dO, Q, K, V, mask):
    return np.stack(attention_backward(dO, attention_forward(Q, K, V, mask=mask)[1]))


def _attn_no_scale(dO, Q, K, V, mask):
    dQ, dK, dV = _attn_backward(dO, Q, K, V, mask)
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
    doc="Check ``fn(dO, Q, K, V, mask) -> np.stack((dQ, dK, dV))`` (``T_q = T_k``): attention's backward pass, "
        "by hand (the package's backward passes and autograd are refused).",
    reference=_attn_backward,
    cases=_attn_cases(),
    mistakes=(
        Mistake(_attn_no_scale, "the scores are Q K^T / sqrt(d): dQ and dK carry that factor too."),
        Mistake(_attn_diagonal_softmax, "p * (1 - p) is only the diagonal of the softmax's Jacobian: every weight "
                "depends on every score, so use p * (dp - sum(dp * p)) along the keys."),
        Mistake(_attn_unmasked, "the weights of the forward pass are the masked ones: compute them with the mask."),
    ),
    atol=1e-9,
    forbidden=_BACKWARDS,
)


# --- the tied head: embedding -> layer norm -> logits through the same table -> mean cross-entropy -----------

def _tied_grad(ids, targets, E, gamma, eps, variant=""):
    # The typical mistakes are variants of the reference, so that they too run inside it: the backward passes
    # they call are the package's own, which the checker refuses only in the learner's code.
    x, c_emb = embedding_forward(ids, E)  # (B, T, d)
    h, c_ln = layer_norm_forward(x, gamma, None, eps)
    z, c_head = linear_forward(h, E.T)  # (B, T, V): the same table unembeds
    _, c_ce = cross_entropy_forward(z, targets)
    dh, dET, _ = linear_backward(cross_entropy_backward(c_ce), c_head)
    head = dET.T
    if variant == "head":
        return head
    if variant == "ln_as_scale":  # treats the mean and the variance of each row as constants
        dx = dh * gamma * c_ln["rstd"]
    else:
        dx = layer_norm_backward(dh, c_ln)[0]
    if variant == "no_repeats":  # dE[ids] += dx keeps one gradient per repeated id
        out = head.copy()
        out[ids] += dx
        return out
    lookup = embedding_backward(dx, c_emb)
    return lookup if variant == "lookup" else head + lookup


def _tied_head_only(ids, targets, E, gamma, eps):
    return _tied_grad(ids, targets, E, gamma, eps, "head")


def _tied_lookup_only(ids, targets, E, gamma, eps):
    return _tied_grad(ids, targets, E, gamma, eps, "lookup")


def _tied_sum_not_mean(ids, targets, E, gamma, eps):
    return _tied_grad(ids, targets, E, gamma, eps) * np.asarray(targets).size


def _tied_no_repeats(ids, targets, E, gamma, eps):
    return _tied_grad(ids, targets, E, gamma, eps, "no_repeats")


def _tied_ln_as_scale(ids, targets, E, gamma, eps):
    return _tied_grad(ids, targets, E, gamma, eps, "ln_as_scale")


def _tied_cases() -> list[Case]:
    rng = np.random.default_rng(1903)
    cases = [Case("ids=[[0, 1]], targets=[[1, 0]], V=3, d=2, gamma=1",
                  (np.array([[0, 1]]), np.array([[1, 0]]), np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]),
                   np.ones(2), 1e-5))]
    for B, T, V, d, eps in ((2, 5, 7, 4, 1e-5), (3, 4, 5, 6, 1e-3)):
        ids = rng.integers(0, V, size=(B, T))
        ids[0, :3] = 1  # a token that occurs several times
        cases.append(Case(f"random ids ({B}, {T}) with repeats, V={V}, d={d}, eps={eps:g}",
                          (ids, rng.integers(0, V, size=(B, T)), rng.normal(size=(V, d)),
                           1 + 0.3 * rng.normal(size=d), eps)))
    return cases


check_tied_head_grad = Checker(
    name="tied_head_grad",
    doc="Check ``fn(ids, targets, E, gamma, eps) -> dE`` ``(V, d)``: the gradient of the mean cross-entropy of "
        "``LN(E[ids]) @ E.T`` (layer norm with ``gamma``, no ``beta``) with respect to the tied table ``E``, by hand.",
    reference=_tied_grad,
    cases=_tied_cases(),
    mistakes=(
        Mistake(_tied_head_only, "E is used twice: the logits reach it, and so does the lookup at the bottom; "
                "the gradient that flows down through the layer norm into the looked-up rows adds to it."),
        Mistake(_tied_lookup_only, "the logits are computed with E as well: the unembedding's gradient adds to it."),
        Mistake(_tied_sum_not_mean, "the loss is the mean over all B * T positions, not their sum."),
        Mistake(_tied_no_repeats, "a token that occurs several times collects one gradient per occurrence."),
        Mistake(_tied_ln_as_scale, "the mean and the variance of each row depend on that row: the layer norm's "
                "backward pass is more than a multiplication by gamma and 1 / sqrt(var + eps)."),
    ),
    atol=1e-9,
    forbidden=_BACKWARDS,
)
