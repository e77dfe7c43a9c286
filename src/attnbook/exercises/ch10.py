"""Checkers for the coding exercises of chapter 10 (attention, dense layers and convolutions)."""

from __future__ import annotations

import numpy as np

from attnbook.exercises._harness import Case, Checker, Mistake
from attnbook.numpy import conv1d_as_attention, offset_attention_weights


def _signal_cases() -> list[Case]:
    rng = np.random.default_rng(1001)
    cases = [Case("x=[1, 2, 3, 4], w=[1, 0, -1]", (np.array([1.0, 2.0, 3.0, 4.0]), np.array([1.0, 0.0, -1.0])))]
    for T, k in ((8, 3), (10, 5), (3, 3), (6, 1)):
        cases.append(Case(f"random x of length {T}, kernel of length {k}", (rng.normal(size=T), rng.normal(size=k))))
    return cases


def _conv_same(x, w) -> np.ndarray:
    return conv1d_as_attention(x[:, None], w[None, None, :])[:, 0]


def _flipped(x, w) -> np.ndarray:
    return np.convolve(x, w, mode="same")


def _valid(x, w) -> np.ndarray:
    return np.correlate(x, w, mode="valid")


check_conv1d_same = Checker(
    name="conv1d_same",
    doc="Check ``fn(x, w) -> (T,)``: cross-correlation of ``x (T,)`` with an odd kernel ``w (k,)``, zero padded.",
    reference=_conv_same,
    cases=_signal_cases(),
    mistakes=(
        Mistake(_flipped, "np.convolve flips the kernel; deep-learning 'convolution' is a cross-correlation: "
                "y[i] = sum_j w[j] x[i + j - k//2]."),
        Mistake(_valid, "pad with k // 2 zeros on each side so the output keeps the input's length."),
    ),
)


def _offset(T: int, offset: int) -> np.ndarray:
    return offset_attention_weights(T, [offset])[0]


def _transposed(T: int, offset: int) -> np.ndarray:
    return _offset(T, offset).T


def _wrapped(T: int, offset: int) -> np.ndarray:
    return np.roll(np.eye(T), offset, axis=1)


check_offset_weights = Checker(
    name="offset_weights",
    doc="Check ``fn(T, offset) -> (T, T)``: one-hot attention of query ``i`` to key ``i + offset``.",
    reference=_offset,
    cases=[Case(f"T={T}, offset={o}", (T, o)) for T, o in ((4, 1), (5, -1), (3, 0), (6, 2), (3, 5))],
    mistakes=(
        Mistake(_transposed, "row i is query i: it puts its weight in column i + offset, not row i + offset."),
        Mistake(_wrapped, "no wrap-around: a query whose key i + offset falls outside the sequence gets a row "
                "of zeros."),
    ),
)
