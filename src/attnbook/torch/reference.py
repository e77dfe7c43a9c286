"""The same GPT assembled from ``torch.nn`` parts: the yardstick for speed (chapter 17's benchmark).

``TorchGPT`` has the layout of ``attnbook.torch.GPT`` (pre-norm blocks, learned positions, tied
embeddings) built from ``nn.TransformerEncoderLayer`` with a causal mask. ``copy_gpt_to_torch``
copies a GPT's weights into it, so the tests can show both compute the same function.
"""

from __future__ import annotations

import torch
from torch import nn

from attnbook.torch.transformer import GPT, GPTConfig


class TorchGPT(nn.Module):
    """A decoder-only model from ``nn.TransformerEncoderLayer``: ``(B, T)`` ids to ``(B, T, V)`` logits."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        c = self.config = config
        if c.activation not in ("relu", "gelu"):
            raise ValueError(f"nn.TransformerEncoderLayer offers 'relu' and 'gelu'; got {c.activation!r}")
        self.tok = nn.Embedding(c.vocab_size, c.d_model)
        self.pos = nn.Embedding(c.block_size, c.d_model)
        layer = nn.TransformerEncoderLayer(c.d_model, c.n_heads, c.ff_width, c.dropout, activation=c.activation,
                                           layer_norm_eps=c.eps, batch_first=True, norm_first=True, bias=c.bias)
        self.blocks = nn.TransformerEncoder(layer, c.n_layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(c.d_model, eps=c.eps, bias=c.bias)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        T = ids.shape[1]
        x = self.tok(ids) + self.pos.weight[:T]  # (B, T, d_model)
        mask = nn.Transformer.generate_square_subsequent_mask(T, device=ids.device)  # -inf above the diagonal
        x = self.blocks(x, mask=mask, is_causal=True)
        return self.norm(x) @ self.tok.weight.T  # (B, T, V), tied


@torch.no_grad()
def copy_gpt_to_torch(ours: GPT, theirs: TorchGPT) -> None:
    """Copy the weights of an attnbook ``GPT`` into a ``TorchGPT`` of the same configuration."""
    theirs.tok.weight.copy_(ours.tok.E)
    theirs.pos.weight.copy_(ours.pos.P)
    for block, layer in zip(ours.blocks, theirs.blocks.layers, strict=True):
        a = block.self_attn
        layer.self_attn.in_proj_weight.copy_(torch.cat([a.W_q, a.W_k, a.W_v], dim=1).T)
        layer.self_attn.out_proj.weight.copy_(a.W_o.T)
        if ours.config.bias:
            layer.self_attn.in_proj_bias.copy_(torch.cat([a.b_q, a.b_k, a.b_v]))
            layer.self_attn.out_proj.bias.copy_(a.b_o)
        for lin, fc in ((layer.linear1, block.ff.fc1), (layer.linear2, block.ff.fc2)):
            lin.weight.copy_(fc.W.T)
            if ours.config.bias:
                lin.bias.copy_(fc.b)
        for norm, ln in ((layer.norm1, block.norm1), (layer.norm2, block.norm3)):
            _copy_layer_norm(norm, ln)
    _copy_layer_norm(theirs.norm, ours.norm)


def _copy_layer_norm(theirs: nn.LayerNorm, ours) -> None:
    """attnbook's ``LayerNorm`` (``gamma``, ``beta``) into ``nn.LayerNorm`` (``weight``, ``bias``), under
    ``no_grad`` by the caller. Kept here rather than imported from ``attnbook.interop``, which sits above
    ``attnbook.torch``: imports run down the package's floors, never up."""
    theirs.weight.copy_(ours.gamma)
    if theirs.bias is not None:
        theirs.bias.copy_(ours.beta)
