"""NumPy implementations, one concept per module (Part I of the book).

Every function here has a twin of the same name and signature in ``attnbook.torch`` where the
concept exists there too.
"""

from attnbook.numpy.similarity import (
    analogy,
    cosine_similarity,
    dot,
    nearest,
    pairwise_cosine_similarity,
)

__all__ = ["analogy", "cosine_similarity", "dot", "nearest", "pairwise_cosine_similarity"]
