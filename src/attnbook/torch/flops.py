"""What a training step costs in arithmetic (chapters 17, 22 and 23): the FLOPs per token of a GPT."""

from __future__ import annotations

from attnbook.torch.linear import Linear
from attnbook.torch.transformer import GPT


def flops_per_token(model: GPT) -> float:
    """Training FLOPs per token, forward and backward: 6 per weight of every matrix multiply (the
    unembedding included, the embedding lookup not) plus 12 L d T for the attention scores and mixing."""
    c = model.config
    matmul_weights = sum(m.W.numel() for m in model.modules() if isinstance(m, Linear)) + c.vocab_size * c.d_model
    return 6 * matmul_weights + 12 * c.n_layers * c.d_model * c.block_size
