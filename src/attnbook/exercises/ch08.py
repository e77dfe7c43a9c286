"""Checkers for the coding exercises of chapter 8 (attention in parallel, cross-attention and masks)."""

from __future__ import annotations

import numpy as np

from attnbook.exercises._harness import Case, Checker, Mistake
from attnbook.numpy import causal_mask, combine_masks, padding_mask, scaled_dot_product_attention, softmax
from attnbook.numpy.attention import masked_softmax

# --- a padded batch that leaks -----------------------------------------------------------------------------


def _padded_cases() -> list[Case]:
    rng = np.random.default_rng(801)
    cases = []
    # T differs from d_attn in every case, so that a scale by the wrong axis shows.
    for lengths, T, d_x, d_attn, d_out in (((6, 4), 6, 4, 8, 3), ((3,), 3, 5, 4, 2), ((5, 0, 2), 5, 3, 2, 4),
                                           ((1, 7, 4, 7), 7, 6, 16, 5), ((0,), 2, 2, 3, 2)):
        X = rng.normal(size=(len(lengths), T, d_x))
        W_q, W_k, W_v = rng.normal(size=(d_x, d_attn)), rng.normal(size=(d_x, d_attn)), rng.normal(size=(d_x, d_out))
        X[np.arange(T)[None, :] >= np.array(lengths)[:, None]] = 50.0 * rng.normal(size=d_x)  # loud padding
        cases.append(Case(f"X ({len(lengths)}, {T}, {d_x}), lengths {list(lengths)}, d_attn={d_attn}",
                          (X, np.array(lengths), W_q, W_k, W_v)))
    return cases


def _padded_reference(X, lengths, W_q, W_k, W_v) -> np.ndarray:
    mask = padding_mask(lengths, X.shape[1])  # (B, 1, T): the padded keys hidden from every query
    return scaled_dot_product_attention(X @ W_q, X @ W_k, X @ W_v, mask=mask)[0]


def _softmax(s: np.ndarray) -> np.ndarray:
    # The mistakes' own softmax over the last axis, zero for a row with no allowed entry: the package's is
    # forbidden to answers, and so cannot stand in for one.
    top = np.max(s, axis=-1, keepdims=True)
    e = np.exp(s - np.where(np.isfinite(top), top, 0.0))
    total = e.sum(axis=-1, keepdims=True)
    return np.divide(e, total, out=np.zeros_like(e), where=total > 0)


def _attend(X, lengths, W_q, W_k, W_v, *, scale_axis=-1, real_on="keys", fill=-np.inf, guard=True):
    Q, K, V = X @ W_q, X @ W_k, X @ W_v
    s = Q @ K.swapaxes(-1, -2) / np.sqrt(K.shape[scale_axis])
    T = X.shape[1]
    keys = np.arange(T)[None, None, :] < lengths[:, None, None]
    queries = np.arange(T)[None, :, None] < lengths[:, None, None]
    allowed = {"keys": keys, "queries": queries, "both": keys & queries}[real_on]
    s = np.where(allowed, s, fill)
    if guard:
        return _softmax(s) @ V
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True) @ V


def _as_given(X, lengths, W_q, W_k, W_v):
    return _attend(X, lengths, W_q, W_k, W_v, scale_axis=1, real_on="queries", guard=False)


def _scaled_by_length(X, lengths, W_q, W_k, W_v):
    return _attend(X, lengths, W_q, W_k, W_v, scale_axis=1)


def _queries_masked(X, lengths, W_q, W_k, W_v):
    return _attend(X, lengths, W_q, W_k, W_v, real_on="queries")


def _queries_masked_unguarded(X, lengths, W_q, W_k, W_v):
    return _attend(X, lengths, W_q, W_k, W_v, real_on="queries", guard=False)


def _both_masked(X, lengths, W_q, W_k, W_v):
    return _attend(X, lengths, W_q, W_k, W_v, real_on="both")


def _empty_gives_nan(X, lengths, W_q, W_k, W_v):
    return _attend(X, lengths, W_q, W_k, W_v, guard=False)


def _big_negative(X, lengths, W_q, W_k, W_v):
    return _attend(X, lengths, W_q, W_k, W_v, fill=-1e9)


check_padded_attention = Checker(
    name="padded_attention",
    doc="Check ``fn(X, lengths, W_q, W_k, W_v) -> (B, T, d_v)``: scaled dot-product self-attention over a batch "
        "``X`` ``(B, T, d_x)`` of sequences padded at the end, sequence ``b`` having ``lengths[b]`` real tokens; "
        "every query, padded ones too, attends to the real keys only; a sequence of length 0 gives zeros.",
    reference=_padded_reference,
    cases=_padded_cases(),
    mistakes=(
        Mistake(_as_given, "this is the module as given: both its bugs are still there. Run it on one sequence "
                "alone and padded, and look at which of its arrays has a length-dependent shape or axis."),
        Mistake(_scaled_by_length, "in a batch, K.shape[1] is the number of positions T, not the key width d_k: "
                "scale by 1/sqrt(d_k), the last axis, or the scores change with the padding's length."),
        Mistake(_queries_masked, "the padding mask must hide padded *keys*, the last axis of the scores "
                "(shape (B, 1, T)); hiding padded queries (shape (B, T, 1)) lets every real query read the "
                "padding."),
        Mistake(_queries_masked_unguarded, "the padding mask must hide padded *keys*, the last axis of the "
                "scores (shape (B, 1, T)); hiding padded queries (shape (B, T, 1)) lets every real query read "
                "the padding, and leaves the padded queries with no key at all, hence NaN."),
        Mistake(_both_masked, "a padded query is not hidden: it attends to the real keys like any other "
                "query (later layers carry its output along, the loss ignores it). Mask the keys only."),
        Mistake(_empty_gives_nan, "a sequence of length 0 leaves its queries no allowed key: exp(-inf - (-inf)) "
                "is NaN. Such a query attends to nothing: zero weights and a zero output."),
        Mistake(_big_negative, "a query with no allowed key must attend to nothing (zero output); filling with "
                "-1e9 spreads its weight evenly over the padding."),
    ),
    forbidden=(scaled_dot_product_attention, softmax, masked_softmax, padding_mask, combine_masks,
               "torch.nn.functional.scaled_dot_product_attention", "torch.nn.functional.softmax", "torch.softmax",
               "scipy.special.softmax"),
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
