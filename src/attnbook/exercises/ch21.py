"""Checkers for the coding exercises of chapter 21 (rotary position embeddings)."""

from __future__ import annotations

import numpy as np

from attnbook.exercises._harness import Case, Checker, Mistake
from attnbook.numpy import apply_rotary, sliding_window_mask


def _reference_window(T, window):
    return sliding_window_mask(T, window=window)


def _window_off_by_one(T, window):
    offset = np.arange(T)[:, None] - np.arange(T)[None, :]
    return (offset >= 0) & (offset <= window)


def _window_not_causal(T, window):
    offset = np.arange(T)[:, None] - np.arange(T)[None, :]
    return np.abs(offset) < window


check_window_mask = Checker(
    name="window_mask",
    doc="Check ``fn(T, window) -> (T, T) booleans``: position i may attend to j when 0 <= i - j < window.",
    reference=_reference_window,
    cases=[Case(f"T={T}, window={w}", (T, w)) for T, w in ((1, 1), (5, 1), (6, 3), (8, 8), (7, 20))],
    mistakes=(
        Mistake(_window_off_by_one, "a window of w positions holds the query itself and the w - 1 before it: "
                "i - j < window, not <=."),
        Mistake(_window_not_causal, "the window is causal: key j must not come after query i (i - j >= 0)."),
    ),
)


def _negative_angle(x, positions, base):
    return apply_rotary(x, -np.asarray(positions), base)


def _interleaved(x, positions, base):
    d = x.shape[-1]
    theta = base ** (-np.arange(0, d, 2) / d)
    a = np.asarray(positions)[:, None] * theta
    out = np.empty_like(x)
    out[:, 0::2] = x[:, 0::2] * np.cos(a) - x[:, 1::2] * np.sin(a)
    out[:, 1::2] = x[:, 0::2] * np.sin(a) + x[:, 1::2] * np.cos(a)
    return out


def _wrong_frequencies(x, positions, base):
    d = x.shape[-1]
    theta = base ** (-np.arange(d // 2) / d)  # exponent -i/d instead of -2i/d
    a = np.asarray(positions)[:, None] * theta
    c, s = np.cos(a), np.sin(a)
    x1, x2 = x[:, : d // 2], x[:, d // 2:]
    return np.concatenate([x1 * c - x2 * s, x1 * s + x2 * c], axis=-1)


def _rotary_cases() -> list[Case]:
    rng = np.random.default_rng(2021)
    cases = [Case("x = [[1, 0]] at position 1, base 10000 (one pair, one radian)", (np.array([[1.0, 0.0]]), [1], 1e4))]
    for T, d, base in ((3, 4, 1e4), (5, 8, 1e4), (4, 16, 100.0)):
        cases.append(Case(f"random x of shape ({T}, {d}), positions {list(range(2, 2 + T))}, base {base:g}",
                          (rng.normal(size=(T, d)), list(range(2, 2 + T)), base)))
    return cases


check_apply_rotary = Checker(
    name="apply_rotary",
    doc="Check ``fn(x, positions, base) -> rotated x``: ``x`` ``(T, d)``; pair ``(x_i, x_{i + d/2})`` of row ``t`` "
        "turned by ``positions[t] * base ** (-2 i / d)`` radians.",
    reference=apply_rotary,
    cases=_rotary_cases(),
    mistakes=(
        Mistake(_negative_angle, "the rotation turns counter-clockwise: (a, b) goes to "
                "(a cos - b sin, a sin + b cos)."),
        Mistake(_interleaved, "this exercise pairs dimension i with i + d/2 (the rotate-half layout), not with i + 1."),
        Mistake(_wrong_frequencies, "the frequencies are base ** (-2 i / d) for pair i = 0 .. d/2 - 1, "
                "the exponents of chapter 11."),
    ),
    atol=1e-10,
)
