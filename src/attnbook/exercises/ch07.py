"""Checkers for the coding exercises of chapter 7 (scoring functions)."""

from __future__ import annotations

import numpy as np

from attnbook.exercises._harness import BudgetChecker, Case, Checker, Mistake
from attnbook.numpy import AdditiveScore, LocalScore


def _dilated(T: int, window: int, dilation: int) -> np.ndarray:
    # Keys at offsets 0, +-dilation, ..., +-window * dilation: the local window's mask, thinned out.
    within = np.isfinite(LocalScore(window * dilation)(np.ones((T, 1)), np.ones((T, 1))))
    i, j = np.indices((T, T))
    return within & ((i - j) % dilation == 0)


def _reach_ignores_dilation(T: int, window: int, dilation: int) -> np.ndarray:
    i, j = np.indices((T, T))
    return (np.abs(i - j) <= window) & ((i - j) % dilation == 0)


def _strict_reach(T: int, window: int, dilation: int) -> np.ndarray:
    i, j = np.indices((T, T))
    return (np.abs(i - j) < window * dilation) & ((i - j) % dilation == 0)


def _no_gaps(T: int, window: int, dilation: int) -> np.ndarray:
    i, j = np.indices((T, T))
    return np.abs(i - j) <= window * dilation


def _one_sided(T: int, window: int, dilation: int) -> np.ndarray:
    i, j = np.indices((T, T))
    return (i - j >= 0) & (i - j <= window * dilation) & ((i - j) % dilation == 0)


def _wraps_round(T: int, window: int, dilation: int) -> np.ndarray:
    # The offsets taken round a circle, as np.roll of one row would place them.
    i, j = np.indices((T, T))
    o = (i - j) % T
    return np.isin(o, [(m * dilation) % T for m in range(-window, window + 1)])


def _positions_multiple(T: int, window: int, dilation: int) -> np.ndarray:
    # Keys whose own position is a multiple of the dilation, wherever the query stands.
    i, j = np.indices((T, T))
    return (np.abs(i - j) <= window * dilation) & (j % dilation == 0)


check_dilated_mask = Checker(
    name="dilated_mask",
    doc="Check ``fn(T, window, dilation) -> (T, T)`` booleans: True where query ``i`` may attend to key ``j`` "
        "in a dilated window, the local window of ``window`` keys on each side taken on the positions "
        "``dilation`` apart through the query, cut at the ends of the sequence.",
    reference=_dilated,
    cases=[Case(f"T={T}, window={w}, dilation={r}", (T, w, r))
           for T, w, r in ((5, 1, 1), (7, 1, 2), (9, 2, 3), (6, 0, 2), (12, 3, 2), (4, 5, 3))],
    mistakes=(
        Mistake(_reach_ignores_dilation, "the window counts steps of `dilation` positions: the farthest key "
                                         "allowed stands window * dilation positions away."),
        Mistake(_strict_reach, "the farthest keys, window * dilation positions away, belong to the window: "
                               "compare the offset with <=, not <."),
        Mistake(_no_gaps, "a dilated window skips keys: only offsets that are multiples of the dilation are "
                          "allowed."),
        Mistake(_one_sided, "the window looks both ways, at keys before and after the query."),
        Mistake(_wraps_round, "the window is cut at the ends of the sequence: a key past position T - 1 or before "
                              "0 does not exist, and the window does not wrap round to the other end."),
        Mistake(_positions_multiple, "what must be a multiple of the dilation is the offset i - j between query "
                                     "and key, not the key's own position."),
    ),
    forbidden=(LocalScore.__call__,),
)


def _batched_additive(Q, K, W_q, W_k, b, v) -> np.ndarray:
    scorer = AdditiveScore(W_q, W_k, b, v)
    return np.stack([scorer(q, k) for q, k in zip(Q, K, strict=True)])


def _additive_cases() -> list[Case]:
    rng = np.random.default_rng(702)
    cases = [Case("B=1, Q=[[[1, 0]]], K=[[[0, 1], [1, 1]]], W_q=W_k=I, b=0, v=[1, 1]",
                  (np.array([[[1.0, 0.0]]]), np.array([[[0.0, 1.0], [1.0, 1.0]]]), np.eye(2), np.eye(2),
                   np.zeros(2), np.ones(2)))]
    for B, T_q, T_k, d_q, d_k, d_h in ((2, 3, 3, 2, 2, 4), (3, 2, 5, 3, 6, 2), (2, 4, 1, 5, 2, 3)):
        cases.append(Case(f"B={B}, Q ({B}, {T_q}, {d_q}), K ({B}, {T_k}, {d_k}), d_h={d_h}",
                          (rng.normal(size=(B, T_q, d_q)), rng.normal(size=(B, T_k, d_k)),
                           rng.normal(size=(d_q, d_h)), rng.normal(size=(d_k, d_h)), rng.normal(size=d_h),
                           rng.normal(size=d_h))))
    return cases


def _additive_big_case() -> Case:
    # The (B, T_q, T_k, d_h) array of every pair's hidden vector would take 2 * 96 * 96 * 64 * 8 bytes = 9 MiB;
    # the scores themselves 0.14 MiB, and the projections 0.2 MiB.
    rng = np.random.default_rng(703)
    B, T, d, d_h = 2, 96, 8, 64
    return Case(f"B={B}, Q and K ({B}, {T}, {d}), d_h={d_h}",
                (rng.normal(size=(B, T, d)), rng.normal(size=(B, T, d)), rng.normal(size=(d, d_h)),
                 rng.normal(size=(d, d_h)), rng.normal(size=d_h), rng.normal(size=d_h)))


def _no_tanh(Q, K, W_q, W_k, b, v) -> np.ndarray:
    return ((Q @ W_q)[:, :, None, :] + (K @ W_k)[:, None, :, :] + b) @ v


def _no_v(Q, K, W_q, W_k, b, v) -> np.ndarray:
    return np.tanh((Q @ W_q)[:, :, None, :] + (K @ W_k)[:, None, :, :] + b).sum(axis=-1)


def _keys_in_rows(Q, K, W_q, W_k, b, v) -> np.ndarray:
    return np.tanh((Q @ W_q)[:, None, :, :] + (K @ W_k)[:, :, None, :] + b) @ v


def _bias_outside(Q, K, W_q, W_k, b, v) -> np.ndarray:
    return np.tanh((Q @ W_q)[:, :, None, :] + (K @ W_k)[:, None, :, :]) @ v + b @ v


def _bias_twice(Q, K, W_q, W_k, b, v) -> np.ndarray:
    return np.tanh((Q @ W_q + b)[:, :, None, :] + (K @ W_k + b)[:, None, :, :]) @ v


def _tanh_of_each_part(Q, K, W_q, W_k, b, v) -> np.ndarray:
    # tanh taken of the query's part and of the key's part apart, then added
    return (np.tanh(Q @ W_q + b)[:, :, None, :] + np.tanh(K @ W_k)[:, None, :, :]) @ v


def _tanh_of_each_part_bias_after(Q, K, W_q, W_k, b, v) -> np.ndarray:
    return (np.tanh(Q @ W_q)[:, :, None, :] + np.tanh(K @ W_k)[:, None, :, :] + b) @ v


def _across_the_batch(Q, K, W_q, W_k, b, v) -> np.ndarray:
    # every query against the keys of every sequence: (B, T_q, B, T_k)
    return np.tanh((Q @ W_q)[:, :, None, None, :] + (K @ W_k)[None, None, :, :, :] + b) @ v


_OWN_SEQUENCE = ("each query is scored against the keys of its own sequence only: the batch axis of the queries "
                 "lines up with the batch axis of the keys, and each side needs a length-1 axis where the other "
                 "has its positions.")
_TANH_OF_SUM = ("the tanh is taken of the sum of the query's part, the key's part and b: tanh(a) + tanh(c) is not "
                "tanh(a + c), and a sum of a query term and a key term ranks the keys the same for every query.")


check_batched_additive_scores = BudgetChecker(
    name="batched_additive_scores",
    doc="Check ``fn(Q, K, W_q, W_k, b, v) -> (B, T_q, T_k)``: for each sequence ``n`` of a batch, the scores "
        "``AdditiveScore(W_q, W_k, b, v)(Q[n], K[n])`` of its queries ``Q`` ``(B, T_q, d_q)`` against its keys "
        "``K`` ``(B, T_k, d_k)``, without holding an array of ``B T_q T_k d_h`` numbers (at most 2 MiB on a "
        "batch where that array takes 9 MiB).",
    reference=_batched_additive,
    cases=_additive_cases(),
    mistakes=(
        Mistake(_no_tanh, "without the tanh the score is a query part plus a key part, and the softmax over the "
                          "keys ignores the query part: keep the nonlinearity."),
        Mistake(_no_v, "v weights each hidden unit before they are summed: a dot product with v, not a plain sum."),
        Mistake(_keys_in_rows, "query i's scores fill row i: the query axis comes before the key axis."),
        Mistake(_bias_outside, "b is added inside the tanh, to each pair's hidden vector."),
        Mistake(_bias_twice, "b is added once to each pair's hidden vector: adding it to the query's projection "
                             "and again to the key's counts it twice."),
        Mistake(_tanh_of_each_part, _TANH_OF_SUM),
        Mistake(_tanh_of_each_part_bias_after, _TANH_OF_SUM),
        Mistake(_across_the_batch, _OWN_SEQUENCE),
    ),
    atol=1e-10,
    forbidden=(AdditiveScore.__call__,),
    error_hints=(("could not be broadcast", _OWN_SEQUENCE),),
    big_case=_additive_big_case(),
    budget_bytes=2 * 2**20,
    budget_hint="it holds the hidden vector of every query-key pair at once, B T_q T_k d_h numbers. Each hidden "
                "unit adds its own (B, T_q, T_k) term to the scores: build the scores a part at a time.",
)
