"""Checkers for the coding exercises of chapter 5 (queries, keys and values: three spaces)."""

from __future__ import annotations

import math

import numpy as np

from attnbook.exercises._harness import Case, Checker, Mistake
from attnbook.numpy import scaled_dot_product_attention, single_query_attention, softmax


def _column_params(rng, d_x, d_z, d_k, d_v):
    """Weights in the column convention, shape (d_out, d_in), and their biases."""
    return (
        rng.normal(size=(d_k, d_x)), rng.normal(size=d_k),
        rng.normal(size=(d_k, d_z)), rng.normal(size=d_k),
        rng.normal(size=(d_v, d_z)), rng.normal(size=d_v),
    )


def _batch_cases() -> list[Case]:
    rng = np.random.default_rng(501)
    cases = []
    for B, d_x, d_z, d_k, d_v, T_q, T_k, size in ((1, 2, 2, 2, 2, 2, 2, 1.0), (2, 3, 5, 4, 2, 4, 6, 1.0),
                                                  (3, 4, 3, 8, 1, 1, 5, 1.0), (2, 6, 6, 5, 3, 7, 3, 1.0),
                                                  # Scores in the hundreds: exp overflows unless shifted.
                                                  (2, 3, 3, 4, 2, 3, 4, 12.0)):
        X, Z = size * rng.normal(size=(B, d_x, T_q)), size * rng.normal(size=(B, d_z, T_k))
        label = f"B={B}, d_x={d_x}, d_z={d_z}, d_k={d_k}, d_v={d_v}, T_q={T_q}, T_k={T_k}"
        if size != 1.0:
            label += f", inputs scaled by {size:g}"
        cases.append(Case(label, (X, Z, *_column_params(rng, d_x, d_z, d_k, d_v))))
    return cases


def _rows(A: np.ndarray) -> np.ndarray:
    """Swap the last two axes: columns to rows and back, whatever the batch axes."""
    return np.swapaxes(A, -1, -2)


def _batched_columns(X, Z, W_q, b_q, W_k, b_k, W_v, b_v) -> np.ndarray:
    # Through the row convention and the package's attention: transposes in, transpose out.
    Q, K, V = _rows(X) @ W_q.T + b_q, _rows(Z) @ W_k.T + b_k, _rows(Z) @ W_v.T + b_v
    return _rows(scaled_dot_product_attention(Q, K, V)[0])


def _columns_by(X, Z, W_q, b_q, W_k, b_k, W_v, b_v, axis=-2, scale=None, bias=True) -> np.ndarray:
    Q = W_q @ X + (b_q[:, None] if bias else 0.0)
    K = W_k @ Z + (b_k[:, None] if bias else 0.0)
    V = W_v @ Z + (b_v[:, None] if bias else 0.0)
    S = _rows(K) @ Q * (1 / math.sqrt(Q.shape[-2]) if scale is None else scale)  # (B, T_k, T_q)
    return V @ softmax(S, axis=axis)


def _softmax_over_queries(*args) -> np.ndarray:
    return _columns_by(*args, axis=-1)


def _unscaled(*args) -> np.ndarray:
    return _columns_by(*args, scale=1.0)


def _scaled_by_d_x(*args) -> np.ndarray:
    return _columns_by(*args, scale=1 / math.sqrt(args[0].shape[-2]))


def _no_bias(*args) -> np.ndarray:
    return _columns_by(*args, bias=False)


check_batched_attention_columns = Checker(
    name="batched_attention_columns",
    doc="Check ``fn(X, Z, W_q, b_q, W_k, b_k, W_v, b_v) -> (B, d_v, T_q)``: attention in the column convention "
        "for a batch, tokens as columns of ``X`` (B, d_x, T_q) and ``Z`` (B, d_z, T_k), weights of shape "
        "(d_out, d_in), biases of shape (d_out,).",
    reference=_batched_columns,
    cases=_batch_cases(),
    mistakes=(
        Mistake(_softmax_over_queries, "each query is a column of the scores K^T Q: its weights run down that "
                "column, over the keys (axis=-2)."),
        Mistake(_unscaled, "divide the scores by sqrt(d_k), the dimension of the space where queries and keys meet."),
        Mistake(_scaled_by_d_x, "scale by sqrt(d_k), the length of a query, not by the input's d_x."),
        Mistake(_no_bias, "add the biases: every token, a column, gets the same bias column."),
    ),
    forbidden=(scaled_dot_product_attention, single_query_attention, "attnbook.torch.scaled_dot_product_attention",
               "torch.nn.functional.scaled_dot_product_attention"),
)
