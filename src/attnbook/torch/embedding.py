"""Token and position embeddings, and the unembedding (chapter 13; Phuong and Hutter, algorithms 1, 2, 7)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from attnbook._validate import require_int
from attnbook.numpy.positional import sinusoidal_encoding
from attnbook.torch._checks import require_size


def _check_span(T: int, offset: int, max_len: int, what: str) -> None:
    """Positions ``offset .. offset + T - 1`` must be whole numbers inside the table. ``T`` and ``offset`` are
    Python integers (or, under ``torch.compile``, symbolic ones), so the check costs no device sync."""
    require_size("T", T, 0)
    require_size("offset", offset, 0)
    if offset + T > max_len:
        raise ValueError(f"positions up to {offset + T - 1} requested, but {what} {max_len} (max_len); use shorter "
                         "sequences or a larger max_len")


def _check_ids(ids: torch.Tensor, size: int, what: str) -> torch.Tensor:
    """``ids`` as int64 or int32 (what ``F.embedding`` takes), after checking they are integers; any integer
    dtype is accepted. Their range is checked by ``_check_range``, only where it is needed."""
    if not isinstance(ids, torch.Tensor):
        raise ValueError(f"{what} must be a torch.Tensor of integers; got {type(ids).__name__}")
    if ids.dtype == torch.bool or ids.is_floating_point() or ids.is_complex():
        raise ValueError(f"{what} must be integer ids; got dtype {ids.dtype} (any integer dtype is accepted, "
                         "such as torch.long or torch.int8)")
    return ids if ids.dtype in (torch.int64, torch.int32) else ids.long()


def _check_range(ids: torch.Tensor, size: int, what: str) -> None:
    """Raise ``ValueError`` unless every id lies in ``[0, size)``."""
    if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= size):
        raise ValueError(f"{what} must lie in [0, {size - 1}]; got values from {int(ids.min())} to {int(ids.max())}")


def embed(ids: torch.Tensor, table: torch.Tensor, what: str) -> torch.Tensor:
    """Rows ``table[ids]``, ``(...)`` ids to ``(..., d)``, with an error that names the range on a bad id.

    On the CPU the lookup itself finds a bad id (an ``IndexError``), so the range is checked only then, not
    on every call (a ``min`` and a ``max`` over the batch); on a GPU a bad id is a device-side assertion
    that ends the process, so the range is checked first.
    """
    ids = _check_ids(ids, table.shape[0], what)
    if ids.device.type != "cpu":
        _check_range(ids, table.shape[0], what)
        return F.embedding(ids, table)
    try:
        return F.embedding(ids, table)  # deterministic backward on CPU, unlike table[ids]
    except IndexError:
        _check_range(ids, table.shape[0], what)
        raise


class TokenEmbedding(nn.Module):
    """Algorithm 1: row ``i`` of ``E`` (shape ``(V, d_model)``) is the vector of token ``i``."""

    def __init__(self, vocab_size: int, d_model: int) -> None:
        super().__init__()
        self.E = nn.Parameter(torch.randn(vocab_size, d_model) * 0.02)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """``(B, T)`` integer ids (any integer dtype) to ``(B, T, d_model)`` vectors."""
        return embed(ids, self.E, "token ids")


class LearnedPositions(nn.Module):
    """Algorithm 2 with a learned table ``P`` of shape ``(max_len, d_model)``."""

    def __init__(self, max_len: int, d_model: int) -> None:
        super().__init__()
        require_int("max_len", max_len, 1)
        require_int("d_model", d_model, 1)
        self.P = nn.Parameter(torch.randn(max_len, d_model) * 0.02)

    def forward(self, T: int, offset: int = 0) -> torch.Tensor:
        """The vectors of positions ``offset .. offset + T - 1``, shape ``(T, d_model)``. Refuses a negative or
        non-integer ``T`` or ``offset``, and positions beyond the table."""
        _check_span(T, offset, self.P.shape[0], "the table has only")
        return self.P[offset:offset + T]


class SinusoidalPositions(nn.Module):
    """Algorithm 2 with the fixed sinusoidal encoding of chapter 11 (a buffer, not a parameter)."""

    def __init__(self, max_len: int, d_model: int) -> None:
        super().__init__()
        self.register_buffer("P", torch.tensor(sinusoidal_encoding(max_len, d_model), dtype=torch.float32))

    def forward(self, T: int, offset: int = 0) -> torch.Tensor:
        """The encodings of positions ``offset .. offset + T - 1``, ``(T, d_model)``; refuses what
        ``LearnedPositions`` refuses."""
        _check_span(T, offset, self.P.shape[0], "the number precomputed is")
        return self.P[offset:offset + T]


class Unembedding(nn.Module):
    """Algorithm 7: vectors ``(..., d_model)`` to logits over the vocabulary ``(..., V)``, ``x W_u + b``."""

    def __init__(self, d_model: int, vocab_size: int, bias: bool = False) -> None:
        super().__init__()
        self.W_u = nn.Parameter(torch.randn(d_model, vocab_size) * 0.02)
        self.b = nn.Parameter(torch.zeros(vocab_size)) if bias else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        logits = x @ self.W_u
        return logits + self.b if self.b is not None else logits
