"""Checkers for the coding exercises of chapter 9 (multi-head attention)."""

from __future__ import annotations

import math

import numpy as np

from attnbook.exercises._harness import Case, Checker, Mistake
from attnbook.numpy import merge_heads, multi_head_attention, split_heads


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


def _no_output_bias(d_model: int, d_kv: int, h: int, d_head: int) -> int:
    return _count(d_model, d_kv, h, d_head) - d_model


def _keys_values_from_queries_width(d_model: int, d_kv: int, h: int, d_head: int) -> int:
    return _count(d_model, d_model, h, d_head)


def _head_width_from_d_model(d_model: int, d_kv: int, h: int, d_head: int) -> int:
    return _count(d_model, d_kv, h, d_model // h)


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
        Mistake(_no_output_bias, "the output projection is a linear map with a bias too: d_model more numbers."),
        Mistake(_keys_values_from_queries_width, "the keys and values are projected from the context's tokens, of "
                                                 "width d_kv: their matrices have d_kv rows, not d_model."),
        Mistake(_head_width_from_d_model, "each head has the width d_head it is given, which need not be "
                                          "d_model / h: the projections have h d_head columns."),
        Mistake(_self_attention_formula, "4 d_model^2 + 4 d_model holds only when d_kv = d_model and h d_head = "
                                         "d_model; count each projection from its input and output widths."),
    ),
)


def _circuits(W_q, W_k, W_v, W_o, h) -> np.ndarray:
    """Each head's ``A_i = W_q^(i) W_k^(i)T`` and ``B_i = W_v^(i) W_o^(i)``: the package's split of a projected
    array, applied to the weights (a weight matrix is the projection of the identity)."""
    Wq, Wk, Wv = (split_heads(W, h) for W in (W_q, W_k, W_v))  # (h, d_model, d_head): column blocks
    Wo = np.swapaxes(split_heads(W_o.T, h), -1, -2)  # (h, d_head, d_model): row blocks
    return np.stack([Wq @ np.swapaxes(Wk, -1, -2), Wv @ Wo])


def _circuit_cases() -> list[Case]:
    rng = np.random.default_rng(902)
    cases = []
    for d_model, h, d_head in ((4, 2, 1), (6, 2, 5), (8, 4, 2), (4, 3, 4), (12, 3, 4), (5, 1, 7)):
        W_q, W_k, W_v = rng.normal(size=(3, d_model, h * d_head))
        W_o = rng.normal(size=(h * d_head, d_model))
        cases.append(Case(f"d_model={d_model}, h={h}, d_head={d_head}", (W_q, W_k, W_v, W_o, h)))
    return cases


def _blocks(W_q, W_k, W_v, W_o, h, how="right"):
    # The mistakes' own blocks: the package's split is forbidden to answers.
    d_model, inner = W_q.shape
    d_head = inner // h
    if how == "plain":  # a reshape that cuts the rows, not the columns, into heads
        cols = [W.reshape(h, d_model, d_head) for W in (W_q, W_k, W_v)]
        return (*cols, W_o.reshape(h, d_head, -1))
    if how == "interleaved":  # every h-th column to the same head
        cols = [W.reshape(d_model, d_head, h).transpose(2, 0, 1) for W in (W_q, W_k, W_v)]
        return (*cols, W_o.reshape(d_head, h, -1).transpose(1, 0, 2))
    cols = [W.reshape(d_model, h, d_head).transpose(1, 0, 2) for W in (W_q, W_k, W_v)]
    return (*cols, W_o.reshape(h, d_head, -1))


def _plain_reshape(W_q, W_k, W_v, W_o, h):
    Wq, Wk, Wv, Wo = _blocks(W_q, W_k, W_v, W_o, h, "plain")
    return np.stack([Wq @ Wk.transpose(0, 2, 1), Wv @ Wo])


def _interleaved(W_q, W_k, W_v, W_o, h):
    Wq, Wk, Wv, Wo = _blocks(W_q, W_k, W_v, W_o, h, "interleaved")
    return np.stack([Wq @ Wk.transpose(0, 2, 1), Wv @ Wo])


def _keys_first(W_q, W_k, W_v, W_o, h):
    Wq, Wk, Wv, Wo = _blocks(W_q, W_k, W_v, W_o, h)
    return np.stack([Wk @ Wq.transpose(0, 2, 1), Wv @ Wo])


def _scaled(W_q, W_k, W_v, W_o, h):
    Wq, Wk, Wv, Wo = _blocks(W_q, W_k, W_v, W_o, h)
    return np.stack([Wq @ Wk.transpose(0, 2, 1) / math.sqrt(Wq.shape[-1]), Wv @ Wo])


def _width_from_d_model(W_q, W_k, W_v, W_o, h):
    # blocks of d_model / h columns, the chapter's usual width, where these projections have h d_head columns
    w = W_q.shape[0] // h
    cols = [slice(i * w, (i + 1) * w) for i in range(h)]
    return np.stack([np.stack([W_q[:, c] @ W_k[:, c].T for c in cols]), np.stack([W_v[:, c] @ W_o[c] for c in cols])])


def _all_heads_together(W_q, W_k, W_v, W_o, h):
    both = np.stack([W_q @ W_k.T, W_v @ W_o])  # (2, d_model, d_model): the sums over the heads
    return np.repeat(both[:, None], h, axis=1)


_D_HEAD = ("a head's width d_head is the projections' width h d_head divided by h, not d_model / h: in this "
           "exercise the two differ.")

check_head_circuits = Checker(
    name="head_circuits",
    doc="Check ``fn(W_q, W_k, W_v, W_o, h) -> (2, h, d_model, d_model)``: for a layer without biases, with "
        "projections ``(d_model, h d_head)`` and ``W_o`` ``(h d_head, d_model)``, head ``i``'s two matrices of "
        "weights alone: ``[0, i]`` the ``A_i`` with which its scores are ``X A_i X^T / sqrt(d_head)``, and "
        "``[1, i]`` the ``B_i`` with which its term of the layer's output is its weights times ``X B_i``.",
    reference=_circuits,
    cases=_circuit_cases(),
    mistakes=(
        Mistake(_plain_reshape, "reshaping a (d_model, h d_head) matrix straight to (h, d_model, d_head) cuts its "
                                "rows into heads; head i owns a block of d_head columns: split the column axis "
                                "into (h, d_head), then move the head axis in front."),
        Mistake(_interleaved, "head i owns the consecutive columns i d_head to (i + 1) d_head - 1 (and the same "
                              "rows of W_o), not every h-th one: split the axis into (h, d_head), not (d_head, h)."),
        Mistake(_keys_first, "A_i is W_q^(i) W_k^(i)T, so that the scores are X A_i X^T with the queries' tokens "
                             "on the rows; W_k^(i) W_q^(i)T is its transpose."),
        Mistake(_scaled, "A_i holds the weights only: the 1 / sqrt(d_head) of the scores is not part of it."),
        Mistake(_width_from_d_model, _D_HEAD),
        Mistake(_all_heads_together, "W_q W_k^T and W_v W_o are the sums of the heads' circuits; each head has its "
                                     "own, from its own blocks."),
    ),
    atol=1e-10,
    forbidden=(multi_head_attention, split_heads, merge_heads),
    error_hints=(("cannot reshape", _D_HEAD),),
)
