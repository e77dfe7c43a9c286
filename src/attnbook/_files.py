"""Writing files so that a crash never leaves a half-written one (checkpoints, logs, downloads)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO


def atomic_write(path: str | os.PathLike, write: Callable[[BinaryIO], None],
                 check: Callable[[Path], None] | None = None) -> Path:
    """Write ``path`` through ``write(file)``: into a temporary file beside it, flushed to disk, then renamed.

    The rename is atomic, so ``path`` holds either its old content or the whole new one, never a part.
    ``check(tmp_path)``, if given, may raise to refuse the new content before it replaces the old. The
    temporary file is removed whatever happens.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        if check is not None:
            check(Path(tmp))
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return path
