"""Checkers for the coding exercises of chapter 19 (backpropagation by hand).

Every exercise asks for a backward pass written by hand, so an answer that calls one of the package's
backward passes, or PyTorch's autograd, is refused: the chapter already shows that those agree.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

import attnbook.torch as at
from attnbook.exercises._harness import _NOT_ATTEMPTED, Case, Checker, Mistake
from attnbook.numpy import causal_mask
from attnbook.numpy.backprop import (
    attention_backward,
    attention_forward,
    block_backward,
    cross_entropy_backward,
    cross_entropy_forward,
    embedding_backward,
    embedding_forward,
    gelu_backward,
    gelu_forward,
    gpt_backward,
    gpt_loss_and_grads,
    layer_norm_backward,
    layer_norm_forward,
    linear_backward,
    linear_forward,
    mha_backward,
    softmax_backward,
)

_BACKWARDS = (attention_backward, block_backward, cross_entropy_backward, embedding_backward, gelu_backward,
              gpt_backward, gpt_loss_and_grads, layer_norm_backward, linear_backward, mha_backward, softmax_backward,
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


# --- the SwiGLU feed-forward: the gradient of its input -----------------------------------------------------

def _swiglu_dx(dy, x, W1, W3, W2):
    # autograd through the package's swiglu, (silu(x W1) * (x W3)) W2, in float64
    x_t = torch.tensor(np.asarray(x, dtype=np.float64), requires_grad=True)
    weights = (torch.as_tensor(np.asarray(w, dtype=np.float64)) for w in (W1, W3, W2))
    (dx,) = torch.autograd.grad(at.swiglu(x_t, *weights), x_t, torch.as_tensor(np.asarray(dy, dtype=np.float64)))
    return dx.numpy()


def _swiglu_variant(dy, x, W1, W3, W2, variant):
    """The gradient of x by hand with one thing changed: the typical mistakes."""
    a, b = x @ W1, x @ W3
    with np.errstate(over="ignore", invalid="ignore"):
        sig = np.exp(a) / (1 + np.exp(a)) if variant == "naive" else 0.5 * (1 + np.tanh(a / 2))
    # GELU's slope by a complex step: gelu(a + ih) = gelu(a) + ih gelu'(a) + O(h^2), exact in float64 for tiny h
    slopes = {"sigma": sig, "sigmoid_slope": sig * (1 - sig),
              "gelu": gelu_forward(a + 1e-30j)[0].imag / 1e-30 if variant == "gelu" else None}
    slope = slopes.get(variant, sig * (1 + a * (1 - sig)))  # d/da of a sigmoid(a)
    dh = dy @ W2.T
    da = dh * slope * (1 if variant == "no_b" else b)
    db = dh * (sig if variant == "db_sigma" else a * sig)
    return da @ W1.T if variant == "gate_only" else da @ W1.T + db @ W3.T


def _variant(of: Callable[..., Any], variant: str) -> Callable[..., Any]:
    """The typical mistake ``variant`` of a by-hand computation ``of``, as a function of the exercise's arguments."""
    def mistake(*args):
        return of(*args, variant)
    mistake.__name__ = f"{of.__name__}_{variant}"
    return mistake


def _swiglu_mistake(variant: str) -> Callable[..., Any]:
    return _variant(_swiglu_variant, variant)


def _swiglu_cases() -> list[Case]:
    rng = np.random.default_rng(1904)
    x = np.array([[800.0, -800.0], [0.5, -1.0]])  # the gate's pre-activations reach +-800: exp overflows
    W1 = np.array([[1.0, 0.0, -0.5], [0.0, 1.0, 0.25]])
    cases = [Case("x (2, 2), d_ff=3, gate pre-activations of +-800 (exp overflows there)",
                  (np.array([[1.0, -1.0], [0.5, 2.0]]), x, W1, np.array([[1e-3, 2e-3, -1e-3], [3e-3, -2e-3, 1e-3]]),
                   np.array([[1.0, -2.0], [0.5, 1.0], [-1.0, 0.25]])))]
    for shape, d_model, d_ff in (((2, 4), 5, 7), ((3,), 6, 4)):
        cases.append(Case(f"x {(*shape, d_model)}, d_ff={d_ff}, random",
                          (rng.normal(size=(*shape, d_model)), 1.5 * rng.normal(size=(*shape, d_model)),
                           rng.normal(size=(d_model, d_ff)), rng.normal(size=(d_model, d_ff)) / np.sqrt(d_model),
                           rng.normal(size=(d_ff, d_model)) / np.sqrt(d_ff))))
    return cases


check_swiglu_input_grad = Checker(
    name="swiglu_input_grad",
    doc="Check ``fn(dy, x, W1, W3, W2) -> dx`` (the shape of ``x``): the gradient of ``sum(dy * y)`` with respect "
        "to ``x``, for SwiGLU's ``y = (silu(x W1) * (x W3)) W2`` and ``silu(a) = a * sigmoid(a)``, by hand "
        "(the package's backward passes and autograd are refused).",
    reference=_swiglu_dx,
    cases=_swiglu_cases(),
    mistakes=(
        Mistake(_swiglu_mistake("sigma"), "silu(a) = a * sigmoid(a) is a product: its derivative is sigmoid(a) + "
                "a * sigmoid'(a), not sigmoid(a) alone."),
        Mistake(_swiglu_mistake("sigmoid_slope"), "sigmoid(a) * (1 - sigmoid(a)) is the sigmoid's derivative; "
                "silu(a) = a * sigmoid(a) also has the product rule's other term."),
        Mistake(_swiglu_mistake("gelu"), "the gate is SiLU, a * sigmoid(a), not the GPT's GELU."),
        Mistake(_swiglu_mistake("no_b"), "h = silu(a) * b: what reaches silu(a) is dh times the other factor, b."),
        Mistake(_swiglu_mistake("db_sigma"), "b = x W3 is multiplied by silu(a) = a * sigmoid(a), not by "
                "sigmoid(a): that is the gradient reaching b."),
        Mistake(_swiglu_mistake("gate_only"), "x feeds both a = x W1 and b = x W3: its gradient is the sum of what "
                "comes back through each."),
        Mistake(_swiglu_mistake("naive"), "exp(a) overflows to inf for large a, and inf / inf is NaN: written as "
                "1 / (1 + exp(-a)), the sigmoid tends to 0 and 1 without NaN."),
    ),
    atol=1e-9,
    forbidden=_BACKWARDS,
)


# --- cross-attention's backward pass, one intermediate at a time ----------------------------------------------

# The intermediates, in the order the backward pass computes them, with what each is the gradient of.
CROSS_STEPS = {
    "dV": "the values V = M W_v",
    "dP": "the attention weights P",
    "dS": "the scaled scores S = Q K^T / sqrt(d_k)",
    "dQ": "the queries Q = X W_q",
    "dK": "the keys K = M W_k",
    "dX": "the queries' input X",
    "dM": "the memory M",
    "dW_q": "W_q",
    "dW_k": "W_k",
    "dW_v": "W_v",
}


@dataclass(repr=False)
class _StepsChecker(Checker):
    """A ``Checker`` whose cases each ask for one named intermediate (the last argument, ``wrt``), in the order the
    computation makes them: the verdict names the first one that disagrees, and what it is the gradient of."""

    steps: dict[str, str] | None = None

    def _check_case(self, fn: Callable[..., Any], case: Case, forbidden: Sequence[Callable[..., Any]] = ()
                    ) -> str | None:
        problem = super()._check_case(fn, case, forbidden)
        if problem is None or problem == _NOT_ATTEMPTED or not problem.startswith(("wrong value", "returned")):
            return problem
        wrt = case.args[-1]
        return f"`{wrt}`, the gradient of {self.steps[wrt]}, is the first intermediate that disagrees: {problem}"


def _cross_autograd(dO, X, M, W_q, W_k, W_v, mask) -> dict[str, np.ndarray]:
    leaves = [torch.tensor(np.asarray(a, dtype=np.float64), requires_grad=True) for a in (X, M, W_q, W_k, W_v)]
    X_t, M_t, Wq, Wk, Wv = leaves
    Q, K, V = X_t @ Wq, M_t @ Wk, M_t @ Wv
    for t in (Q, K, V):
        t.retain_grad()
    m = None if mask is None else torch.from_numpy(np.asarray(mask, dtype=bool))
    out, P = at.scaled_dot_product_attention(Q, K, V, mask=m)
    P.retain_grad()
    out.backward(torch.from_numpy(np.asarray(dO, dtype=np.float64)))
    # The scores are not kept by the package's attention: the masked softmax's own gradient, given dP, is dS.
    S = (Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])).detach().requires_grad_()
    (dS,) = torch.autograd.grad(at.masked_softmax(S, m), S, P.grad)
    grads = {"dV": V.grad, "dP": P.grad, "dS": dS, "dQ": Q.grad, "dK": K.grad, "dX": X_t.grad, "dM": M_t.grad,
             "dW_q": Wq.grad, "dW_k": Wk.grad, "dW_v": Wv.grad}
    return {k: v.numpy() for k, v in grads.items()}


def _cross_grads(dO, X, M, W_q, W_k, W_v, mask, wrt):
    return _cross_autograd(dO, X, M, W_q, W_k, W_v, mask)[wrt]


def _cross_variant(dO, X, M, W_q, W_k, W_v, mask, wrt, variant):
    """The intermediates by hand with one thing changed: the typical mistakes."""
    Q, K, V = X @ W_q, M @ W_k, M @ W_v
    d_k, d_v = W_q.shape[1], W_v.shape[1]
    c = 1 / math.sqrt(d_v if variant == "scale_dv" else d_k)
    P = attention_forward(Q, K, V, mask=None if variant == "unmasked" else mask, scale=c)[1]["P"]
    dP = dO @ np.swapaxes(V, -1, -2)
    dS = P * (1 - P) * dP if variant == "diagonal" else P * (dP - (dP * P).sum(axis=-1, keepdims=True))
    if variant == "scale_dv_backward":
        c = 1 / math.sqrt(d_v)
    dQ, dK = c * dS @ K, c * np.swapaxes(dS, -1, -2) @ Q
    dV = np.swapaxes(P, -1, -2) @ dO
    via_K, via_V = dK @ W_k.T, dV @ W_v.T
    dM = {"memory_via_K": via_K, "memory_via_V": via_V}.get(variant, via_K + via_V)
    n = 1 if variant != "weights_mean" else X[..., 0, 0].size  # the number of sequences

    def shared(a, g):  # the gradient of a weight used at every position of every sequence
        return a.reshape(-1, a.shape[-1]).T @ g.reshape(-1, g.shape[-1]) / n

    grads = {"dV": dV, "dP": dP, "dS": dS, "dQ": dQ, "dK": dK, "dX": dQ @ W_q.T, "dM": dM,
             "dW_q": shared(X, dQ), "dW_k": shared(M, dK), "dW_v": shared(M, dV)}
    return grads[wrt]


def _cross_mistake(variant: str) -> Callable[..., Any]:
    return _variant(_cross_variant, variant)


def _cross_cases() -> list[Case]:
    rng = np.random.default_rng(1905)
    configs = []
    for label, batch, T_q, T_k, d_k, d_v, masking in (
            ("one sequence, T_q=3, T_k=5, d_k=4, d_v=6, no mask", (), 3, 5, 4, 6, None),
            ("batch of 2, T_q=3, T_k=5, d_k=4, d_v=6, key-padding mask (2, 1, 5): 1 and 2 padded keys",
             (2,), 3, 5, 4, 6, "padding"),
            ("batch (2, 3), T_q=4, T_k=6, d_k=2, d_v=3, mask (2, 3, 4, 6), key 4 masked for every query",
             (2, 3), 4, 6, 2, 3, "full")):
        d_x, d_m = d_k + 1, d_v + 1
        X, M = rng.normal(size=(*batch, T_q, d_x)), rng.normal(size=(*batch, T_k, d_m))
        W_q, W_k, W_v = rng.normal(size=(d_x, d_k)), rng.normal(size=(d_m, d_k)), rng.normal(size=(d_m, d_v))
        dO = rng.normal(size=(*batch, T_q, d_v))
        mask = None
        if masking == "padding":
            mask = np.ones((2, 1, T_k), dtype=bool)
            mask[0, 0, -1:] = False
            mask[1, 0, -2:] = False
        elif masking == "full":
            mask = rng.random((*batch, T_q, T_k)) > 0.4
            mask[..., 1] = True  # every query sees at least one key
            mask[..., 4] = False  # no query sees key 4: its key and value get no gradient
        configs.append((label, (dO, X, M, W_q, W_k, W_v, mask)))
    return [Case(f"wrt={wrt!r}, {label}", (*args, wrt)) for label, args in configs for wrt in CROSS_STEPS]


check_cross_attention_grads = _StepsChecker(
    name="cross_attention_grads",
    doc="Check ``fn(dO, X, M, W_q, W_k, W_v, mask, wrt) -> the intermediate named wrt``: the backward pass of "
        "single-head cross-attention ``O = softmax(Q K^T / sqrt(d_k)) V`` with ``Q = X W_q``, ``K = M W_k``, "
        "``V = M W_v`` and a boolean ``mask`` broadcastable to ``(..., T_q, T_k)``, given ``dO``; ``wrt`` is one "
        "of ``CROSS_STEPS`` (dV, dP, dS, dQ, dK, dX, dM, dW_q, dW_k, dW_v), checked in that order, by hand "
        "(the package's backward passes, autograd and the chapter's ``attention_backward`` are refused).",
    reference=_cross_grads,
    cases=_cross_cases(),
    mistakes=(
        Mistake(_cross_mistake("scale_dv"), "the scores are divided by sqrt(d_k), the width of queries and keys, "
                "not by sqrt(d_v)."),
        Mistake(_cross_mistake("scale_dv_backward"), "S = Q K^T / sqrt(d_k): dQ and dK carry 1 / sqrt(d_k), the "
                "scale of the forward pass, not 1 / sqrt(d_v)."),
        Mistake(_cross_mistake("unmasked"), "the weights of the forward pass are the masked ones: compute them "
                "with the mask."),
        Mistake(_cross_mistake("diagonal"), "p * (1 - p) is only the diagonal of the softmax's Jacobian: use "
                "p * (dp - sum(dp * p)) along the keys."),
        Mistake(_cross_mistake("memory_via_K"), "M is used twice, for the keys and for the values: dM is the sum "
                "of what comes back through K and through V."),
        Mistake(_cross_mistake("memory_via_V"), "M is used twice, for the keys and for the values: dM is the sum "
                "of what comes back through K and through V."),
        Mistake(_cross_mistake("weights_mean"), "a weight used at every position of every sequence collects the "
                "sum of their gradients, not their mean."),
    ),
    atol=1e-9,
    forbidden=(*_BACKWARDS, "__main__.attention_backward"),
    steps=CROSS_STEPS,
)
