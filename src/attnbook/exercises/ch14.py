"""Checkers for the coding exercises of chapter 14 (the decoder block)."""

from __future__ import annotations

import torch

from attnbook.exercises._harness import Case, Checker, Mistake
from attnbook.torch import causal_mask, combine_masks, padding_mask
from attnbook.training.seq2seq import shift_right


def _shift_cases() -> list[Case]:
    return [
        Case("tgt=[[5, 6, 7]], bos_id=1", (torch.tensor([[5, 6, 7]]), 1)),
        Case("tgt=[[5, 6, 7, 2], [8, 9, 2, 0]], bos_id=1", (torch.tensor([[5, 6, 7, 2], [8, 9, 2, 0]]), 1)),
        Case("tgt=[[4]], bos_id=3", (torch.tensor([[4]]), 3)),
    ]


def _prepend(tgt, bos_id):
    return torch.cat([torch.full_like(tgt[:, :1], bos_id), tgt], dim=1)


def _shift_left(tgt, bos_id):
    return torch.cat([tgt[:, 1:], torch.full_like(tgt[:, :1], bos_id)], dim=1)


check_shift_right = Checker(
    name="shift_right",
    doc="Check ``fn(tgt, bos_id) -> (B, T)``: the decoder input for teacher forcing.",
    reference=shift_right,
    cases=_shift_cases(),
    mistakes=(
        Mistake(_prepend, "keep the length T: prepend bos_id and drop the last token."),
        Mistake(_shift_left, "the decoder input runs one step behind the target: bos_id goes first, on the left."),
    ),
)


def _mask(lengths, T):
    return combine_masks(causal_mask(T), padding_mask(lengths, T))  # (T, T) & (B, 1, T) -> (B, T, T)


def _causal_only(lengths, T):
    return causal_mask(T).expand(len(lengths), T, T)


def _upper(lengths, T):
    return combine_masks(causal_mask(T).T, padding_mask(lengths, T))


check_decoder_self_mask = Checker(
    name="decoder_self_mask",
    doc="Check ``fn(lengths, T) -> (B, T, T)`` booleans: causal and padding masks combined.",
    reference=_mask,
    cases=[Case(f"lengths={ls}, T={T}", (torch.tensor(ls), T)) for ls, T in (([3], 3), ([4, 2], 4), ([1, 5, 3], 5))],
    mistakes=(
        Mistake(_causal_only, "padded keys (positions >= length) must be masked as well as the future."),
        Mistake(_upper, "query i may see keys j <= i: the lower triangle (tril), not the upper."),
    ),
)
