"""Checkers for the coding exercises of chapter 5 (queries, keys and values: three spaces)."""

from __future__ import annotations

import math

import numpy as np

from attnbook.exercises._harness import Case, Checker, Mistake
from attnbook.numpy import scaled_dot_product_attention, single_query_attention, softmax


def _params(rng, d_x, d_z, d_attn, d_out):
    return (
        rng.normal(size=(d_x, d_attn)), rng.normal(size=d_attn),
        rng.normal(size=(d_z, d_attn)), rng.normal(size=d_attn),
        rng.normal(size=(d_z, d_out)), rng.normal(size=d_out),
    )


def _single_cases() -> list[Case]:
    rng = np.random.default_rng(501)
    cases = []
    for d_x, d_z, d_attn, d_out, T in ((2, 2, 2, 2, 3), (3, 5, 4, 2, 6), (4, 3, 9, 1, 1), (6, 6, 16, 5, 8)):
        e, Z = rng.normal(size=d_x), rng.normal(size=(T, d_z))
        label = f"d_x={d_x}, d_z={d_z}, d_attn={d_attn}, d_out={d_out}, T={T}"
        cases.append(Case(label, (e, Z, *_params(rng, d_x, d_z, d_attn, d_out))))
    return cases


def _single(e, Z, W_q, b_q, W_k, b_k, W_v, b_v) -> np.ndarray:
    return single_query_attention(e, Z, W_q, b_q, W_k, b_k, W_v, b_v)[0]


def _unscaled(e, Z, W_q, b_q, W_k, b_k, W_v, b_v) -> np.ndarray:
    q, K, V = e @ W_q + b_q, Z @ W_k + b_k, Z @ W_v + b_v
    return softmax(K @ q) @ V


def _no_bias(e, Z, W_q, b_q, W_k, b_k, W_v, b_v) -> np.ndarray:
    q, K, V = e @ W_q, Z @ W_k, Z @ W_v
    return softmax(K @ q / math.sqrt(q.shape[0])) @ V


def _wrong_dim(e, Z, W_q, b_q, W_k, b_k, W_v, b_v) -> np.ndarray:
    q, K, V = e @ W_q + b_q, Z @ W_k + b_k, Z @ W_v + b_v
    return softmax(K @ q / math.sqrt(Z.shape[1])) @ V


check_single_query_attention = Checker(
    name="single_query_attention",
    doc="Check ``fn(e, Z, W_q, b_q, W_k, b_k, W_v, b_v) -> (d_out,)``: algorithm 3, row convention.",
    reference=_single,
    cases=_single_cases(),
    mistakes=(
        Mistake(_unscaled, "divide the scores by sqrt(d_attn), the size of the space where q and k live."),
        Mistake(_no_bias, "add the biases: q = e @ W_q + b_q, and likewise for the keys and values."),
        Mistake(_wrong_dim, "scale by sqrt(d_attn), the length of q, not by the context's d_z."),
    ),
)


def _column_cases() -> list[Case]:
    rng = np.random.default_rng(502)
    cases = []
    for d_k, d_v, T_q, T_k in ((2, 2, 2, 2), (4, 3, 5, 6), (8, 1, 1, 4), (3, 5, 7, 1)):
        Q, K, V = rng.normal(size=(d_k, T_q)), rng.normal(size=(d_k, T_k)), rng.normal(size=(d_v, T_k))
        cases.append(Case(f"Q ({d_k}, {T_q}), K ({d_k}, {T_k}), V ({d_v}, {T_k})", (Q, K, V)))
    return cases


def _columns(Q, K, V) -> np.ndarray:
    return scaled_dot_product_attention(Q.T, K.T, V.T)[0].T


def _softmax_rows(Q, K, V) -> np.ndarray:
    return V @ softmax(K.T @ Q / math.sqrt(Q.shape[0]), axis=1)


def _row_layout(Q, K, V) -> np.ndarray:
    return scaled_dot_product_attention(Q.T, K.T, V.T)[0]


check_attention_columns = Checker(
    name="attention_columns",
    doc="Check ``fn(Q, K, V) -> (d_v, T_q)``: scaled dot-product attention with one token per column.",
    reference=_columns,
    cases=_column_cases(),
    mistakes=(
        Mistake(_softmax_rows, "in the column convention each query is a column of K^T Q: softmax along axis=0."),
        Mistake(_row_layout, "return one column per query, shape (d_v, T_q): that is the column convention."),
    ),
)
