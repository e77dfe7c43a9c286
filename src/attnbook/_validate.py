"""Input checks shared by the NumPy and the PyTorch twins.

They look only at shapes, so one implementation serves both array libraries, and every error a
learner meets names what was expected and what arrived.
"""

from __future__ import annotations

from collections.abc import Sequence


def shape_str(shape: Sequence[int]) -> str:
    """Format a shape as ``(2, 3)``, the way NumPy and PyTorch print it."""
    return "(" + ", ".join(str(int(s)) for s in shape) + ("," if len(shape) == 1 else "") + ")"


def require_ndim(name: str, shape: Sequence[int], ndim: int, what: str) -> None:
    """Raise ``ValueError`` unless ``shape`` has exactly ``ndim`` axes.

    ``what`` describes the expected layout, for example ``"(n, d): one vector per row"``.
    """
    if len(shape) != ndim:
        raise ValueError(
            f"{name} must have {ndim} dimension{'s' if ndim != 1 else ''}, shape {what}; "
            f"got shape {shape_str(shape)}"
        )


def require_same_shape(names: tuple[str, str], a: Sequence[int], b: Sequence[int]) -> None:
    """Raise ``ValueError`` unless two shapes are equal (no silent broadcasting)."""
    if tuple(a) != tuple(b):
        raise ValueError(
            f"{names[0]} and {names[1]} must have the same shape; "
            f"got {shape_str(a)} and {shape_str(b)}"
        )


def require_same_last_dim(names: tuple[str, str], a: Sequence[int], b: Sequence[int]) -> None:
    """Raise ``ValueError`` unless two shapes agree on their last axis (the feature size d)."""
    if len(a) == 0 or len(b) == 0 or a[-1] != b[-1]:
        raise ValueError(
            f"{names[0]} and {names[1]} must have the same last dimension d; "
            f"got shapes {shape_str(a)} and {shape_str(b)}"
        )


def require_nonempty_last_dim(name: str, shape: Sequence[int]) -> None:
    """Raise ``ValueError`` for a vector of length zero."""
    if len(shape) == 0 or shape[-1] == 0:
        raise ValueError(f"{name} must hold vectors of length d >= 1; got shape {shape_str(shape)}")

