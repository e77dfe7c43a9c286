"""Positional encodings (chapter 11): telling attention where each token is.

Positions are counted from 0. Row ``pos`` of the encoding is added to the embedding of the token at
position ``pos``.
"""

from __future__ import annotations

import numpy as np

from attnbook._validate import require_int, require_real


def _check(T: int, d_model: int, base: float) -> None:
    require_int("T", T)
    if T < 1:
        raise ValueError(f"T must be at least 1; got {T}")
    require_int("d_model", d_model)
    if d_model < 2 or d_model % 2:
        raise ValueError(f"d_model must be even and at least 2 (sines and cosines come in pairs); got {d_model}")
    # base <= 0 gives infinite or NaN frequencies, and base = 1 the same frequency in every pair.
    require_real("base", base, "a finite number greater than 1", lambda b: b > 1)


def sinusoidal_frequencies(d_model: int, base: float = 10000.0) -> np.ndarray:
    """The angular frequencies ``omega_i = base ** (-2 i / d_model)`` for ``i = 0 .. d_model/2 - 1``.

    Shape ``(d_model/2,)``. Refuses an odd or non-integer ``d_model`` and a ``base`` that is not a finite
    number greater than 1.
    """
    _check(1, d_model, base)
    return base ** (-np.arange(0, d_model, 2) / d_model)


def sinusoidal_encoding(T: int, d_model: int, base: float = 10000.0) -> np.ndarray:
    """The sinusoidal encoding of Vaswani et al.: ``PE[pos, 2i] = sin(pos omega_i)``, ``PE[pos, 2i + 1] =
    cos(pos omega_i)``.

    Shapes: returns ``(T, d_model)`` for positions ``0 .. T-1``. Phuong and Hutter, algorithm 2.
    Refuses a ``T`` or ``d_model`` that is not a positive integer (``d_model`` even) and a ``base`` that is
    not a finite number greater than 1 (``base = 0`` would give NaN everywhere).
    """
    _check(T, d_model, base)
    angles = np.arange(T)[:, None] * sinusoidal_frequencies(d_model, base)[None, :]  # (T, d_model/2)
    pe = np.empty((T, d_model))
    pe[:, 0::2] = np.sin(angles)
    pe[:, 1::2] = np.cos(angles)
    return pe


def relative_position_map(k: int, d_model: int, base: float = 10000.0) -> np.ndarray:
    """The fixed matrix ``M_k`` with ``PE[pos + k] = PE[pos] @ M_k`` for every position (row convention).

    It is block diagonal: for each frequency, the 2 x 2 rotation by the angle ``k omega_i`` acting on the
    pair ``(sin, cos)``. It depends on the offset ``k`` but not on ``pos``. Shape ``(d_model, d_model)``.
    ``k`` may be any finite number (negative offsets look back); NaN or infinity is refused.
    """
    require_real("k", k, "a finite number (the offset between two positions)")
    omegas = sinusoidal_frequencies(d_model, base)
    M = np.zeros((d_model, d_model))
    for i, w in enumerate(omegas):
        c, s = np.cos(k * w), np.sin(k * w)
        # (sin a, cos a) @ [[c, -s], [s, c]] = (sin a cos b + cos a sin b, cos a cos b - sin a sin b)
        M[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = [[c, -s], [s, c]]
    return M
