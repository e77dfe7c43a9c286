"""Looking inside models: record the attention weights of every layer during a forward pass (chapters 16 and 18),
and where a trained lookup layer puts its weight (chapter 12)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import torch
import torch.nn.functional as F

from attnbook.torch.decoding import greedy_decode
from attnbook.torch.modes import eval_mode
from attnbook.torch.multihead import MultiHeadAttention


@contextmanager
def record_attention(model: torch.nn.Module) -> Iterator[dict[str, torch.Tensor]]:
    """Within the block, every ``MultiHeadAttention`` of ``model`` keeps its weights.

    Yields a dict that, after the block, maps each attention module's name (for example
    ``"decoder.layers.0.cross_attn"``) to its weights of the last forward pass, ``(B, h, T_q, T_k)``, detached
    from the graph. A module that did not run inside the block has no entry.
    """
    modules = {name: m for name, m in model.named_modules() if isinstance(m, MultiHeadAttention)}
    weights: dict[str, torch.Tensor] = {}
    for m in modules.values():
        m.record, m.last_weights = True, None
    try:
        yield weights
    finally:
        for name, m in modules.items():
            m.record = False
            if m.last_weights is not None:
                weights[name] = m.last_weights
            m.last_weights = None


def offset_score(weights: torch.Tensor, offset: int = -1) -> torch.Tensor:
    """How much weight each query puts on the key ``offset`` positions away, averaged over queries.

    ``weights`` ``(..., h, T_q, T_k)`` from self-attention (``T_q == T_k``). ``offset=-1`` gives the
    previous-token score, ``0`` the weight on the token itself. Queries whose key ``t + offset`` does not
    exist are left out. Returns ``(..., h)``: averaged over queries (and over any leading batch axes
    the caller averages itself). Chapter 18.
    """
    T_q, T_k = weights.shape[-2:]
    if T_q != T_k:
        raise ValueError(f"offset_score needs self-attention weights (T_q == T_k); got {T_q} queries, {T_k} keys")
    if not -T_q < offset < T_q:
        raise ValueError(f"offset must lie strictly between {-T_q} and {T_q}; got {offset}")
    return torch.diagonal(weights, offset=offset, dim1=-2, dim2=-1).mean(dim=-1)


def weight_on(weights: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    """The weight each query ``q`` puts on the key ``keys[..., q]``, averaged over queries.

    ``weights`` ``(..., h, T_q, T_k)``; ``keys`` integer key positions, ``(T_q,)`` for every input alike
    or ``(B, T_q)`` one row per input (for ``weights`` of shape ``(B, h, T_q, T_k)``). A key of -1
    leaves that query out of the average. Returns ``(..., h)``. For example ``keys = L - 1 - arange(L)``
    measures the mirrored position of a reversal. Chapter 18.
    """
    keys = _checked_keys(weights, keys)
    keys = keys.expand(weights.shape[:-3] + keys.shape[-1:]).unsqueeze(-2)  # (..., 1, T_q): the same for every head
    valid = (keys >= 0).to(weights.dtype)  # 0 for a query left out
    index = keys.clamp_min(0).expand(weights.shape[:-1]).unsqueeze(-1)  # (..., h, T_q, 1)
    picked = torch.gather(weights, -1, index).squeeze(-1)  # (..., h, T_q): query q's weight on its key
    return (picked * valid).sum(-1) / valid.sum(-1).clamp_min(1)


def _checked_keys(weights: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    """``keys`` as a tensor on the device of ``weights``; refuses (``ValueError``) what ``weight_on`` cannot use."""
    T_q, T_k = weights.shape[-2:]
    keys = torch.as_tensor(keys, device=weights.device)
    batch = tuple(weights.shape[:-3])
    if keys.dtype not in (torch.int64, torch.int32) or keys.shape not in ((T_q,), batch + (T_q,)):
        raise ValueError(f"keys must be integer positions of shape ({T_q},) or {batch + (T_q,)}; got {keys.dtype} "
                         f"of shape {tuple(keys.shape)}")
    if keys.numel() and (int(keys.min()) < -1 or int(keys.max()) >= T_k):
        raise ValueError(f"keys must lie in [0, {T_k - 1}], or be -1 to leave a query out")
    return keys


def most_recent(ids: torch.Tensor, tokens: list[int]) -> torch.Tensor:
    """For each position ``t`` of ``ids`` ``(B, T)``, the last position before ``t`` that holds one of
    ``tokens``, or -1 where there is none; ``(B, T)``, ready for ``weight_on``. Chapter 18."""
    if ids.dim() != 2:
        raise ValueError(f"ids must have shape (B, T); got {tuple(ids.shape)}")
    hit = torch.isin(ids, torch.as_tensor(tokens, device=ids.device))
    positions = torch.arange(ids.shape[1], device=ids.device).expand_as(ids)
    latest = torch.cummax(torch.where(hit, positions, -1), dim=1).values  # last hit at or before t
    return torch.cat([torch.full_like(ids[:, :1], -1), latest[:, :-1]], dim=1)  # strictly before t


def attention_entropy(weights: torch.Tensor) -> torch.Tensor:
    """The entropy (nats) of each query's weights, averaged over queries: ``(..., h, T_q, T_k)`` to ``(..., h)``.

    0 means every query looks at a single key; ``log T_k`` means it spreads evenly. Chapter 18.
    Refuses negative weights, which no softmax gives: the entropy of such rows would be a number without
    meaning. NaN weights give NaN.
    """
    if bool((weights < 0).any()):
        raise ValueError(f"weights must be attention weights, 0 or more (rows of a softmax); got values down to "
                         f"{float(weights.min()):.4g}")
    return -(weights * torch.log(weights.clamp_min(1e-30))).sum(dim=-1).mean(dim=-1)


@contextmanager
def ablate_heads(attention: MultiHeadAttention, heads: list[int]) -> Iterator[None]:
    """Within the block, the listed heads of ``attention`` contribute nothing: their slice of the
    concatenated head outputs is zeroed before the output projection. Chapter 18.

    ``heads`` lists head indices in ``[0, h)``. A forward pre-hook on ``attention.out_proj`` multiplies its
    input, the merged heads ``(..., T_q, d_model)`` with head ``i`` in columns ``i * d_head`` to
    ``(i + 1) * d_head - 1``, by a mask ``(d_model,)`` that is 0 over the listed heads' columns and 1 elsewhere;
    every shape the module and the model return is unchanged. Yields ``None``; leaving the block removes the
    hook. Refuses (``ValueError``) a head outside ``[0, h)``.
    """
    d_head = attention.d_model // attention.n_heads
    bad = [h for h in heads if not 0 <= h < attention.n_heads]
    if bad:
        raise ValueError(f"heads must lie in [0, {attention.n_heads - 1}]; got {bad}")
    keep = torch.ones(attention.d_model)
    for h in heads:
        keep[h * d_head:(h + 1) * d_head] = 0.0

    def hook(module, args):
        return (args[0] * keep.to(args[0].device, args[0].dtype),)

    handle = attention.out_proj.register_forward_pre_hook(hook)
    try:
        yield
    finally:
        handle.remove()


def decode_with_cross_attention(model, src: list[int], bos_id: int, eos_id: int,
                                max_len: int) -> tuple[list[int], np.ndarray]:
    """Greedy output of an encoder-decoder for one source, and its cross-attention while producing it
    (chapter 16).

    ``src`` holds the source's ``S`` token ids, unpadded. Returns the output ids, a list of ``T_out`` ints
    (without the begin token, up to and including the end token if it came within ``max_len - 1`` steps), and
    the cross-attention weights, a float array ``(layers, heads, T_out, S)``: row ``t`` is the decoder position
    that produced output ``t``.
    """
    if len(src) == 0:
        raise ValueError("src must hold at least one token; got an empty list")
    s = torch.tensor([list(src)])
    with torch.no_grad():
        out = greedy_decode(model, s, bos_id, eos_id, max_len=max_len)[0, 1:].tolist()
    if eos_id in out:
        out = out[: out.index(eos_id) + 1]
    # Greedy decoding feeds each output back in, so one teacher-forced pass on [begin] + output gives
    # the attention of every decoding step at once (the decoder is causal).
    dec_in = torch.tensor([[bos_id] + out[:-1]])
    with eval_mode(model), record_attention(model) as rec, torch.no_grad():
        model(s, dec_in)
    names = sorted((n for n in rec if n.endswith("cross_attn")), key=lambda n: [int(p) for p in n.split(".")
                                                                                 if p.isdigit()])
    return out, np.stack([rec[n][0].numpy() for n in names])


def lookup_batch(layer: torch.nn.Module, noise: float, n: int = 256, T: int = 8, d: int = 16,
                 seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Attention weights of the chapter's lookup layer on fresh examples at a chosen query noise (chapter 12).

    Contexts of ``T`` random unit vectors, queries ``context[pick] + noise * N(0, I) / sqrt(d)``, drawn from
    a generator of their own (the same draws at every noise level). ``layer`` is a one-head attention module
    with ``d_model == d``, called as ``layer(query (n, 1, d), context (n, T, d), need_weights=True)``. Returns
    ``(weights, pick)``: NumPy arrays ``(n, T)`` (each example's weights over its context) and ``(n,)`` (the
    context position each query was made from).
    """
    g = torch.Generator().manual_seed(seed)
    context = F.normalize(torch.randn(n, T, d, generator=g), dim=-1)
    pick = torch.randint(0, T, (n,), generator=g)
    query = context[torch.arange(n), pick] + noise * torch.randn(n, d, generator=g) / d**0.5
    with torch.no_grad():
        _, w = layer(query[:, None, :], context, need_weights=True)
    return w[:, 0, 0].numpy(), pick.numpy()
