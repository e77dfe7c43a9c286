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
PYTHON_VERSION = "3.11.7"  #: the CPython release whose standard library the text is taken from
#: The standard-library files the text is made of, in order.
PYTHON_SOURCE_FILES = ("textwrap.py", "heapq.py", "bisect.py", "fractions.py", "string.py", "shlex.py",
                       "colorsys.py", "queue.py", "random.py", "fnmatch.py", "glob.py", "graphlib.py", "reprlib.py",
                       "sched.py", "copy.py", "contextlib.py")
# The SHA-256 of the text load_python_source() returns (the file after its header), in UTF-8.
SHA256 = "7dbbee98c0769638555aa77472bfc6fed9378d23f092fa0ae307796e7d2acaec"
# Each file's SHA-256 as CPython 3.11.7 ships it: the text is checked against these on any Python.
FILE_SHA256 = {
    'textwrap.py': '62867e40cdea6669b361f72af4d7daf0359f207c92cbeddfc7c7506397c1f31c',
    'heapq.py': '6d43277e5c76fc0f073cd388fcff852d14d068f6bb6d4886c340f8b75a1229a9',
    'bisect.py': 'e5b2ff166f48a06e70ae831d8c9b47283fcd0c254306eee12d3dae9c55e11526',
    'fractions.py': 'b11e850e354808b882d13a70a911c29accd1dbdd41757566704e3b7206c74edb',
    'string.py': '24aeae1f0526250f442022022bf98df9a823b1cb330543ee79e70e44907462e9',
    'shlex.py': '42ab6060f316e121e374e6621d8c1c98b8db323903c3df289a810c45a8ae46a7',
    'colorsys.py': 'd9800f8e81d46e63ca6f2e7d6ac5f344d85afb92c3cf6d103b5f977f1ad66ac2',
    'queue.py': 'f6c37fc37cd7440979f7d22d40ee818fa3b714c573610c08fa52911d541193f0',
    'random.py': 'b931a2d452db89ab9e1f79d59b66ce194dbd6748049cfe44699726da52b9c956',
    'fnmatch.py': '6683da36e47af523f3f41e18ad244d837783e19e98911cc0b7415dea81494ebc',
    'glob.py': 'fa579f8a50a66313d34d339f10be0821c9b4fed6207e8ba8e29ed1c5e119f740',
    'graphlib.py': '7bd338c5a475d1101064603d3baa5507446d3c5e73f741f6d6e77c6204c1eb65',
    'reprlib.py': '264433cc232332db871666b3bb6e4c2cb97b092cb8d5056a45ec2e53daea2b1c',
    'sched.py': 'edfb309483d7cb05e06ad86d1fdeb819629f71402dc6710a1bec36c7afcaac50',
    'copy.py': '27dcfc53a4b9d4fbc3d90c74e549eb6eca9301524d6d2fbff9a6589cf51b6fd5',
    'contextlib.py': 'd732c045bc7450997f97b2f79cfdb1546b68d2655e89ab3170f3b19b3930d83c',
}


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
