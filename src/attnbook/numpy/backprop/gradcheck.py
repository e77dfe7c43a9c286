"""Central finite differences: the slow, simple oracle for every gradient (chapter 19)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


def numerical_gradient(f: Callable[[], float], x: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """``(f(x + eps e_i) - f(x - eps e_i)) / (2 eps)`` for every entry ``i`` of ``x``, shape of ``x``.

    ``f`` takes no argument and reads ``x``, which is changed in place and restored: so ``x`` can be any
    parameter deep inside a model. The error is about ``eps^2 |f'''| / 6`` (truncation) plus about
    ``u |f| / eps`` (rounding, ``u`` the unit roundoff), smallest at ``eps = (3 u |f| / |f'''|)^(1/3)``, within an
    order of magnitude of ``u^(1/3)`` (about 5e-6 in float64) unless ``|f|`` and ``|f'''|`` differ greatly. The
    default 1e-6 errs on the rounding side (chapter 19 measures the error against the step).
    """
    if not np.issubdtype(x.dtype, np.floating):
        raise ValueError(f"x must be a floating-point array; got dtype {x.dtype}")
    grad = np.zeros_like(x)
    flat, gflat = x.reshape(-1), grad.reshape(-1)
    if not np.shares_memory(flat, x):
        raise ValueError("x must be contiguous, so that changing it in place reaches f")
    for i in range(flat.size):
        old = flat[i]
        flat[i] = old + eps
        up = f()
        flat[i] = old - eps
        down = f()
        flat[i] = old
        gflat[i] = (up - down) / (2 * eps)
    return grad
