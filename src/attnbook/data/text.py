"""Text as numbers for a character-level language model (chapter 17).

``CharTokenizer`` maps each character of a fixed alphabet to an id; ``split`` cuts a corpus into
training and validation parts; ``random_windows`` and ``sequential_windows`` turn a long id sequence
into batches of inputs and next-character targets.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch


class CharTokenizer:
    """One id per character: the sorted characters of the text it was built from.

    ``encode`` names the characters it does not know instead of failing obscurely.
    """

    def __init__(self, chars: str) -> None:
        if len(set(chars)) != len(chars):
            raise ValueError("the alphabet must not repeat characters")
        self.chars = chars
        self.stoi = {c: i for i, c in enumerate(chars)}

    @classmethod
    def from_text(cls, text: str) -> CharTokenizer:
        return cls("".join(sorted(set(text))))

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    def encode(self, text: str) -> torch.Tensor:
        """A string of ``T`` characters to a ``(T,)`` tensor of ids (int64)."""
        unknown = sorted(set(text) - self.stoi.keys())
        if unknown:
            raise ValueError(f"these characters are not in the tokenizer's alphabet of {self.vocab_size}: "
                             f"{''.join(unknown)!r}; the alphabet is {self.chars!r}")
        return torch.tensor([self.stoi[c] for c in text], dtype=torch.long)

    def decode(self, ids) -> str:
        """A sequence of ids (list or 1-D tensor) back to a string."""
        ids = ids.tolist() if isinstance(ids, torch.Tensor) else list(ids)
        bad = [i for i in ids if not 0 <= i < self.vocab_size]
        if bad:
            raise ValueError(f"ids must lie in [0, {self.vocab_size - 1}]; got {bad[:5]}")
        return "".join(self.chars[i] for i in ids)

    def __repr__(self) -> str:
        return f"CharTokenizer(vocab_size={self.vocab_size})"


def split(ids: torch.Tensor, train_fraction: float = 0.9) -> tuple[torch.Tensor, torch.Tensor]:
    """The first ``train_fraction`` of ``ids`` for training, the rest for validation (no shuffling: the
    validation text is a passage the model never saw, not scattered lines of scenes it did)."""
    if not 0 < train_fraction < 1:
        raise ValueError(f"train_fraction must lie strictly between 0 and 1; got {train_fraction}")
    n = int(train_fraction * len(ids))
    return ids[:n], ids[n:]


def _check_long_enough(data: torch.Tensor, block_size: int) -> None:
    if len(data) < block_size + 1:
        raise ValueError(f"need at least block_size + 1 = {block_size + 1} ids to make one window; got {len(data)}")


def random_windows(data: torch.Tensor, block_size: int, batch_size: int,
                   generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """``batch_size`` windows at random offsets: inputs ``x`` and targets ``y`` (``x`` shifted by one),
    both ``(B, block_size)``."""
    _check_long_enough(data, block_size)
    starts = torch.randint(len(data) - block_size, (batch_size,), generator=generator)
    offsets = starts[:, None] + torch.arange(block_size + 1)  # (B, block_size + 1)
    windows = data[offsets]
    return windows[:, :-1], windows[:, 1:]


def sequential_windows(data: torch.Tensor, block_size: int, batch_size: int,
                       max_batches: int | None = None) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Non-overlapping windows covering ``data`` in order, in batches: the same every time, for evaluation."""
    _check_long_enough(data, block_size)
    n_windows = (len(data) - 1) // block_size
    starts = torch.arange(n_windows) * block_size
    for b, i in enumerate(range(0, n_windows, batch_size)):
        if max_batches is not None and b >= max_batches:
            return
        offsets = starts[i:i + batch_size, None] + torch.arange(block_size + 1)
        windows = data[offsets]
        yield windows[:, :-1], windows[:, 1:]
