"""Checkers for the coding exercises of chapter 11 (positional encodings)."""

from __future__ import annotations

import numpy as np

from attnbook.exercises._harness import Case, Checker, Mistake
from attnbook.numpy import relative_position_map, sinusoidal_encoding


def _from_one(T: int, d_model: int) -> np.ndarray:
    return sinusoidal_encoding(T + 1, d_model)[1:]


def _blocks(T: int, d_model: int) -> np.ndarray:
    pe = sinusoidal_encoding(T, d_model)
    return np.concatenate([pe[:, 0::2], pe[:, 1::2]], axis=1)


def _column_exponent(T: int, d_model: int) -> np.ndarray:
    angles = np.arange(T)[:, None] / 10000 ** (np.arange(d_model)[None, :] / d_model)
    return np.where(np.arange(d_model) % 2 == 0, np.sin(angles), np.cos(angles))


check_sinusoidal_encoding = Checker(
    name="sinusoidal_encoding",
    doc="Check ``fn(T, d_model) -> (T, d_model)``: the sinusoidal encoding, positions from 0.",
    reference=sinusoidal_encoding,
    cases=[Case(f"T={T}, d_model={d}", (T, d)) for T, d in ((4, 4), (3, 2), (10, 8), (50, 16))],
    mistakes=(
        Mistake(_from_one, "positions start at 0: the first row is PE(0) = [0, 1, 0, 1, ...]."),
        Mistake(_blocks, "sines and cosines alternate: column 2i is sin, column 2i + 1 is cos of the same angle."),
        Mistake(_column_exponent, "the exponent is 2i / d_model with i the pair index, the same for columns 2i "
                "and 2i+1."),
    ),
)


def _transposed(k: int, d_model: int) -> np.ndarray:
    return relative_position_map(k, d_model).T


def _first_pair_only(k: int, d_model: int) -> np.ndarray:
    M = np.eye(d_model)
    M[:2, :2] = relative_position_map(k, d_model)[:2, :2]
    return M


check_shift_matrix = Checker(
    name="shift_matrix",
    doc="Check ``fn(k, d_model) -> (d_model, d_model)``: ``M`` with ``PE[pos + k] = PE[pos] @ M``.",
    reference=relative_position_map,
    cases=[Case(f"k={k}, d_model={d}", (k, d)) for k, d in ((1, 2), (3, 4), (-2, 4), (10, 8))],
    mistakes=(
        Mistake(_transposed, "that rotates the wrong way (by -k): in the row convention PE(pos) @ M must give "
                "(sin(a + b), cos(a + b))."),
        Mistake(_first_pair_only, "every frequency needs its own 2 x 2 rotation, by the angle k * omega_i."),
    ),
)
