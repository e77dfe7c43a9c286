"""Checkers for the coding exercises of chapter 8 (attention in parallel, cross-attention and masks)."""

from __future__ import annotations

import math

import numpy as np

from attnbook.exercises._harness import Case, Checker, Mistake
from attnbook.numpy import causal_mask, scaled_dot_product_attention, softmax
from attnbook.numpy.attention import masked_softmax


def _cases() -> list[Case]:
    rng = np.random.default_rng(801)
    cases = []
    for T_x, T_z, d_x, d_z, d_attn, d_out, kind in (
        (3, 3, 4, 4, 4, 4, "causal"), (4, 6, 3, 5, 4, 2, "random"), (5, 5, 6, 6, 8, 3, "causal"),
        (3, 4, 2, 3, 4, 2, "one query with no allowed key"),
    ):
        X, Z = rng.normal(size=(T_x, d_x)), rng.normal(size=(T_z, d_z))
        W_q, W_k, W_v = rng.normal(size=(d_x, d_attn)), rng.normal(size=(d_z, d_attn)), rng.normal(size=(d_z, d_out))
        if kind == "causal":
            mask = causal_mask(T_x, T_z)
        else:
            mask = rng.random((T_x, T_z)) > 0.4
            mask[:, 0] = True
            if kind.startswith("one query"):
                mask[1] = False
        cases.append(Case(f"X ({T_x}, {d_x}), Z ({T_z}, {d_z}), {kind} mask", (X, Z, W_q, W_k, W_v, mask)))
    return cases


def _reference(X, Z, W_q, W_k, W_v, mask) -> np.ndarray:
    return scaled_dot_product_attention(X @ W_q, Z @ W_k, Z @ W_v, mask=mask)[0]


def _parts(X, Z, W_q, W_k, W_v):
    Q, K, V = X @ W_q, Z @ W_k, Z @ W_v
    return Q @ K.T / math.sqrt(K.shape[1]), V


def _softmax(s: np.ndarray, axis: int) -> np.ndarray:
    # The mistakes' own softmax: the package's is forbidden to answers, and so cannot stand in for one.
    top = np.max(s, axis=axis, keepdims=True)
    e = np.exp(s - np.where(np.isfinite(top), top, 0.0))
    total = e.sum(axis=axis, keepdims=True)
    return np.divide(e, total, out=np.zeros_like(e), where=total > 0)


def _wrong_axis(X, Z, W_q, W_k, W_v, mask) -> np.ndarray:
    S, V = _parts(X, Z, W_q, W_k, W_v)
    return _softmax(np.where(mask, S, -np.inf), axis=0) @ V


def _mask_after(X, Z, W_q, W_k, W_v, mask) -> np.ndarray:
    S, V = _parts(X, Z, W_q, W_k, W_v)
    return np.where(mask, _softmax(S, axis=1), 0.0) @ V


def _big_negative(X, Z, W_q, W_k, W_v, mask) -> np.ndarray:
    S, V = _parts(X, Z, W_q, W_k, W_v)
    return _softmax(np.where(mask, S, -1e9), axis=1) @ V


check_masked_attention = Checker(
    name="masked_attention",
    doc="Check ``fn(X, Z, W_q, W_k, W_v, mask) -> (T_x, d_out)``: masked scaled dot-product attention.",
    reference=_reference,
    cases=_cases(),
    mistakes=(
        Mistake(_wrong_axis, "each query's weights (a row) must sum to 1: softmax along axis=1."),
        Mistake(_mask_after, "mask the scores before the softmax (set them to -inf), not the weights after it."),
        Mistake(_big_negative, "a query with no allowed key must attend to nothing (zero weights); filling "
                "with -1e9 spreads its weight evenly over the forbidden keys."),
    ),
    forbidden=(scaled_dot_product_attention, softmax, masked_softmax),
)


def _cache_causal(T_q: int, T_k: int) -> np.ndarray:
    return causal_mask(T_q, T_k)


def _aligned_at_start(T_q: int, T_k: int) -> np.ndarray:
    return np.tril(np.ones((T_q, T_k), dtype=bool))


def _excludes_itself(T_q: int, T_k: int) -> np.ndarray:
    return np.tril(np.ones((T_q, T_k), dtype=bool), k=T_k - T_q - 1)


def _offset_sign_flipped(T_q: int, T_k: int) -> np.ndarray:
    return np.tril(np.ones((T_q, T_k), dtype=bool), k=T_q - T_k)


def _future_allowed(T_q: int, T_k: int) -> np.ndarray:
    return np.triu(np.ones((T_q, T_k), dtype=bool), k=T_k - T_q)


check_cache_causal_mask = Checker(
    name="cache_causal_mask",
    doc="Check ``fn(T_q, T_k) -> (T_q, T_k)`` booleans: the causal mask of ``T_q`` new queries, the last ``T_q`` "
        "of ``T_k`` positions, against all ``T_k`` keys; True where allowed.",
    reference=_cache_causal,
    cases=[Case(f"T_q={T_q}, T_k={T_k}", (T_q, T_k)) for T_q, T_k in ((3, 7), (1, 5), (4, 4), (2, 3), (5, 9), (1, 1))],
    mistakes=(
        Mistake(_aligned_at_start, "the new queries are the last T_q positions, not the first: query i stands "
                                   "where key T_k - T_q + i stands."),
        Mistake(_excludes_itself, "a query may attend to its own position: the key at the same position is "
                                  "allowed."),
        Mistake(_offset_sign_flipped, "with more keys than queries each query sees more keys than its row "
                                      "number, not fewer: the diagonal moves right."),
        Mistake(_future_allowed, "True means allowed: a query may attend to the past and itself, the lower part."),
    ),
    forbidden=(causal_mask,),
)
