"""NumPy implementations, one concept per module (Part I of the book).

Every function here has a twin of the same name and signature in ``attnbook.torch`` where the
concept exists there too.
"""

from attnbook.numpy.attention import masked_softmax, scaled_dot_product_attention, single_query_attention
from attnbook.numpy.lookup import soft_lookup
from attnbook.numpy.similarity import (
    analogy,
    cosine_similarity,
    dot,
    nearest,
    pairwise_cosine_similarity,
)
from attnbook.numpy.softmax import softmax, softmax_jacobian

__all__ = [
    "analogy",
    "cosine_similarity",
    "dot",
    "masked_softmax",
    "nearest",
    "pairwise_cosine_similarity",
    "scaled_dot_product_attention",
    "single_query_attention",
    "soft_lookup",
    "softmax",
    "softmax_jacobian",
]
