"""Sequences that repeat a random segment, the test bed of induction heads (chapter 28).

A row is a segment of ``length`` tokens drawn uniformly from ``vocab_size`` ids, followed by the same
segment again: ``x[L + i] = x[i]``. Nothing predicts the first copy; after its first token, the second copy
is predictable by looking back at the first, and only that way.
"""

from __future__ import annotations

import torch

from attnbook._validate import require_int


def repeated_segments(batch_size: int, length: int, vocab_size: int,
                      generator: torch.Generator | None = None) -> torch.Tensor:
    """``(B, 2 L)`` int64 ids: ``B = batch_size`` random segments of ``L = length`` ids in ``[0, vocab_size)``,
    each followed by itself. Drawn with ``generator`` (seeded by the caller). Chapter 28."""
    require_int("batch_size", batch_size, 1)
    require_int("length", length, 1)
    require_int("vocab_size", vocab_size, 1)
    segment = torch.randint(vocab_size, (batch_size, length), generator=generator)  # (B, L)
    return torch.cat([segment, segment], dim=1)  # (B, 2L)


def copy_masks(length: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Which predicted tokens of a ``(B, 2 L)`` repeated row belong to each copy: two boolean ``(2 L - 1,)``
    masks over the targets ``x[1:]`` (entry ``s - 1`` is token ``s``). ``first`` marks tokens ``1 .. L - 1``,
    ``second`` tokens ``L + 1 .. 2 L - 1``: the same ``L - 1`` offsets in each copy. Token ``L``, the second
    copy's first, is in neither: the token before it (the first copy's last) says nothing about it.
    Chapter 28."""
    require_int("length", length, 2)
    s = torch.arange(1, 2 * length)  # the positions of the targets
    return s < length, s > length
