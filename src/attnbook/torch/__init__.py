"""PyTorch implementations (Part II of the book on), twins of ``attnbook.numpy``.

A function here has the same name, signature and meaning as its NumPy twin; the tests check each
pair against each other and against PyTorch's own built-ins.
"""

from attnbook.torch.similarity import cosine_similarity, dot, pairwise_cosine_similarity

__all__ = ["cosine_similarity", "dot", "pairwise_cosine_similarity"]
