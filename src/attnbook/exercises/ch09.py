"""Checkers for the coding exercises of chapter 9 (multi-head attention)."""

from __future__ import annotations

import math

import numpy as np

from attnbook.exercises._harness import Case, Checker, Mistake
from attnbook.numpy import merge_heads, multi_head_attention, scaled_dot_product_attention, split_heads


def _count(d_model: int, d_kv: int, h: int, d_head: int) -> int:
    inner = h * d_head
    # W_q and b_q from the queries, W_k, b_k, W_v, b_v from the context, W_o and b_o back to d_model.
    return (d_model * inner + inner) + 2 * (d_kv * inner + inner) + (inner * d_model + d_model)


def _no_biases(d_model: int, d_kv: int, h: int, d_head: int) -> int:
    inner = h * d_head
    return d_model * inner + 2 * d_kv * inner + inner * d_model


def _one_head_width(d_model: int, d_kv: int, h: int, d_head: int) -> int:
    return _count(d_model, d_kv, 1, d_head)


def _output_bias_of_inner_width(d_model: int, d_kv: int, h: int, d_head: int) -> int:
    inner = h * d_head
    return (d_model + 2 * d_kv + d_model) * inner + 4 * inner


def _self_attention_formula(d_model: int, d_kv: int, h: int, d_head: int) -> int:
    return 4 * d_model * d_model + 4 * d_model


check_mha_parameters = Checker(
    name="mha_parameters",
    doc="Check ``fn(d_model, d_kv, h, d_head) -> int``: the parameters, biases included, of multi-head attention "
        "with ``h`` heads of width ``d_head``, queries of width ``d_model``, keys and values from tokens of width "
        "``d_kv``, and an output projection back to ``d_model``.",
    reference=_count,
    cases=[Case(f"d_model={d}, d_kv={k}, h={h}, d_head={e}", (d, k, h, e))
           for d, k, h, e in ((8, 8, 2, 4), (512, 512, 8, 64), (64, 32, 4, 32), (6, 10, 3, 5), (768, 768, 12, 128))],
    mistakes=(
        Mistake(_no_biases, "every projection has a bias, one number per output: four of them."),
        Mistake(_one_head_width, "the projections map to all the heads side by side: h d_head columns, not "
                                 "d_head."),
        Mistake(_output_bias_of_inner_width, "the output projection maps h d_head back to d_model: its bias has "
                                             "d_model numbers."),
        Mistake(_self_attention_formula, "4 d_model^2 + 4 d_model holds only when d_kv = d_model and h d_head = "
                                         "d_model; count each projection from its input and output widths."),
    ),
)


def _heads(X, W_q, W_k, W_v, W_o, h) -> np.ndarray:
    Q, K, V = (split_heads(X @ W, h) for W in (W_q, W_k, W_v))  # (h, T, d_head)
    return merge_heads(scaled_dot_product_attention(Q, K, V)[0]) @ W_o


def _heads_cases() -> list[Case]:
    rng = np.random.default_rng(902)
    cases = []
    for T, d_model, h, d_head in ((4, 6, 2, 5), (5, 8, 4, 2), (3, 4, 3, 4), (6, 12, 3, 4), (2, 5, 1, 7)):
        X = rng.normal(size=(T, d_model))
        W_q, W_k, W_v = rng.normal(size=(3, d_model, h * d_head)) / math.sqrt(d_model)
        W_o = rng.normal(size=(h * d_head, d_model)) / math.sqrt(h * d_head)
        cases.append(Case(f"T={T}, d_model={d_model}, h={h}, d_head={d_head}", (X, W_q, W_k, W_v, W_o, h)))
    return cases


def _attend(Q, K, V, scale):
    s = Q @ np.swapaxes(K, -1, -2) * scale
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return (e / e.sum(axis=-1, keepdims=True)) @ V


def _split(M: np.ndarray, h: int) -> np.ndarray:
    # The mistakes' own split and merge: the package's are forbidden to answers.
    T, inner = M.shape
    return M.reshape(T, h, inner // h).transpose(1, 0, 2)


def _merge(M: np.ndarray) -> np.ndarray:
    h, T, d_head = M.shape
    return M.transpose(1, 0, 2).reshape(T, h * d_head)


def _scaled_by_model_width(X, W_q, W_k, W_v, W_o, h) -> np.ndarray:
    Q, K, V = (_split(X @ W, h) for W in (W_q, W_k, W_v))
    return _merge(_attend(Q, K, V, 1 / math.sqrt(X.shape[1]))) @ W_o


def _scaled_by_inner_width(X, W_q, W_k, W_v, W_o, h) -> np.ndarray:
    Q, K, V = (_split(X @ W, h) for W in (W_q, W_k, W_v))
    return _merge(_attend(Q, K, V, 1 / math.sqrt(W_q.shape[1]))) @ W_o


def _plain_reshape(X, W_q, W_k, W_v, W_o, h) -> np.ndarray:
    T, inner = X.shape[0], W_q.shape[1]
    Q, K, V = ((X @ W).reshape(h, T, inner // h) for W in (W_q, W_k, W_v))
    return _attend(Q, K, V, 1 / math.sqrt(inner // h)).reshape(T, inner) @ W_o


def _merged_by_plain_reshape(X, W_q, W_k, W_v, W_o, h) -> np.ndarray:
    Q, K, V = (_split(X @ W, h) for W in (W_q, W_k, W_v))
    out = _attend(Q, K, V, 1 / math.sqrt(W_q.shape[1] // h))
    return out.reshape(X.shape[0], -1) @ W_o


check_heads_attention = Checker(
    name="heads_attention",
    doc="Check ``fn(X, W_q, W_k, W_v, W_o, h) -> (T, d_model)``: multi-head self-attention of ``X (T, d_model)`` "
        "with ``h`` heads of width ``d_head = W_q.shape[1] / h`` (any width), no biases, output ``heads W_o``.",
    reference=_heads,
    cases=_heads_cases(),
    mistakes=(
        Mistake(_scaled_by_model_width, "each head's scores are dot products of d_head numbers: divide by "
                                        "sqrt(d_head), not by the width of the tokens."),
        Mistake(_scaled_by_inner_width, "each head's scores are dot products of d_head numbers: divide by "
                                        "sqrt(d_head), not by the width of all heads together."),
        Mistake(_plain_reshape, "a plain reshape to (h, T, d_head) mixes the tokens: give the heads their own "
                                "axis next to the columns first, then move it."),
        Mistake(_merged_by_plain_reshape, "merging must undo the split: move the head axis back next to the "
                                          "columns before flattening, or the tokens get mixed."),
    ),
    atol=1e-10,
    forbidden=(multi_head_attention, split_heads, merge_heads),
)
