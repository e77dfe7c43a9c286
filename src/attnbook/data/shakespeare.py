"""Tiny Shakespeare, the corpus of chapters 17 and 18: found locally, or downloaded once and checked.

The file (1,115,394 characters of Shakespeare's plays, collected for Karpathy's char-rnn) is looked
for in this order:

1. ``$ATTNBOOK_DATA_DIR/tinyshakespeare/input.txt``, when that environment variable is set;
2. the cache, ``$ATTNBOOK_CACHE_DIR`` or ``~/.cache/attnbook``, under ``tinyshakespeare/input.txt``;
3. otherwise it is downloaded from the char-rnn repository into the cache.

Whatever the source, its SHA-256 must match, so every reader trains on the same bytes.
"""

from __future__ import annotations

import hashlib
import os
import urllib.error
import urllib.request
from pathlib import Path

from attnbook._files import atomic_write

URL = "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt"
SHA256 = "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"
RELATIVE_PATH = Path("tinyshakespeare") / "input.txt"


class DataUnavailableError(RuntimeError):
    """The corpus is neither on disk nor downloadable; the message says where to put it."""


def cache_dir() -> Path:
    """Where downloads are kept: ``$ATTNBOOK_CACHE_DIR``, else ``~/.cache/attnbook``."""
    return Path(os.environ.get("ATTNBOOK_CACHE_DIR") or Path.home() / ".cache" / "attnbook")


def sha256_of(path: Path) -> str:
    """The SHA-256 of a file's bytes, in hexadecimal, read a mebibyte at a time."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _checked(path: Path, sha256: str) -> Path:
    found = sha256_of(path)
    if found != sha256:
        raise DataUnavailableError(f"{path} is not Tiny Shakespeare as published: its SHA-256 is {found}, "
                                   f"expected {sha256}. Delete it (or fix ATTNBOOK_DATA_DIR) and try again.")
    return path


def _download(url: str, dest: Path, sha256: str) -> Path:
    """Download to a temporary file beside ``dest``, check it, then rename: never a half-written file."""
    def fetch(out) -> None:
        with urllib.request.urlopen(url, timeout=30) as response:
            out.write(response.read())

    return atomic_write(dest, fetch, check=lambda tmp: _checked(tmp, sha256))


def tinyshakespeare_path(download: bool = True, url: str = URL, sha256: str = SHA256) -> Path:
    """The path of a verified copy of Tiny Shakespeare, downloading it into the cache if needed."""
    data_dir = os.environ.get("ATTNBOOK_DATA_DIR")
    cached = cache_dir() / RELATIVE_PATH
    for where, path in (("from ATTNBOOK_DATA_DIR", Path(data_dir) / RELATIVE_PATH if data_dir else None),
                        ("the cache", cached)):
        if path is not None and path.exists() and not path.is_file():
            raise DataUnavailableError(f"{path} ({where}) is a folder, not the file input.txt: remove it, or put "
                                       f"Tiny Shakespeare's input.txt there in its place")
    if data_dir and (Path(data_dir) / RELATIVE_PATH).is_file():
        return _checked(Path(data_dir) / RELATIVE_PATH, sha256)
    if cached.is_file():
        return _checked(cached, sha256)
    where = f"{Path(data_dir) / RELATIVE_PATH} (from ATTNBOOK_DATA_DIR) or {cached}" if data_dir else str(cached)
    if not download:
        raise DataUnavailableError(f"Tiny Shakespeare was not found at {where}, and downloading is off. "
                                   f"Download {url} and save it at one of those paths.")
    try:
        return _download(url, cached, sha256)
    except (urllib.error.URLError, OSError) as e:
        raise DataUnavailableError(
            f"Tiny Shakespeare is not on this machine and could not be downloaded ({e}). Without network, "
            f"copy input.txt from {url} to {cached}, or set ATTNBOOK_DATA_DIR to a folder that holds "
            f"{RELATIVE_PATH}.") from e


def load_tinyshakespeare(download: bool = True) -> str:
    """The text of Tiny Shakespeare (1,115,394 characters), verified by its SHA-256. Chapter 17."""
    return tinyshakespeare_path(download).read_text(encoding="utf-8")
