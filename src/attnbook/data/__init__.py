"""Data for the book: small hand-made examples, and (Part III) the corpora the models train on."""

from attnbook.data.bpe import BPETokenizer
from attnbook.data.grades import grades_and_salaries
from attnbook.data.masked_text import MaskedCharTokenizer
from attnbook.data.shakespeare import DataUnavailableError, load_tinyshakespeare, tinyshakespeare_path
from attnbook.data.text import CharTokenizer, random_windows, sequential_windows, split
from attnbook.data.toy_embeddings import TOY_FEATURES, toy_word_embeddings

__all__ = [
    "TOY_FEATURES",
    "BPETokenizer",
    "CharTokenizer",
    "DataUnavailableError",
    "MaskedCharTokenizer",
    "grades_and_salaries",
    "load_tinyshakespeare",
    "random_windows",
    "sequential_windows",
    "split",
    "tinyshakespeare_path",
    "toy_word_embeddings",
]
