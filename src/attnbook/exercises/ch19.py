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
from attnbook.exercises._harness import COMPARED, Case, Checker, Mistake, Outcome, Problem
from attnbook.numpy import (
    MultiHeadParams,
    causal_mask,
    masked_softmax,
    merge_heads,
    scaled_dot_product_attention,
    split_heads,
)
from attnbook.numpy.backprop import (
    attention_backward,
    block_backward,
    cross_entropy_backward,
    embedding_backward,
    gelu_backward,
    gelu_forward,
    gpt_backward,
    gpt_loss_and_grads,
    layer_norm_backward,
    linear_backward,
    mha_backward,
    mha_forward,
    softmax_backward,
)

_BACKWARDS = (attention_backward, block_backward, cross_entropy_backward, embedding_backward, gelu_backward,
              gpt_backward, gpt_loss_and_grads, layer_norm_backward, linear_backward, mha_backward, softmax_backward,
              "torch.autograd.backward", "torch.autograd.grad", "torch.autograd.functional.vjp",
              "torch.func.grad", "torch.func.vjp")


def _variant(of: Callable[..., Any], variant: str) -> Callable[..., Any]:
    """The typical mistake ``variant`` of a by-hand computation ``of``, as a function of the exercise's arguments."""
    def mistake(*args):
        return of(*args, variant)
    mistake.__name__ = f"{of.__name__}_{variant}"
    return mistake


# --- the debugged multi-head self-attention: the gradient of its input -------------------------------------------

def _mha_dx(dout, X, params, n_heads, mask):
    # the package's backward pass: X is both the queries' and the keys' and values' input
    dX_q, dX_kv, _ = mha_backward(dout, mha_forward(X, X, MultiHeadParams(**params), n_heads, mask=mask)[1])
    return dX_q + dX_kv


def _mha_variant(dout, X, params, n_heads, mask, variant):
    """The input's gradient by hand, with the colleague's bugs named in ``variant`` left in: the typical mistakes."""
    q, k, v = (X @ params[f"W_{n}"] + params[f"b_{n}"] for n in "qkv")
    Q, K, V = (split_heads(a, n_heads) for a in (q, k, v))  # (..., h, T, d_head)
    if mask is not None and "mask" not in variant:
        mask = np.asarray(mask)[..., None, :, :]  # the same mask for every head
    heads, P = scaled_dot_product_attention(Q, K, V, mask=mask)
    dmerged = dout @ params["W_o"].T
    dheads = dmerged.reshape(heads.shape) if "reshape" in variant else split_heads(dmerged, n_heads)
    c = 1 / math.sqrt(Q.shape[-1])
    dP = dheads @ np.swapaxes(V, -1, -2)
    dS = P * (dP - (dP * P).sum(axis=-1, keepdims=True))
    dV = np.swapaxes(P, -1, -2) @ dheads
    dQ, dK = c * dS @ K, c * np.swapaxes(dS, -1, -2) @ Q
    paths = zip((dQ, dK, dV), "qkv", strict=True)
    return sum(merge_heads(g) @ params[f"W_{n}"].T for g, n in paths if variant != "query_only" or n == "q")


def _mha_cases() -> list[Case]:
    rng = np.random.default_rng(1902)
    cases = []
    for label, B, T, d_model, h, masking in (
            ("one sequence, T=4, d_model=4, one head, no mask", (), 4, 4, 1, None),
            ("batch of 2, T=5, d_model=8, 2 heads, causal mask (5, 5)", (2,), 5, 8, 2, "causal"),
            ("batch of 2, T=5, d_model=8, 2 heads, one mask per sequence (2, 5, 5), a query that sees no key",
             (2,), 5, 8, 2, "random"),
            ("batch of 3, T=4, d_model=12, 3 heads, key-padding mask (3, 1, 4)", (3,), 4, 12, 3, "padding")):
        params = vars(MultiHeadParams.init(d_model, seed=int(rng.integers(1 << 16))))
        X, dout = rng.normal(size=(*B, T, d_model)), rng.normal(size=(*B, T, d_model))
        mask = None
        if masking == "causal":
            mask = causal_mask(T)
        elif masking == "random":
            mask = rng.random((*B, T, T)) > 0.4
            mask[..., 0] = True
            mask[0, 2] = False  # query 2 of sequence 0 sees no key: zero weights, zero gradients
        elif masking == "padding":
            mask = np.ones((*B, 1, T), dtype=bool)
            mask[1, 0, -1:] = False
            mask[2, 0, -2:] = False
        cases.append(Case(label, (dout, X, params, h, mask)))
    return cases


check_mha_input_grad = Checker(
    name="mha_input_grad",
    allowed=(split_heads, merge_heads, scaled_dot_product_attention),  # the forward pass
    doc="Check ``fn(dout, X, params, n_heads, mask) -> dX`` (the shape of ``X``): the gradient of ``sum(dout * "
        "out)`` for multi-head self-attention ``out = anp.multi_head_attention(X, X, MultiHeadParams(**params), "
        "n_heads, mask)`` (``params`` a dict of the eight arrays ``W_q``, ``b_q``, ... ``b_o``), with ``mask`` "
        "broadcastable to ``(..., T, T)`` and shared by the heads, by hand (the package's backward passes and "
        "autograd are refused).",
    reference=_mha_dx,
    cases=_mha_cases(),
    mistakes=(
        Mistake(_variant(_mha_variant, "reshape"), "right with one head, wrong with two or more: follow the "
                "columns of each head in the merged gradient (..., T, d_model) on their way back to (..., h, T, "
                "d_head). Do they reach the head they came from?"),
        Mistake(_variant(_mha_variant, "mask"), "right with no mask and with one causal (T, T) mask, wrong with "
                "one mask per sequence: write the shape of the mask under the shape of the scores it is "
                "broadcast against, axis by axis."),
        Mistake(_variant(_mha_variant, "query_only"), "X makes the queries, the keys and the values: its "
                "gradient is the sum of what comes back along the three paths."),
    ),
    atol=1e-9,
    forbidden=_BACKWARDS,
)


# --- the tied head: lookup -> unit-length rows times g -> logits through the same table, soft-capped -> loss -------

def _tied_autograd(ids, targets, E, g, cap):
    E_t = torch.tensor(np.asarray(E, dtype=np.float64), requires_grad=True)
    x = E_t[torch.as_tensor(np.asarray(ids))]
    h = g * x / torch.linalg.vector_norm(x, dim=-1, keepdim=True)
    z = cap * torch.tanh(h @ E_t.T / cap)
    flat_targets = torch.as_tensor(np.asarray(targets)).reshape(-1)
    loss = torch.nn.functional.cross_entropy(z.reshape(-1, E_t.shape[0]), flat_targets)
    (dE,) = torch.autograd.grad(loss, E_t)
    return dE.numpy()


def _tied_grad(ids, targets, E, g, cap):
    return _tied_autograd(ids, targets, E, g, cap)


def _tied_variant(ids, targets, E, g, cap, variant):
    """The table's gradient by hand with one thing changed: the typical mistakes."""
    x = E[ids]  # (B, T, d)
    n = np.linalg.norm(x, axis=-1, keepdims=True)
    xhat = x / n
    h = g * xhat
    z = cap * np.tanh(h @ E.T / cap)
    p = np.exp(z - z.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    dz = (p - np.eye(E.shape[0])[targets]) / (1 if variant == "sum_not_mean" else ids.size)
    du = {"no_cap": dz, "cap_outer": dz * cap * (1 - (z / cap) ** 2)}.get(variant, dz * (1 - (z / cap) ** 2))
    head = np.einsum("btv,btd->vd", du, h)
    if variant == "head":
        return head
    dxhat = g * (du @ E)
    if variant == "norm_as_scale":  # treats the row's length as a constant
        dx = dxhat / n
    elif variant == "layer_norm_copied":  # cell 17's layer norm backward, with 1 / length for r
        dx = (dxhat - dxhat.mean(-1, keepdims=True) - xhat * (dxhat * xhat).mean(-1, keepdims=True)) / n
    else:
        dx = (dxhat - xhat * (dxhat * xhat).sum(-1, keepdims=True)) / n
    lookup = np.zeros_like(E)
    if variant == "no_repeats":  # dE[ids] += dx keeps one gradient per repeated id
        lookup[ids] += dx
    else:
        np.add.at(lookup, ids, dx)
    return lookup if variant == "lookup" else head + lookup


def _tied_cases() -> list[Case]:
    rng = np.random.default_rng(1903)
    cases = [Case("ids=[[0, 1]], targets=[[1, 0]], E=[[1, 0], [0, 1], [1, 1]], g=2, cap=1",
                  (np.array([[0, 1]]), np.array([[1, 0]]), np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]), 2.0, 1.0))]
    for B, T, V, d, g, cap in ((2, 5, 7, 4, 4.0, 3.0), (3, 4, 5, 6, 6.0, 2.5)):
        ids = rng.integers(0, V, size=(B, T))
        ids[0, :3] = 1  # a token that occurs several times
        cases.append(Case(f"random ids ({B}, {T}) with repeats, V={V}, d={d}, g={g:g}, cap={cap:g}",
                          (ids, rng.integers(0, V, size=(B, T)), rng.normal(size=(V, d)), g, cap)))
    return cases


check_tied_head_grad = Checker(
    name="tied_head_grad",
    doc="Check ``fn(ids, targets, E, g, cap) -> dE`` ``(V, d)``: the gradient, with respect to the tied table "
        "``E``, of the mean cross-entropy of the logits ``cap * tanh(h @ E.T / cap)``, where ``h = g * x / |x|`` "
        "normalises each looked-up row ``x = E[ids]`` to length ``g``, by hand (the package's backward passes "
        "and autograd are refused).",
    reference=_tied_grad,
    cases=_tied_cases(),
    mistakes=(
        Mistake(_variant(_tied_variant, "head"), "E is used twice: the logits reach it, and so does the lookup at "
                "the bottom; the gradient that flows down through the normalisation into the looked-up rows adds "
                "to it."),
        Mistake(_variant(_tied_variant, "lookup"), "the logits are computed with E as well: the unembedding's "
                "gradient adds to it."),
        Mistake(_variant(_tied_variant, "sum_not_mean"), "the loss is the mean over all B * T positions, not their "
                "sum."),
        Mistake(_variant(_tied_variant, "no_repeats"), "a token that occurs several times collects one gradient "
                "per occurrence."),
        Mistake(_variant(_tied_variant, "no_cap"), "the soft cap is a function of the raw logits too: its "
                "derivative multiplies what reaches them."),
        Mistake(_variant(_tied_variant, "cap_outer"), "cap * tanh(u / cap) has two factors of the cap in its "
                "derivative, the outer one and the chain rule's inner 1 / cap."),
        Mistake(_variant(_tied_variant, "norm_as_scale"), "the length |x| depends on x: dividing by it is more "
                "than a multiplication by 1 / |x| in the backward pass."),
        Mistake(_variant(_tied_variant, "layer_norm_copied"), "this is the layer norm's backward pass: it "
                "subtracts a mean the forward pass here never subtracted. Differentiate x / |x| itself."),
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


# --- cross-attention with a learned bias per distance, one intermediate at a time -----------------------------

# The intermediates, in the order the backward pass computes them, with what each is the gradient of.
CROSS_STEPS = {
    "dV": "the values V = M W_v",
    "dP": "the attention weights P",
    "dS": "the scores S = Q K^T / sqrt(d_k) + the distance bias",
    "drel": "the distance bias table rel",
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

    def _check_case(self, fn: Callable[..., Any], case: Case, forbidden: Sequence[Callable[..., Any]] = (),
                    hints: bool = True) -> Problem | None:
        problem = super()._check_case(fn, case, forbidden, hints)
        if problem is None or problem.outcome not in COMPARED | {Outcome.WRONG_FORM}:
            return problem
        wrt = case.args[-1]
        return Problem(problem.outcome, f"`{wrt}`, the gradient of {self.steps[wrt]}, is the first intermediate "
                                        f"that disagrees: {problem.text}")


def _rel_index(T_q: int, T_k: int, offset: bool = True) -> np.ndarray:
    """``(T_q, T_k)``: the entry of ``rel`` for query ``i`` and key ``j``, ``T_q - 1 + distance``, where the
    distance from key ``j`` to query ``i`` (at position ``T_k - T_q + i``) is ``T_k - T_q + i - j``."""
    i, j = np.arange(T_q)[:, None], np.arange(T_k)[None, :]
    return T_q - 1 + (T_k - T_q if offset else 0) + i - j


def _cross_autograd(dO, X, M, W_q, W_k, W_v, rel, mask) -> dict[str, np.ndarray]:
    leaves = [torch.tensor(np.asarray(a, dtype=np.float64), requires_grad=True) for a in (X, M, W_q, W_k, W_v, rel)]
    X_t, M_t, Wq, Wk, Wv, rel_t = leaves
    Q, K, V = X_t @ Wq, M_t @ Wk, M_t @ Wv
    S = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1]) + rel_t[torch.from_numpy(_rel_index(Q.shape[-2], K.shape[-2]))]
    m = None if mask is None else torch.from_numpy(np.asarray(mask, dtype=bool))
    P = at.masked_softmax(S, m)
    for t in (Q, K, V, S, P):
        t.retain_grad()
    (P @ V).backward(torch.from_numpy(np.asarray(dO, dtype=np.float64)))
    grads = {"dV": V.grad, "dP": P.grad, "dS": S.grad, "drel": rel_t.grad, "dQ": Q.grad, "dK": K.grad,
             "dX": X_t.grad, "dM": M_t.grad, "dW_q": Wq.grad, "dW_k": Wk.grad, "dW_v": Wv.grad}
    return {k: v.numpy() for k, v in grads.items()}


def _cross_grads(dO, X, M, W_q, W_k, W_v, rel, mask, wrt):
    return _cross_autograd(dO, X, M, W_q, W_k, W_v, rel, mask)[wrt]


def _cross_variant(dO, X, M, W_q, W_k, W_v, rel, mask, wrt, variant):
    """The intermediates by hand with one thing changed: the typical mistakes."""
    Q, K, V = X @ W_q, M @ W_k, M @ W_v
    T_q, T_k = Q.shape[-2], K.shape[-2]
    d_k, d_v = W_q.shape[1], W_v.shape[1]
    c = 1 / math.sqrt(d_v if variant == "scale_dv" else d_k)
    idx = _rel_index(T_q, T_k, offset=variant != "no_offset")
    S = c * Q @ np.swapaxes(K, -1, -2) + (0 if variant == "no_bias_forward" else rel[idx])
    P = masked_softmax(S, None if variant == "unmasked" else mask)
    dP = dO @ np.swapaxes(V, -1, -2)
    dS = P * (1 - P) * dP if variant == "diagonal" else P * (dP - (dP * P).sum(axis=-1, keepdims=True))
    per_pair = dS.reshape(-1, T_q, T_k)
    per_pair = per_pair.mean(0) if variant == "rel_mean" else per_pair.sum(0)
    drel = np.zeros_like(rel)
    np.add.at(drel, idx, per_pair * (c if variant == "rel_scaled" else 1))
    dQ, dK = c * dS @ K, c * np.swapaxes(dS, -1, -2) @ Q
    dV = np.swapaxes(P, -1, -2) @ dO
    via_K, via_V = dK @ W_k.T, dV @ W_v.T
    dM = {"memory_via_K": via_K, "memory_via_V": via_V}.get(variant, via_K + via_V)
    n = 1 if variant != "weights_mean" else X[..., 0, 0].size  # the number of sequences

    def shared(a, g):  # the gradient of a weight used at every position of every sequence
        return a.reshape(-1, a.shape[-1]).T @ g.reshape(-1, g.shape[-1]) / n

    grads = {"dV": dV, "dP": dP, "dS": dS, "drel": drel, "dQ": dQ, "dK": dK, "dX": dQ @ W_q.T, "dM": dM,
             "dW_q": shared(X, dQ), "dW_k": shared(M, dK), "dW_v": shared(M, dV)}
    return grads[wrt]


def _cross_cases() -> list[Case]:
    rng = np.random.default_rng(1905)
    configs = []
    for label, batch, T_q, T_k, d_k, d_v, masking in (
            ("one sequence, T_q=3, T_k=5, d_k=4, d_v=6, no mask", (), 3, 5, 4, 6, None),
            ("batch of 2, T_q=3, T_k=5, d_k=3, d_v=6, key-padding mask (2, 1, 5): 1 and 2 padded keys",
             (2,), 3, 5, 3, 6, "padding"),
            ("batch of 2, T_q=2, T_k=6, d_k=3, d_v=2, causal: query i sees keys up to position T_k - T_q + i",
             (2,), 2, 6, 3, 2, "causal"),
            ("batch (2, 3), T_q=4, T_k=6, d_k=2, d_v=3, mask (2, 3, 4, 6), key 4 masked for every query",
             (2, 3), 4, 6, 2, 3, "full")):
        d_x, d_m = d_k + 1, d_v + 1
        X, M = rng.normal(size=(*batch, T_q, d_x)), rng.normal(size=(*batch, T_k, d_m))
        W_q, W_k, W_v = rng.normal(size=(d_x, d_k)), rng.normal(size=(d_m, d_k)), rng.normal(size=(d_m, d_v))
        rel = rng.normal(size=T_q + T_k - 1)
        dO = rng.normal(size=(*batch, T_q, d_v))
        mask = None
        if masking == "padding":
            mask = np.ones((2, 1, T_k), dtype=bool)
            mask[0, 0, -1:] = False
            mask[1, 0, -2:] = False
        elif masking == "causal":
            mask = _rel_index(T_q, T_k) >= T_q - 1  # the key is not after the query
        elif masking == "full":
            mask = rng.random((*batch, T_q, T_k)) > 0.4
            mask[..., 1] = True  # every query sees at least one key
            mask[..., 4] = False  # no query sees key 4: its key and value get no gradient
        configs.append((label, (dO, X, M, W_q, W_k, W_v, rel, mask)))
    return [Case(f"wrt={wrt!r}, {label}", (*args, wrt)) for label, args in configs for wrt in CROSS_STEPS]


check_cross_attention_grads = _StepsChecker(
    name="cross_attention_grads",
    allowed=(masked_softmax,),  # the forward pass
    doc="Check ``fn(dO, X, M, W_q, W_k, W_v, rel, mask, wrt) -> the intermediate named wrt``: the backward pass of "
        "single-head cross-attention ``O = softmax(S) V`` with ``S = Q K^T / sqrt(d_k) + rel[T_k - 1 + i - j]`` "
        "(a learned bias per distance, query ``i`` at position ``T_k - T_q + i`` of the keys), ``Q = X W_q``, "
        "``K = M W_k``, ``V = M W_v`` and a boolean ``mask`` broadcastable to ``(..., T_q, T_k)``, given ``dO``; "
        "``wrt`` is one of ``CROSS_STEPS`` (dV, dP, dS, drel, dQ, dK, dX, dM, dW_q, dW_k, dW_v), checked in that "
        "order, by hand (the package's backward passes and autograd are refused).",
    reference=_cross_grads,
    cases=_cross_cases(),
    mistakes=(
        Mistake(_variant(_cross_variant, "no_bias_forward"), "the bias changes the scores, so it changes the "
                "weights P: add it before the softmax in the forward pass."),
        Mistake(_variant(_cross_variant, "no_offset"), "query i is not at position i: the T_q queries are the last "
                "T_q positions of the keys' sequence, at T_k - T_q + i."),
        Mistake(_variant(_cross_variant, "rel_scaled"), "the bias is added after the scaling: what reaches it is "
                "dS itself, without 1 / sqrt(d_k)."),
        Mistake(_variant(_cross_variant, "rel_mean"), "the table is shared by every sequence of the batch: its "
                "gradient sums theirs, it does not average them."),
        Mistake(_variant(_cross_variant, "scale_dv"), "the scores are divided by sqrt(d_k), the width of queries "
                "and keys, not by sqrt(d_v)."),
        Mistake(_variant(_cross_variant, "unmasked"), "the weights of the forward pass are the masked ones: "
                "compute them with the mask."),
        Mistake(_variant(_cross_variant, "diagonal"), "p * (1 - p) is only the diagonal of the softmax's "
                "Jacobian: use p * (dp - sum(dp * p)) along the keys."),
        Mistake(_variant(_cross_variant, "memory_via_K"), "M is used twice, for the keys and for the values: dM "
                "is the sum of what comes back through K and through V."),
        Mistake(_variant(_cross_variant, "memory_via_V"), "M is used twice, for the keys and for the values: dM "
                "is the sum of what comes back through K and through V."),
        Mistake(_variant(_cross_variant, "weights_mean"), "a weight used at every position of every sequence "
                "collects the sum of their gradients, not their mean."),
    ),
    atol=1e-9,
    forbidden=_BACKWARDS,
    steps=CROSS_STEPS,
)
