"""The backward pass of GELU, exact and in GPT-2's tanh approximation (chapter 19).

Exact: ``gelu(x) = x Phi(x)``, so ``gelu'(x) = Phi(x) + x phi(x)`` (``Phi`` and ``phi`` the standard normal's
distribution and density). Tanh form (``torch.nn.functional.gelu(x, approximate="tanh")``, the book's GPT):
``0.5 x (1 + tanh(u))`` with ``u = sqrt(2/pi) (x + 0.044715 x^3)``.
"""

from __future__ import annotations

import math

import numpy as np

_erf = np.frompyfunc(math.erf, 1, 1)  # NumPy has no erf; math.erf, entry by entry, is exact enough
_C = math.sqrt(2.0 / math.pi)


def _check(approximate: str) -> None:
    if approximate not in ("tanh", "none"):
        raise ValueError(f"approximate must be 'tanh' (GPT-2's GELU) or 'none' (exact); got {approximate!r}")


def gelu_forward(x: np.ndarray, approximate: str = "tanh") -> tuple[np.ndarray, dict]:
    """GELU of ``x`` (any shape), as ``torch.nn.functional.gelu(x, approximate=...)``; returns ``(y, cache)``.

    The cache keeps the input ``x``: the derivative depends on it.
    """
    _check(approximate)
    if approximate == "tanh":
        y = 0.5 * x * (1.0 + np.tanh(_C * (x + 0.044715 * x * x * x)))
    else:
        y = 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)).astype(x.dtype))
    return y, {"x": x, "approximate": approximate}


def gelu_backward(dy: np.ndarray, cache: dict) -> np.ndarray:
    """``dx = dy * gelu'(x)``, shape of ``dy``."""
    x = cache["x"]
    if cache["approximate"] == "tanh":
        t = np.tanh(_C * (x + 0.044715 * x * x * x))
        slope = 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t**2) * _C * (1.0 + 3 * 0.044715 * x * x)
    else:
        Phi = 0.5 * (1.0 + _erf(x / math.sqrt(2.0)).astype(x.dtype))
        slope = Phi + x * np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)
    return dy * slope
