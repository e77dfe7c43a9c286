"""Looking inside models: record the attention weights of every layer during a forward pass (chapters 16 and 18)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch

from attnbook.torch.multihead import MultiHeadAttention


@contextmanager
def record_attention(model: torch.nn.Module) -> Iterator[dict[str, torch.Tensor]]:
    """Within the block, every ``MultiHeadAttention`` of ``model`` keeps its weights.

    Yields a dict that, after the block, maps each attention module's name (for example
    ``"decoder.layers.0.cross_attn"``) to its weights of the last forward pass, ``(B, h, T_q, T_k)``.
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
