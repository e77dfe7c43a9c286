"""Checkers for the coding exercises of chapter 20 (attention at scale)."""

from __future__ import annotations

import math

import numpy as np

from attnbook.exercises._harness import Case, Checker, Mistake
from attnbook.numpy import online_softmax, scaled_dot_product_attention
from attnbook.torch import kv_cache_bytes


def _kv_keys_only(n_layers, n_kv_heads, d_head, n_tokens, bytes_per_value):
    return n_layers * n_kv_heads * d_head * n_tokens * bytes_per_value


def _kv_one_layer(n_layers, n_kv_heads, d_head, n_tokens, bytes_per_value):
    return 2 * n_kv_heads * d_head * n_tokens * bytes_per_value


def _kv_bits(n_layers, n_kv_heads, d_head, n_tokens, bytes_per_value):
    return 8 * kv_cache_bytes(n_layers, n_kv_heads, d_head, n_tokens, bytes_per_value)


check_kv_cache_bytes = Checker(
    name="kv_cache_bytes",
    doc="Check ``fn(n_layers, n_kv_heads, d_head, n_tokens, bytes_per_value) -> int``: bytes of a KV cache.",
    reference=kv_cache_bytes,
    cases=[Case(f"n_layers={a}, n_kv_heads={b}, d_head={c}, n_tokens={t}, bytes_per_value={s}", (a, b, c, t, s))
           for a, b, c, t, s in ((1, 1, 1, 1, 4), (12, 12, 64, 1, 2), (4, 2, 32, 100, 4), (80, 8, 128, 4096, 2))],
    mistakes=(
        Mistake(_kv_keys_only, "the cache keeps keys AND values: a factor 2."),
        Mistake(_kv_one_layer, "every layer has its own attention and its own cache: multiply by n_layers."),
        Mistake(_kv_bits, "count bytes, not bits: bytes_per_value is already in bytes."),
    ),
)


def _no_rescale(x):
    m, ell = -math.inf, 0.0
    for v in x:
        m = max(m, v)
        ell = ell + math.exp(v - m)  # the old terms are still relative to the old maximum
    return np.exp(np.asarray(x, dtype=np.float64) - m) / ell


def _no_max(x):
    e = np.exp(np.asarray(x, dtype=np.float64))
    return e / e.sum()


def _softmax_cases() -> list[Case]:
    rng = np.random.default_rng(2020)
    cases = [Case("x = [1, 2, 3]", (np.array([1.0, 2.0, 3.0]),)),
             Case("x = [3, 2, 1] (the maximum comes first)", (np.array([3.0, 2.0, 1.0]),)),
             Case("x = [1000, 1001, 999] (exp overflows without the maximum)", (np.array([1000.0, 1001.0, 999.0]),))]
    for n in (7, 40):
        cases.append(Case(f"random scores, n={n}, spread 20", (np.cumsum(rng.normal(size=n)) * 5,)))
    return cases


check_online_softmax = Checker(
    name="online_softmax",
    doc="Check ``fn(x) -> softmax(x)`` for a 1-D array, computed with a running maximum and sum.",
    reference=online_softmax,
    cases=_softmax_cases(),
    mistakes=(
        Mistake(_no_rescale, "when the running maximum grows from m to m', the sum so far was measured against m: "
                "multiply it by exp(m - m') before adding the new term."),
        Mistake(_no_max, "subtract the running maximum before exp, or large scores overflow to inf."),
    ),
    atol=1e-12,
    rtol=1e-10,
)


def _one_query(q, K, V, block_k):
    return scaled_dot_product_attention(q[None, :], K, V)[0][0]


def _blocks_rescaling(q, K, V, block_k, *, rescale_sum: bool, rescale_acc: bool):
    """Blockwise attention that forgets to rescale the running sum of weights, or of values, or both,
    when the maximum grows: the wrong answers the two flags pick out."""
    scale = 1.0 / math.sqrt(q.shape[0])
    m, ell, acc = -np.inf, 0.0, np.zeros(V.shape[1])
    for k0 in range(0, K.shape[0], block_k):
        s = K[k0:k0 + block_k] @ q * scale
        m_new = max(m, s.max())
        p, r = np.exp(s - m_new), math.exp(m - m_new)
        ell = (ell * r if rescale_sum else ell) + p.sum()
        acc = (acc * r if rescale_acc else acc) + p @ V[k0:k0 + block_k]
        m = m_new
    return acc / ell


def _blocks_no_rescale(q, K, V, block_k):
    return _blocks_rescaling(q, K, V, block_k, rescale_sum=False, rescale_acc=False)


def _blocks_sum_only(q, K, V, block_k):
    return _blocks_rescaling(q, K, V, block_k, rescale_sum=True, rescale_acc=False)


def _no_scale(q, K, V, block_k):
    return scaled_dot_product_attention(q[None, :], K, V, scale=1.0)[0][0]


def _query_cases() -> list[Case]:
    rng = np.random.default_rng(2022)
    cases = []
    for n, d, block, spread in ((5, 2, 2, 1.0), (12, 4, 5, 3.0), (33, 8, 8, 4.0), (20, 3, 1, 6.0)):
        q = rng.normal(size=d) * spread
        K, V = rng.normal(size=(n, d)) * spread, rng.normal(size=(n, 3))
        K[n // 2] = q * 2  # a late key that raises the maximum: the rescaling matters
        cases.append(Case(f"q of size {d}, {n} keys in blocks of {block}", (q, K, V, block)))
    return cases


check_blockwise_attention = Checker(
    name="blockwise_attention",
    doc="Check ``fn(q, K, V, block_k) -> (d_v,)``: one query's attention, keys read in blocks, online softmax.",
    reference=_one_query,
    cases=_query_cases(),
    mistakes=(
        Mistake(_blocks_no_rescale, "when the maximum grows, both running sums (the sum of weights and the weighted "
                "sum of values) were measured against the old maximum: multiply them by exp(m - m_new)."),
        Mistake(_blocks_sum_only, "rescale the weighted sum of values too, not only the sum of weights."),
        Mistake(_no_scale, "scale the scores by 1 / sqrt(d_k) as plain attention does."),
    ),
    atol=1e-10,
)
