"""Python source code, the second text of chapter 27: a fixed selection of the standard library, shipped with
the package.

Every Python installation has its standard library's source, but it changes from one version to the next,
so a model fine-tuned on "the source of ``textwrap.py``" would see another text on Python 3.12 than on 3.11.
The package therefore carries one copy: sixteen modules of CPython 3.11.7's ``Lib/`` directory, unchanged
and concatenated (``python_stdlib.txt`` beside this module, whose header names them and reproduces the PSF
License Agreement they are distributed under). ``load_python_source()`` returns that text, checked by its
SHA-256, the same on every Python.

A character model trained on Shakespeare knows only Shakespeare's 65 characters; ``to_alphabet`` maps the
others onto them (chapter 27).
"""

from __future__ import annotations

import hashlib
from importlib import resources

from attnbook.data.shakespeare import DataUnavailableError

FILE_NAME = "python_stdlib.txt"
END_OF_HEADER = "# --- end of header ---\n"
PYTHON_VERSION = "3.11.7"
PYTHON_SOURCE_FILES = ("textwrap.py", "heapq.py", "bisect.py", "fractions.py", "string.py", "shlex.py",
                       "colorsys.py", "queue.py", "random.py", "fnmatch.py", "glob.py", "graphlib.py", "reprlib.py",
                       "sched.py", "copy.py", "contextlib.py")
# The SHA-256 of the text load_python_source() returns (the file after its header), in UTF-8.
SHA256 = "7dbbee98c0769638555aa77472bfc6fed9378d23f092fa0ae307796e7d2acaec"


def load_python_source() -> str:
    """The source of ``PYTHON_SOURCE_FILES`` from CPython 3.11.7, concatenated, each file after a line
    ``# file: NAME.py``: about 220,000 characters, the same on every Python version (chapter 27).

    Raises ``DataUnavailableError`` when the file is missing from the installed package or has changed."""
    try:
        raw = resources.files("attnbook.data").joinpath(FILE_NAME).read_bytes()
    except FileNotFoundError:
        raise DataUnavailableError(f"{FILE_NAME} is missing from the installed attnbook.data package; reinstall "
                                   "attnbook (the file is package data, shipped beside attnbook/data/__init__.py)"
                                   ) from None
    text = raw.decode("utf-8")
    if END_OF_HEADER not in text:
        raise DataUnavailableError(f"{FILE_NAME} lacks its header's last line {END_OF_HEADER.strip()!r}")
    body = text.split(END_OF_HEADER, 1)[1]
    found = hashlib.sha256(body.encode("utf-8")).hexdigest()
    if found != SHA256:
        raise DataUnavailableError(f"{FILE_NAME} is not the text the book was written with: its SHA-256 is {found}, "
                                   f"expected {SHA256}; reinstall attnbook")
    return body


# Characters Shakespeare lacks that Python reads alike: a string between double quotes means what it means
# between single ones, and one digit stands for another as far as the grammar goes.
SUBSTITUTES = {'"': "'", **dict.fromkeys("0123456789", "3")}


def to_alphabet(text: str, alphabet: str, substitutes: dict[str, str] | None = None, other: str = "$") -> str:
    """``text`` with every character outside ``alphabet`` replaced: by ``substitutes[c]`` when given
    (``SUBSTITUTES`` by default, a digit to ``3`` and ``"`` to ``'``), else by ``other`` (chapter 27).

    Keeps the length, so position ``i`` of the result is position ``i`` of ``text``. Raises ``ValueError``
    when ``other``, or a substitute the text needs, is not itself in ``alphabet``."""
    substitutes = SUBSTITUTES if substitutes is None else substitutes
    allowed = set(alphabet)
    if len(other) != 1 or other not in allowed:
        raise ValueError(f"other must be one character of the alphabet; got {other!r}")
    unknown = set(text) - allowed
    bad = {c: s for c, s in substitutes.items() if c in unknown and (len(s) != 1 or s not in allowed)}
    if bad:
        raise ValueError(f"every substitute must be one character of the alphabet; got {bad}")
    table = {c: substitutes.get(c, other) for c in unknown}
    return text.translate(str.maketrans(table)) if table else text
