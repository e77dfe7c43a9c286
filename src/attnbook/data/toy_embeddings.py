"""A small, readable word-embedding table for chapter 1.

Real embeddings have hundreds of unnamed dimensions. These have four, each with a meaning a person
can read, plus a little fixed noise so that vector arithmetic never lands exactly on a word.
"""

from __future__ import annotations

import numpy as np

#: What each column of the toy embeddings means.
TOY_FEATURES: tuple[str, ...] = ("royalty", "masculinity", "age", "is a person")

# word: (royalty, masculinity (+1 male, -1 female), age (+1 adult, -1 child), is a person)
_WORDS: dict[str, tuple[float, float, float, float]] = {
    "king": (1.0, 1.0, 1.0, 1.0),
    "queen": (1.0, -1.0, 1.0, 1.0),
    "prince": (1.0, 1.0, -1.0, 1.0),
    "princess": (1.0, -1.0, -1.0, 1.0),
    "monarch": (1.0, 0.0, 1.0, 1.0),
    "man": (0.0, 1.0, 1.0, 1.0),
    "woman": (0.0, -1.0, 1.0, 1.0),
    "boy": (0.0, 1.0, -1.0, 1.0),
    "girl": (0.0, -1.0, -1.0, 1.0),
    "child": (0.0, 0.0, -1.0, 1.0),
    "crown": (1.0, 0.0, 0.0, 0.0),
    "palace": (0.8, 0.0, 0.0, -0.5),
    "apple": (0.0, 0.0, 0.0, -1.0),
}


def toy_word_embeddings(noise: float = 0.1, seed: int = 0) -> tuple[list[str], np.ndarray]:
    """Return ``(words, E)``: a vocabulary of 13 words and their embeddings.

    Shapes: ``E`` is ``(V, 4)`` with ``V = len(words)``; row ``i`` embeds ``words[i]`` and the
    columns mean ``TOY_FEATURES``. Values are rounded to two decimals so that they print cleanly.
    """
    words = list(_WORDS)
    base = np.array([_WORDS[w] for w in words], dtype=np.float64)
    rng = np.random.default_rng(seed)
    E = np.round(base + noise * rng.standard_normal(base.shape), 2)
    return words, E
