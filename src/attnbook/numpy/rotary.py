"""Rotary position embeddings (chapter 21; Su et al. 2021): position enters attention as a rotation.

Instead of adding a position vector to each token, rotate its query and its key by angles proportional
to its position. Dimension ``i`` is paired with dimension ``i + d/2`` (the "rotate-half" layout of
GPT-NeoX and Llama), and pair ``i`` turns by ``pos * theta_i`` with ``theta_i = base ** (-2 i / d)``,
the frequencies of chapter 11. A rotation by ``m theta`` and one by ``n theta`` meet in a dot product as
a single rotation by ``(m - n) theta``, so the score of a rotated query and key depends on their
positions only through the offset ``m - n``.
"""

from __future__ import annotations

import numpy as np

from attnbook._validate import require_int, require_real, shape_str
from attnbook.numpy._arrays import as_float


def _check_dim(d: int) -> None:
    if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 2 or d % 2:
        raise ValueError(f"the rotated dimension d must be even and at least 2 (dimensions turn in pairs); got {d!r}")


def _positions(x: np.ndarray, positions) -> np.ndarray:
    if x.ndim < 2:
        raise ValueError(f"x must have shape (..., T, d); got shape {shape_str(x.shape)}")
    _check_dim(x.shape[-1])
    T = x.shape[-2]
    positions = np.arange(T) if positions is None else np.asarray(positions)
    if positions.shape != (T,):
        raise ValueError(f"positions must have shape (T,) = ({T},), one per row of x; got {shape_str(positions.shape)}")
    return positions


def rotary_frequencies(d: int, base: float = 10000.0) -> np.ndarray:
    """The angular frequencies ``theta_i = base ** (-2 i / d)`` of the ``d/2`` rotated pairs: shape ``(d/2,)``.

    Pair 0 turns fastest (one radian per position); the last pair turns slowest. Chapter 21.
    """
    _check_dim(d)
    require_real("base", base, "a finite number greater than 1", lambda b: b > 1)
    return base ** (-np.arange(0, d, 2) / d)


def rotary_angles(positions, d: int, base: float = 10000.0) -> np.ndarray:
    """The angles ``positions[t] * theta_i``: ``positions`` ``(T,)`` to ``(T, d/2)``. Chapter 21.

    Positions may be any real numbers (a NaN position gives NaN angles, as arithmetic does); booleans and
    strings are refused."""
    positions = as_float("positions", positions)
    if positions.ndim != 1:
        raise ValueError(f"positions must have shape (T,); got {shape_str(positions.shape)}")
    return positions[:, None] * rotary_frequencies(d, base)[None, :]


def rotate_half(x: np.ndarray) -> np.ndarray:
    """``(x1, x2)`` to ``(-x2, x1)``, halves of the last axis: each pair ``(x_i, x_{i + d/2})`` turned by
    90 degrees. Shapes: ``(..., d)`` to ``(..., d)``, ``d`` even. Chapter 21."""
    x = np.asarray(x)
    _check_dim(x.shape[-1] if x.ndim else 0)
    x1, x2 = np.split(x, 2, axis=-1)
    return np.concatenate([-x2, x1], axis=-1)


def apply_rotary(x: np.ndarray, positions=None, base: float = 10000.0) -> np.ndarray:
    """Rotate each pair ``(x_i, x_{i + d/2})`` of row ``t`` by the angle ``positions[t] * theta_i``.

    ``x cos + rotate_half(x) sin``, the rotate-half form. Shapes: ``x`` ``(..., T, d)``, ``d`` even;
    ``positions`` ``(T,)`` (default ``0 .. T-1``); returns ``(..., T, d)``. Chapter 21. Refuses a boolean
    ``x``, as the PyTorch twin does.
    """
    x = as_float("x", x).astype(float, copy=False)  # booleans and strings are refused
    positions = _positions(x, positions)
    angles = rotary_angles(positions, x.shape[-1], base)  # (T, d/2)
    cos = np.concatenate([np.cos(angles)] * 2, axis=-1)  # (T, d): pair i uses the same angle in both halves
    sin = np.concatenate([np.sin(angles)] * 2, axis=-1)
    return x * cos + rotate_half(x) * sin


def apply_rotary_complex(x: np.ndarray, positions=None, base: float = 10000.0) -> np.ndarray:
    """``apply_rotary`` in complex numbers: pair ``i`` is ``z_i = x_i + 1j x_{i + d/2}``, multiplied by
    ``exp(1j positions[t] theta_i)``. The same shapes and result as ``apply_rotary``. Chapter 21.
    """
    x = as_float("x", x).astype(float, copy=False)  # booleans and strings are refused
    positions = _positions(x, positions)
    d = x.shape[-1]
    z = x[..., : d // 2] + 1j * x[..., d // 2 :]  # (..., T, d/2)
    z = z * np.exp(1j * rotary_angles(positions, d, base))  # a rotation is a multiplication by e^{i angle}
    return np.concatenate([z.real, z.imag], axis=-1)


def sliding_window_mask(T_q: int, T_k: int | None = None, *, window: int) -> np.ndarray:
    """Causal attention to the last ``window`` positions only: ``(T_q, T_k)`` booleans, True where allowed.

    The queries are the last ``T_q`` of the ``T_k`` positions (as in ``causal_mask``); query ``i`` sits
    at position ``T_k - T_q + i`` and may see key ``j`` when ``0 <= T_k - T_q + i - j < window``. This is
    what a sliding key-value cache of ``window`` positions computes (chapter 21). Refuses sizes that are
    not integers, and ``T_k < T_q``.
    """
    T_k = T_q if T_k is None else T_k
    require_int("T_q", T_q)
    require_int("T_k", T_k)
    if T_q < 1 or T_k < T_q:
        raise ValueError(f"need 1 <= T_q <= T_k; got T_q = {T_q}, T_k = {T_k}")
    if isinstance(window, bool) or not isinstance(window, (int, np.integer)) or window < 1:
        raise ValueError(f"window must be an integer, at least 1; got {window!r}")
    offset = (T_k - T_q + np.arange(T_q))[:, None] - np.arange(T_k)[None, :]  # query position - key position
    return (offset >= 0) & (offset < window)
