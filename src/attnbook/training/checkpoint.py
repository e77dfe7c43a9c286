"""Checkpoints that survive a crash and load safely (chapter 17).

``save_checkpoint`` writes to a temporary file in the same folder, flushes it to disk, then renames it
over the old checkpoint: the rename is atomic, so a run killed mid-save leaves the previous checkpoint
whole. A save also removes the temporary files that a save killed outright (``SIGKILL``, a power cut)
left behind; one writer per checkpoint is assumed. ``load_checkpoint`` uses
``torch.load(weights_only=True)``, which reads tensors and plain Python containers only and never runs
code stored in the file; an empty, truncated or foreign file gives a ``ValueError`` that says so.
"""

from __future__ import annotations

import os
import pickle
import zipfile
from glob import escape as glob_escape
from pathlib import Path
from typing import Any

import torch

from attnbook._files import atomic_write


class CheckpointError(ValueError):
    """A checkpoint that cannot be saved or resumed from; the message says why and what to do."""


def save_checkpoint(state: dict[str, Any], path: str | os.PathLike) -> Path:
    """Write ``state`` (tensors, numbers, strings, lists, dicts) to ``path`` atomically."""
    path = Path(path)
    if path.is_dir():
        raise CheckpointError(f"cannot save a checkpoint at {path}: it is a folder; give a file path such as "
                         f"{path / 'ckpt.pt'}")
    if path.parent.is_dir():
        for stale in path.parent.glob(f"{glob_escape(path.name)}*.tmp"):  # from a save that was killed
            stale.unlink(missing_ok=True)
    return atomic_write(path, lambda f: torch.save(state, f))


def load_checkpoint(path: str | os.PathLike, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Read a checkpoint written by ``save_checkpoint``, with ``weights_only=True``.

    Raises ``FileNotFoundError`` when there is no file, and ``ValueError`` when the file is empty,
    truncated, corrupt, or holds objects other than tensors and plain containers (which are not loaded,
    since unpickling them could run code).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {path}" + (" (it is a folder)" if path.is_dir() else ""))
    if path.stat().st_size == 0:
        raise CheckpointError(f"the checkpoint {path} is empty (0 bytes): a save was interrupted before it began "
                         "writing, or the file was made by something else")
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError:
        # torch's own message suggests weights_only=False, which would run whatever code the file holds.
        raise CheckpointError(f"the checkpoint {path} is corrupt or holds unsupported objects, so it was not loaded: "
                         "a weights-only load reads tensors, numbers, strings, lists and dicts and nothing else "
                         "(unpickling anything else could run code); only files written by save_checkpoint "
                         "are read") from None
    except (EOFError, RuntimeError, OSError, ValueError, zipfile.BadZipFile) as exc:
        raise CheckpointError(f"the checkpoint {path} cannot be read: it is truncated or corrupt "
                         f"({type(exc).__name__})") from None
    if not isinstance(state, dict):
        raise CheckpointError(f"the checkpoint {path} holds a {type(state).__name__}, not the dict that "
                         "save_checkpoint writes")
    return state
