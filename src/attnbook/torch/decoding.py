"""Turning a model's logits into text (chapter 15; Phuong and Hutter, algorithm 14).

``generate`` samples from a decoder-only model one token at a time: greedy (argmax), with a
temperature, and optionally only among the ``top_k`` likeliest tokens. ``greedy_decode`` does the same
for an encoder-decoder model, given the source.
"""

from __future__ import annotations

import torch

from attnbook.torch.kvcache import KVCache
from attnbook.torch.modes import eval_mode


def top_k_filter(logits: torch.Tensor, k: int) -> torch.Tensor:
    """Keep the ``k`` largest logits of each row and set the rest to ``-inf`` (ties with the ``k``-th kept).

    Shapes: ``logits`` ``(..., V)`` to ``(..., V)``; ``k`` between 1 and ``V``. Chapter 15.
    """
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= logits.shape[-1]:
        raise ValueError(f"top_k must be between 1 and the vocabulary size {logits.shape[-1]}; got {k!r}")
    kth = torch.topk(logits, k, dim=-1).values[..., -1:]  # (..., 1): the k-th largest of each row
    return logits.masked_fill(logits < kth, float("-inf"))


def sample_next(logits: torch.Tensor, temperature: float = 1.0, top_k: int | None = None,
                greedy: bool = False, generator: torch.Generator | None = None) -> torch.Tensor:
    """Pick one token per row from ``logits`` of shape ``(B, V)``; returns ``(B, 1)`` ids.

    ``greedy`` takes the argmax. Otherwise the logits are divided by ``temperature``, all but the
    ``top_k`` largest set to ``-inf``, and a token is drawn from the softmax. Refuses logits that are not
    ``(B, V)`` or that hold NaN: the argmax of a NaN row would be a token id that means nothing (one check per
    generated token, which waits for the logits; generation reads each token back anyway).
    """
    if not isinstance(logits, torch.Tensor) or logits.dim() != 2 or logits.shape[-1] == 0:
        shape = tuple(logits.shape) if isinstance(logits, torch.Tensor) else type(logits).__name__
        raise ValueError(f"logits must be a tensor of shape (B, V) with V >= 1; got {shape}")
    if bool(torch.isnan(logits).any()):
        rows = torch.isnan(logits).any(dim=-1).nonzero().flatten().tolist()
        raise ValueError(f"logits contain NaN (rows {rows}); no token can be picked from them. Look for the NaN "
                         "upstream: a diverged model, or an input it was not built for")
    if greedy:
        return logits.argmax(dim=-1, keepdim=True)
    return torch.multinomial(next_token_distribution(logits, temperature, top_k), 1, generator=generator)


def next_token_distribution(logits: torch.Tensor, temperature: float = 1.0, top_k: int | None = None) -> torch.Tensor:
    """The distribution sampling draws from: ``softmax(top_k_filter(logits / temperature, top_k))`` (chapter 15).

    Shapes: ``logits`` ``(..., V)`` to ``(..., V)``, in the logits' dtype; ``top_k`` None keeps every token.
    """
    if not temperature > 0:
        raise ValueError(f"temperature must be positive (use greedy=True for the argmax); got {temperature}")
    logits = logits / temperature
    if top_k is not None:
        logits = top_k_filter(logits, top_k)
    return torch.softmax(logits, dim=-1)


@torch.no_grad()
def generate(model, ids: torch.Tensor, max_new_tokens: int, temperature: float = 1.0, top_k: int | None = None,
             greedy: bool = False, generator: torch.Generator | None = None, use_cache: bool = False,
             sliding_cache: bool = False) -> torch.Tensor:
    """Algorithm 14: extend ``ids`` ``(B, T)`` by ``max_new_tokens`` tokens; returns ``(B, T + max_new_tokens)``.

    The model sees at most its last ``block_size`` tokens. ``use_cache=True`` keeps the keys and values of
    earlier tokens in a ``KVCache`` (chapter 17) and gives the same tokens. Once the text outgrows the
    context the window slides, every position changes, and the cache no longer helps: from then on each
    step runs the whole window, as without the cache.

    ``sliding_cache=True`` (with ``use_cache``, for a model with rotary positions, chapter 21) keeps the
    cache when the window slides: the oldest keys and values are dropped and every step still runs one
    token. Each token then attends to the cached keys and values of the last ``block_size`` positions:
    sliding-window attention, which equals ``model(ids, window=block_size)``. With more than one layer
    that differs from recomputing the last window from scratch, whose earlier tokens see less context.
    """
    _check_generate(model, ids, max_new_tokens, use_cache, sliding_cache)
    with eval_mode(model):  # whatever happens, the model goes back to the mode it was in
        block = model.config.block_size
        cache = KVCache(max_length=block if sliding_cache else None) if use_cache else None
        logits = model(ids[:, -block:], cache=cache)[:, -1, :]  # (B, V): the prediction for the next token
        for step in range(max_new_tokens):
            next_id = sample_next(logits, temperature, top_k, greedy, generator)  # (B, 1)
            ids = torch.cat([ids, next_id], dim=1)  # (B, T + step + 1)
            if step + 1 < max_new_tokens:
                logits, cache = _next_logits(model, ids, cache, sliding_cache)
    return ids


def _check_generate(model, ids: torch.Tensor, max_new_tokens: int, use_cache: bool, sliding_cache: bool) -> None:
    if ids.dim() != 2 or ids.shape[1] == 0:
        raise ValueError(f"ids must have shape (B, T) with T >= 1; got {tuple(ids.shape)}")
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be an integer, 0 or more; got {max_new_tokens!r}")
    if sliding_cache and not (use_cache and getattr(model.config, "positions", "learned") == "rotary"):
        raise ValueError("sliding_cache=True needs use_cache=True and a model with positions='rotary' (learned "
                         "positions change when the window slides, so their cached keys would be stale)")


def _next_logits(model, ids: torch.Tensor, cache: KVCache | None,
                 sliding_cache: bool) -> tuple[torch.Tensor, KVCache | None]:
    """The logits ``(B, V)`` for the token after ``ids``, whose last token is new, and the cache to go on with."""
    block = model.config.block_size
    if cache is not None and (cache.length < block or sliding_cache):
        return model(ids[:, -1:], cache=cache)[:, -1, :], cache  # only the new token goes through the model
    # Without a cache, or once the window has slid: with learned absolute positions every token has a new
    # position, so every cached key and value is stale. From here on each step recomputes the whole window.
    return model(ids[:, -block:])[:, -1, :], None


@torch.no_grad()
def greedy_decode(model, src: torch.Tensor, bos_id: int, eos_id: int, max_len: int) -> torch.Tensor:
    """Greedy decoding for an encoder-decoder model: ``src`` ``(B, S)`` to ``(B, <= max_len)`` target ids.

    Starts from ``bos_id``; a sequence that has produced ``eos_id`` is padded with ``eos_id`` from then
    on. The source is encoded once.
    """
    with eval_mode(model):
        memory, src_mask = model.encode(src)
        out = torch.full((src.shape[0], 1), bos_id, dtype=torch.long, device=src.device)
        done = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)
        for _ in range(max_len - 1):
            next_id = model.decode(out, memory, src_mask)[:, -1].argmax(dim=-1)
            next_id = torch.where(done, torch.full_like(next_id, eos_id), next_id)
            out = torch.cat([out, next_id[:, None]], dim=1)
            done |= next_id == eos_id
            if bool(done.all()):
                break
    return out
