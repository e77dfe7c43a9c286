"""Input checks shared by the NumPy and the PyTorch twins.

They look only at shapes, so one implementation serves both array libraries, and every error a
learner meets names what was expected and what arrived.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from numbers import Integral, Real


def shape_str(shape: Sequence[int]) -> str:
    """Format a shape as ``(2, 3)``, the way NumPy and PyTorch print it."""
    return "(" + ", ".join(str(int(s)) for s in shape) + ("," if len(shape) == 1 else "") + ")"


def require_int(name: str, value: object, minimum: int | None = None) -> None:
    """Raise ``ValueError`` unless ``value`` is an integer (a Python or NumPy one; not ``bool``, not ``3.0``), at
    least ``minimum`` when given. A size or a position that arrives as a float is refused rather than rounded."""
    if isinstance(value, bool) or not isinstance(value, Integral) or (minimum is not None and value < minimum):
        expected = "an integer" if minimum is None else f"an integer, at least {minimum}"
        raise ValueError(f"{name} must be {expected}; got {value!r}")


def require_real(name: str, value: object, expected: str = "a finite number",
                 ok: Callable[[float], bool] | None = None) -> None:
    """Raise ``ValueError`` unless ``value`` is a finite real number (not ``bool``, NaN or infinity) for which
    ``ok`` holds; ``expected`` says what is accepted, for example ``"a finite number greater than 1"``."""
    if (isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(value)
            or (ok is not None and not ok(value))):
        raise ValueError(f"{name} must be {expected}; got {value!r}")


def check_norm(d: int, eps: float) -> None:
    """Raise ``ValueError`` unless a normalisation layer gets a width ``d >= 1`` and an ``eps`` that is a finite
    number, 0 or more (a negative one can make the root of a negative number: NaN)."""
    require_int("d", d, 1)
    require_real("eps", eps, "a finite number, 0 or more", lambda e: e >= 0)


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


def check_split_heads(shape: Sequence[int], n_heads: int) -> None:
    """Raise ``ValueError`` unless ``shape`` is ``(..., T, d_model)`` with ``d_model`` divisible by ``n_heads``."""
    if len(shape) < 2:
        raise ValueError("X must have shape (..., T, d_model) with at least 2 dimensions; "
                         f"got shape {shape_str(shape)}")
    if isinstance(n_heads, bool) or not isinstance(n_heads, Integral) or n_heads < 1:
        raise ValueError(f"n_heads must be a positive integer; got {n_heads!r}")
    if shape[-1] % n_heads:
        raise ValueError(f"d_model = {shape[-1]} (the last axis of X, shape {shape_str(shape)}) must be divisible by "
                         f"n_heads = {n_heads}, so that every head gets d_model / n_heads columns")


def check_qkv_shapes(Q: Sequence[int], K: Sequence[int], V: Sequence[int]) -> None:
    """The shape rules of attention: ``Q (..., T_q, d_k)``, ``K (..., T_k, d_k)``, ``V (..., T_k, d_v)``."""
    for name, shape in (("Q", Q), ("K", K), ("V", V)):
        if len(shape) < 2:
            raise ValueError(f"{name} must have shape (..., T, d) with at least 2 dimensions; "
                             f"got shape {shape_str(shape)}")
    if Q[-1] != K[-1]:
        raise ValueError(f"Q and K must have the same last dimension d_k; got Q {shape_str(Q)} and K {shape_str(K)}")
    if K[-2] != V[-2]:
        raise ValueError("K and V must have the same number of positions T_k (second-to-last axis); "
                         f"got K {shape_str(K)} and V {shape_str(V)}")
    if not tuple(Q[:-2]) == tuple(K[:-2]) == tuple(V[:-2]):
        raise ValueError("Q, K and V must have the same batch dimensions (all but the last two); "
                         f"got Q {shape_str(Q)}, K {shape_str(K)} and V {shape_str(V)}")
    if Q[-1] == 0:
        raise ValueError(f"d_k must be at least 1; got Q {shape_str(Q)}")


def check_heads(d_model: int, n_heads: int, n_kv_heads: int | None = None) -> None:
    """Raise ``ValueError`` unless ``n_heads`` divides ``d_model`` (and ``n_kv_heads``, if given, divides
    ``n_heads``): every head gets ``d_model / n_heads`` columns, every key-value head a group of equal size."""
    if isinstance(n_heads, bool) or not isinstance(n_heads, Integral) or n_heads < 1 or d_model % n_heads:
        raise ValueError(f"d_model = {d_model} must be divisible by n_heads, so that every head gets "
                         f"d_model / n_heads columns; got n_heads = {n_heads!r}")
    if n_kv_heads is not None and (isinstance(n_kv_heads, bool) or not isinstance(n_kv_heads, Integral)
                                   or n_kv_heads < 1 or n_heads % n_kv_heads):
        raise ValueError(f"n_heads = {n_heads} must be divisible by n_kv_heads (each key-value head serves a "
                         f"group of query heads of equal size); got n_kv_heads = {n_kv_heads!r}")


def check_rotary_width(d_model: int, n_heads: int) -> None:
    """Raise ``ValueError`` unless every head's width ``d_model / n_heads`` is even: rotary positions (chapter 21)
    turn pairs of dimensions."""
    if (d_model // n_heads) % 2:
        raise ValueError(f"rotary positions turn pairs of dimensions, so d_head = d_model / n_heads must be even; "
                         f"got d_head = {d_model // n_heads}")


def check_mha_shapes(X_q: Sequence[int], X_kv: Sequence[int], W_q: Sequence[int], W_k: Sequence[int],
                     d_model: int, n_heads: int, n_kv_heads: int | None = None,
                     W_v: Sequence[int] | None = None) -> None:
    """The shape rules of multi-head attention, for its inputs and its row-convention weights.

    With ``n_kv_heads`` (grouped-query attention, chapter 20), ``W_k`` and ``W_v`` must also have
    ``n_kv_heads * d_head`` columns."""
    check_heads(d_model, n_heads, n_kv_heads)
    if n_kv_heads is not None:
        width = n_kv_heads * (d_model // n_heads)
        if W_k[-1] != width or (W_v is not None and W_v[-1] != width):
            raise ValueError(f"W_k and W_v must have n_kv_heads * d_head = {width} columns; got "
                             f"W_k {shape_str(W_k)} and W_v {shape_str(W_v if W_v is not None else W_k)}")
    if len(X_q) < 2 or X_q[-1] != W_q[0]:
        raise ValueError(f"X_q must have shape (..., T_q, {W_q[0]}) to match W_q {shape_str(W_q)}; "
                         f"got {shape_str(X_q)}")
    if len(X_kv) < 2 or X_kv[-1] != W_k[0]:
        raise ValueError(f"X_kv must have shape (..., T_k, {W_k[0]}) to match W_k {shape_str(W_k)}; "
                         f"got {shape_str(X_kv)}")
    if tuple(X_q[:-2]) != tuple(X_kv[:-2]):
        raise ValueError(f"X_q and X_kv must have the same batch dimensions; got {shape_str(X_q)} "
                         f"and {shape_str(X_kv)}")


def check_mask_fits(mask_shape: Sequence[int], scores_shape: Sequence[int]) -> None:
    """Raise ``ValueError`` unless a mask of ``mask_shape`` broadcasts to the scores ``(..., T_q, T_k)``."""
    import numpy as np  # shapes only; NumPy's broadcasting rules are PyTorch's too

    try:
        if len(mask_shape) > len(scores_shape):
            raise ValueError
        np.broadcast_shapes(tuple(mask_shape), tuple(scores_shape))
    except ValueError:
        raise ValueError(
            f"mask of shape {shape_str(mask_shape)} does not fit the attention scores of shape "
            f"{shape_str(scores_shape)} (..., T_q, T_k): it must equal that shape or broadcast to it"
        ) from None
