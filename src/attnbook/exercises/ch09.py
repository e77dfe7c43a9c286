"""Checkers for the coding exercises of chapter 9 (multi-head attention)."""

from __future__ import annotations

import numpy as np

from attnbook.exercises._harness import Case, Checker, Mistake
from attnbook.numpy import MultiHeadParams, split_heads


def _split_cases() -> list[Case]:
    rng = np.random.default_rng(901)
    cases = [Case("X = np.arange(12.).reshape(3, 4), h=2", (np.arange(12.0).reshape(3, 4), 2))]
    for T, d, h in ((5, 8, 4), (2, 6, 3), (4, 4, 1)):
        cases.append(Case(f"random X of shape ({T}, {d}), h={h}", (rng.normal(size=(T, d)), h)))
    return cases


def _plain_reshape(X, h):
    T, d = X.shape
    return X.reshape(h, T, d // h)


def _no_transpose(X, h):
    T, d = X.shape
    return X.reshape(T, h, d // h)


def _interleaved(X, h):
    T, d = X.shape
    return X.reshape(T, d // h, h).transpose(2, 0, 1)


check_split_heads = Checker(
    name="split_heads",
    doc="Check ``fn(X, h) -> (h, T, d_head)``: the columns of ``X (T, d_model)`` cut into ``h`` heads.",
    reference=split_heads,
    cases=_split_cases(),
    mistakes=(
        Mistake(_plain_reshape, "a plain reshape to (h, T, d_head) mixes tokens; reshape to (T, h, d_head) "
                "first, then swap the first two axes."),
        Mistake(_no_transpose, "after reshaping to (T, h, d_head), move the head axis first: (h, T, d_head)."),
        Mistake(_interleaved, "head i takes the contiguous columns i*d_head to (i+1)*d_head, not every h-th column."),
    ),
)


def _count(d_model: int, d_kv: int) -> int:
    return MultiHeadParams.init(d_model, d_kv).n_params()


def _no_biases(d_model: int, d_kv: int) -> int:
    return (2 * d_model + 2 * d_kv) * d_model


def _no_output(d_model: int, d_kv: int) -> int:
    return (d_model + 2 * d_kv) * d_model + 3 * d_model


check_mha_parameters = Checker(
    name="mha_parameters",
    doc="Check ``fn(d_model, d_kv) -> int``: the parameters of multi-head attention, biases included.",
    reference=_count,
    cases=[Case(f"d_model={d}, d_kv={k}", (d, k)) for d, k in ((8, 8), (512, 512), (64, 32), (6, 10))],
    mistakes=(
        Mistake(_no_biases, "every projection has a bias of d_model numbers too: four of them."),
        Mistake(_no_output, "the output projection W_o (d_model x d_model) and its bias count as well."),
    ),
)
