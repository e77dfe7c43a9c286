"""A character tokenizer with one special id for a masked position (chapter 24).

``MaskedCharTokenizer`` keeps every id of ``CharTokenizer`` as it is and adds ``mask_id``, one past the
last character, so a model trained on it has a vocabulary of ``len(chars) + 1``. The mask is written
and read as ``mask_symbol`` (``"_"`` by default), which must not be one of the characters.
"""

from __future__ import annotations

from numbers import Integral

import torch

from attnbook.data.text import CharTokenizer


class MaskedCharTokenizer(CharTokenizer):
    """``CharTokenizer`` plus a mask token: ids ``0 .. len(chars) - 1`` are the characters, as before,
    and ``mask_id = len(chars)`` stands for a hidden character.

    ``encode`` turns ``mask_symbol`` into ``mask_id``, so ``"To b_, or not"`` is a line with one blank;
    ``decode`` writes ``mask_id`` back as ``mask_symbol``.
    """

    def __init__(self, chars: str, mask_symbol: str = "_") -> None:
        super().__init__(chars)
        if len(mask_symbol) != 1:
            raise ValueError(f"mask_symbol must be one character; got {mask_symbol!r}")
        if mask_symbol in self.stoi:
            raise ValueError(f"mask_symbol {mask_symbol!r} is one of the characters; choose another one")
        self.mask_symbol = mask_symbol
        self.mask_id = len(chars)

    @classmethod
    def from_text(cls, text: str, mask_symbol: str = "_") -> MaskedCharTokenizer:
        return cls("".join(sorted(set(text))), mask_symbol)

    @property
    def vocab_size(self) -> int:
        """The characters and the mask token."""
        return len(self.chars) + 1

    def encode(self, text: str) -> torch.Tensor:
        """A string of ``T`` characters to a ``(T,)`` tensor of ids; ``mask_symbol`` becomes ``mask_id``."""
        ids = torch.full((len(text),), self.mask_id, dtype=torch.long)
        keep = [i for i, c in enumerate(text) if c != self.mask_symbol]
        if keep:
            ids[keep] = super().encode("".join(text[i] for i in keep))
        return ids

    def decode(self, ids) -> str:
        """A sequence of ids back to a string, ``mask_id`` written as ``mask_symbol``. Refuses ids that are not
        integers in ``[0, vocab_size)`` (a float such as ``1.0`` included)."""
        ids = ids.tolist() if isinstance(ids, torch.Tensor) else list(ids)
        bad = [i for i in ids if isinstance(i, bool) or not (isinstance(i, Integral) and 0 <= i < self.vocab_size)]
        if bad:
            raise ValueError(f"ids must lie in [0, {self.vocab_size - 1}], integers; got {bad[:5]}")
        return "".join(self.mask_symbol if i == self.mask_id else self.chars[i] for i in ids)

    def __repr__(self) -> str:
        return f"MaskedCharTokenizer(vocab_size={self.vocab_size}, mask_id={self.mask_id})"
