"""What backpropagation stores: the bytes of the activations in a cache (chapter 19)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np


def cache_nbytes(cache: Any, exclude: Iterable[np.ndarray] = ()) -> int:
    """Bytes of the distinct arrays in a (nested) cache, leaving out the arrays in ``exclude``.

    Pass the parameters as ``exclude``: a cache refers to the weights it needs, but they exist anyway; what
    training adds is the activations. An array kept by two caches (an input shared by three projections) is
    counted once.
    """
    seen = {id(a) for a in exclude}
    total = 0
    stack = [cache]
    while stack:
        item = stack.pop()
        if isinstance(item, np.ndarray):
            if id(item) not in seen:
                seen.add(id(item))
                total += item.nbytes
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return total
