"""Evaluations of trained models: exact match of an encoder-decoder on whole sequences (chapter 16), and a
language model's cross-entropy over a text, by window, by position and in bits per character (chapters 17
to 23)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from attnbook.data.bpe import BPETokenizer
from attnbook.data.text import CharTokenizer, sequential_windows
from attnbook.torch.decoding import greedy_decode
from attnbook.torch.modes import eval_mode
from attnbook.torch.transformer import GPT


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


@torch.no_grad()
def evaluate_loss(model: GPT, data: torch.Tensor, block_size: int, batch_size: int = 64,
                  max_batches: int | None = None, device: torch.device | str = "cpu") -> float:
    """Mean cross-entropy (nats per character) over non-overlapping windows of ``data``, in order."""
    with eval_mode(model):
        total, count = 0.0, 0
        for x, y in sequential_windows(data, block_size, batch_size, max_batches):
            logits = model(x.to(device))
            total += F.cross_entropy(logits.flatten(0, 1).float(), y.to(device).flatten(), reduction="sum").item()
            count += y.numel()
    return total / count


@torch.no_grad()
def loss_by_position(model: GPT, data: torch.Tensor, length: int, batch_size: int = 16,
                     max_batches: int | None = None, window: int | None = None) -> torch.Tensor:
    """Mean cross-entropy (nats) at each position of non-overlapping windows of ``length`` tokens of
    ``data``, in order: shape ``(length,)``. A model with rotary positions accepts ``length`` beyond its
    ``block_size`` (chapter 21); ``window`` limits each position to the last ``window`` positions."""
    with eval_mode(model):
        total, count = torch.zeros(length, dtype=torch.float64), 0
        for x, y in sequential_windows(data, length, batch_size, max_batches):
            logits = model(x, window=window)  # (B, length, V)
            losses = F.cross_entropy(logits.transpose(1, 2).float(), y, reduction="none")  # (B, length)
            total += losses.sum(0).double()
            count += len(x)
    return total / count


@torch.no_grad()
def per_window_losses(model: GPT, data: torch.Tensor, block_size: int, batch_size: int = 64,
                      max_batches: int | None = None, device: torch.device | str = "cpu") -> torch.Tensor:
    """The mean cross-entropy (nats per character) of each non-overlapping window of ``data``, in order.

    Returns ``(N,)`` for the ``N = (len(data) - 1) // block_size`` windows (fewer with ``max_batches``):
    the windows of ``evaluate_loss``, one loss each, so that two models, or one model with and without a
    change, can be compared window by window (chapter 18).
    """
    with eval_mode(model):
        losses = []
        for x, y in sequential_windows(data, block_size, batch_size, max_batches):
            logits = model(x.to(device)).float()  # (B, T, V)
            per_token = F.cross_entropy(logits.transpose(1, 2), y.to(device), reduction="none")  # (B, T)
            losses.append(per_token.mean(dim=1).cpu())
    return torch.cat(losses)


@torch.no_grad()
def bits_per_character(model: GPT, ids: torch.Tensor, tokenizer: CharTokenizer | BPETokenizer,
                       batch_size: int = 64) -> float:
    """Total cross-entropy of every token of ``ids`` after the first, in bits, over the number of
    characters those tokens spell (chapter 23): a loss that compares models with different tokenizers.

    ``ids`` ``(N,)`` is cut into consecutive windows of the model's context (the last one shorter), so
    each token is predicted once, from the tokens before it in its window.
    """
    with eval_mode(model):
        T = model.config.block_size
        starts = list(range(0, len(ids) - 1, T))
        total = 0.0
        for i in range(0, len(starts), batch_size):
            group = starts[i:i + batch_size]
            full = [s for s in group if s + T + 1 <= len(ids)]
            parts = [torch.stack([ids[s:s + T + 1] for s in full])] if full else []
            parts += [ids[s:][None] for s in group if s + T + 1 > len(ids)]  # the shorter last window
            for windows in parts:  # (B, T' + 1)
                logits = model(windows[:, :-1])
                total += F.cross_entropy(logits.flatten(0, 1).float(), windows[:, 1:].flatten(), reduction="sum").item()
    per_token = tokenizer.char_counts() if isinstance(tokenizer, BPETokenizer) else torch.ones(tokenizer.vocab_size)
    return total / float(per_token[ids[1:]].sum()) / math.log(2)
