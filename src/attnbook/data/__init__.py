"""Data for the book: small hand-made examples, and (Part III) the corpora the models train on."""

from attnbook._lazy import lazy_exports
from attnbook.data.grades import grades_and_salaries
from attnbook.data.python_source import load_python_source, to_alphabet
from attnbook.data.shakespeare import DataUnavailableError, load_tinyshakespeare, tinyshakespeare_path
from attnbook.data.toy_embeddings import TOY_FEATURES, toy_word_embeddings

# The tokenizers and windows make PyTorch tensors: imported on first use, so that the NumPy chapters' data
# loads where PyTorch is not installed.
_NEED_TORCH = {
    "BPETokenizer": "bpe",
    "MaskedCharTokenizer": "masked_text",
    "CharTokenizer": "text",
    "random_windows": "text",
    "sequential_windows": "text",
    "split": "text",
}
__getattr__, __dir__ = lazy_exports(__name__, _NEED_TORCH)

__all__ = [
    "TOY_FEATURES",
    "BPETokenizer",
    "CharTokenizer",
    "DataUnavailableError",
    "MaskedCharTokenizer",
    "grades_and_salaries",
    "load_python_source",
    "load_tinyshakespeare",
    "random_windows",
    "sequential_windows",
    "split",
    "tinyshakespeare_path",
    "to_alphabet",
    "toy_word_embeddings",
]
