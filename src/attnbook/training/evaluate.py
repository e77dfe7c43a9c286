"""Exact-match accuracy of an encoder-decoder model on whole sequences (chapter 16)."""

from __future__ import annotations

import torch

from attnbook.torch.decoding import greedy_decode


@torch.no_grad()
def exact_match(model, src: torch.Tensor, tgt: torch.Tensor, bos_id: int, eos_id: int, pad_id: int = 0,
                batch_size: int = 500) -> float:
    """Share of sequences whose greedy decoding equals the target exactly, up to and including the end.

    Shapes: ``src`` ``(N, S)`` and ``tgt`` ``(N, T)`` padded with ``pad_id``; each target ends with ``eos_id``.
    """
    correct = 0
    for start in range(0, len(src), batch_size):
        s, t = src[start:start + batch_size], tgt[start:start + batch_size]
        out = greedy_decode(model, s, bos_id, eos_id, max_len=t.shape[1] + 1)[:, 1:]  # drop <bos>
        width = max(out.shape[1], t.shape[1])
        out = torch.nn.functional.pad(out, (0, width - out.shape[1]), value=eos_id)
        want = torch.nn.functional.pad(t, (0, width - t.shape[1]), value=pad_id)
        real = want != pad_id
        correct += int(((out == want) | ~real).all(dim=1).sum())
    return correct / len(src)
