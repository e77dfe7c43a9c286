"""Data for the book: small hand-made examples, and (Part III) the corpora the models train on."""

from attnbook.data.grades import grades_and_salaries
from attnbook.data.toy_embeddings import TOY_FEATURES, toy_word_embeddings

__all__ = ["TOY_FEATURES", "grades_and_salaries", "toy_word_embeddings"]
