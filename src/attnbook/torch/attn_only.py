"""An attention-only Transformer: embeddings, causal attention layers with residuals, no MLPs (chapter 28).

The model of Elhage et al. (2021) and Olsson et al. (2022): ``x_0 = E[ids] (+ P)``, then
``x_{l+1} = x_l + MultiHeadAttention_l(x_l)`` (causal, no norm before attention), an optional final
LayerNorm, and an unembedding ``W_u`` of its own. With no norm inside the residual stream and no biases,
everything a head writes reaches the logits as a plain sum, which is what makes its heads easy to read,
ablate and compose.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal, get_args

import torch
import torch.nn.functional as F
from torch import nn

from attnbook._fields import Checked, blame, choice, count, flag
from attnbook._validate import check_heads, check_rotary_width, require_int
from attnbook.torch.embedding import LearnedPositions, TokenEmbedding, Unembedding
from attnbook.torch.inspect import ablate_heads, record_attention
from attnbook.torch.layernorm import LayerNorm
from attnbook.torch.multihead import MultiHeadAttention

Positions = Literal["rotary", "learned"]


@dataclass(kw_only=True)
class AttnOnlyShape(Checked):
    """What fixes an attention-only model's layers, less its vocabulary and context: the fields ``AttnOnlyConfig``
    and chapter 28's training run (``InductionConfig``) share, defined once here. ``positions="rotary"``
    rotates queries and keys (chapter 21) and adds nothing to the residual stream; ``"learned"`` adds a table
    ``P`` of ``block_size`` rows."""

    n_layers: int = count(2, help="attention layers")
    n_heads: int = count(4, help="attention heads per layer; they must divide d_model")
    d_model: int = count(64, help="the width of the residual stream, d_model")
    positions: Positions = choice("rotary", get_args(Positions),
                                  help="'rotary': rotated queries and keys; 'learned': a table added to the stream")
    final_norm: bool = flag(True, help="a layer norm before the unembedding")
    bias: bool = flag(False, help="biases in the attention's linear maps")

    def check(self) -> None:
        super().check()
        with blame("n_heads", "d_model"):
            check_heads(self.d_model, self.n_heads)
        if self.positions == "rotary":
            with blame("positions", "n_heads", "d_model"):
                check_rotary_width(self.d_model, self.n_heads)


@dataclass(kw_only=True)
class AttnOnlyConfig(AttnOnlyShape):
    """Sizes of an attention-only model: ``AttnOnlyShape`` with the vocabulary and the longest context."""

    vocab_size: int = count(help="the vocabulary's size")
    block_size: int = count(64, help="the longest sequence the model reads")


class AttnOnlyTransformer(nn.Module):
    """``forward(ids)``: ``(B, T)`` ids to ``(B, T, vocab_size)`` logits; position ``t`` sees ``0 .. t``.

    ``layers[l]`` is layer ``l``'s ``MultiHeadAttention``. ``attention_maps(ids)`` returns every layer's
    weights ``(B, h, T, T)``; ``ablate(layer, heads)`` is a context in which those heads write nothing.
    Chapter 28.
    """

    def __init__(self, config: AttnOnlyConfig) -> None:
        super().__init__()
        c = self.config = config
        self.tok = TokenEmbedding(c.vocab_size, c.d_model)  # E: (V, d_model)
        self.pos = LearnedPositions(c.block_size, c.d_model) if c.positions == "learned" else None
        self.layers = nn.ModuleList(  # attention only: no feed-forward network, no norm before attention
            MultiHeadAttention(c.d_model, c.n_heads, bias=c.bias, rotary=c.positions == "rotary")
            for _ in range(c.n_layers))
        self.norm = LayerNorm(c.d_model) if c.final_norm else None
        self.unembed = Unembedding(c.d_model, c.vocab_size)  # W_u: (d_model, V), not tied to E
        # No norm reads the stream before attention, so its scale sets the size of the first scores: embeddings
        # of unit variance (not GPT-2's 0.02, made for pre-norm blocks) give scores of order 1 from the start.
        with torch.no_grad():
            self.tok.E.normal_(0.0, 1.0)
            if self.pos is not None:
                self.pos.P.normal_(0.0, 1.0)

    def residual(self, ids: torch.Tensor) -> torch.Tensor:
        """The residual stream after the last layer, before the final norm: ``(B, T)`` ids to ``(B, T, d_model)``."""
        self._check_ids(ids)
        x = self.tok(ids)  # (B, T, d_model): x_0 = E[ids]
        if self.pos is not None:  # learned positions; rotary ones rotate queries and keys inside attention
            x = x + self.pos(ids.shape[1])
        for attn in self.layers:
            x = x + attn(x, causal=True)[0]  # (B, T, d_model): the sum of the heads' outputs added to the stream
        return x

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.residual(ids)
        return self.unembed(self.norm(x) if self.norm is not None else x)  # (B, T, vocab_size)

    def _check_ids(self, ids: torch.Tensor) -> None:
        """Refuses anything but a ``(B, T)`` tensor of at most ``block_size`` positions."""
        if not isinstance(ids, torch.Tensor) or ids.dim() != 2:
            raise ValueError(f"ids must be a tensor of shape (B, T); got {getattr(ids, 'shape', type(ids))}")
        T = ids.shape[1]
        if T > self.config.block_size:
            raise ValueError(f"sequence of length {T} is longer than block_size = {self.config.block_size}")

    @torch.no_grad()
    def attention_maps(self, ids: torch.Tensor) -> list[torch.Tensor]:
        """Every layer's attention weights on ``ids``: a list of ``n_layers`` tensors ``(B, h, T, T)``."""
        with record_attention(self) as maps:
            self(ids)
        return [maps[f"layers.{layer}"] for layer in range(self.config.n_layers)]

    @contextmanager
    def ablate(self, layer: int, heads: list[int], replacement: torch.Tensor | None = None) -> Iterator[None]:
        """Within the block, the listed heads of layer ``layer`` write nothing to the residual stream (their
        slice of the concatenated head outputs is zeroed before the output projection): a zero ablation. With
        ``replacement`` ``(T, d_model)`` (or anything that broadcasts to the layer's output ``(B, T, d_model)``),
        the layer writes that instead of what those heads wrote: passing the heads' mean output
        (``head_outputs(ids, layer)[:, heads].sum(1).mean(0)``) gives a mean ablation."""
        self._check_layer(layer)
        handle = None
        if replacement is not None:
            def add(module, args, output):  # runs after the layer: its output plus the replacement, weights kept
                return (output[0] + replacement.to(output[0].dtype),) + tuple(output[1:])

            handle = self.layers[layer].register_forward_hook(add)
        try:
            with ablate_heads(self.layers[layer], heads):  # the heads' slice zeroed before the output projection
                yield
        finally:
            if handle is not None:
                handle.remove()

    @torch.no_grad()
    def head_outputs(self, ids: torch.Tensor, layer: int) -> torch.Tensor:
        """What each head of layer ``layer`` writes to the residual stream on ``ids`` ``(B, T)``:
        ``(B, h, T, d_model)``, head ``i``'s output ``z_i W_O^i`` (its slice of the concatenated head outputs
        times its rows of the output projection). Their sum over the heads, plus the projection's bias if it has
        one, is the layer's output (section "A Transformer made of attention only")."""
        self._check_layer(layer)
        attention = self.layers[layer]
        caught = []
        # a pre-hook on the output projection catches its input during one forward pass
        handle = attention.out_proj.register_forward_pre_hook(lambda module, args: caught.append(args[0]))
        try:
            self(ids)
        finally:
            handle.remove()
        z = caught[0]  # (B, T, d_model): the heads' outputs side by side
        d_head = self.config.d_model // self.config.n_heads
        z = z.view(*z.shape[:-1], self.config.n_heads, d_head).transpose(1, 2)  # (B, h, T, d_head)
        W_o = attention.W_o.view(self.config.n_heads, d_head, self.config.d_model)  # (h, d_head, d_model)
        return torch.einsum("bhtk,hkd->bhtd", z, W_o)

    def _check_layer(self, layer: int) -> None:
        require_int("layer", layer, 0)
        if layer >= self.config.n_layers:
            raise ValueError(f"layer must lie in [0, {self.config.n_layers - 1}]; got {layer}")


def token_losses(model: nn.Module, ids: torch.Tensor) -> torch.Tensor:
    """The loss of every next-token prediction: ``(B, T)`` ids to ``(B, T - 1)`` nats, entry ``[b, s - 1]``
    being ``-log p(ids[b, s] | ids[b, :s])``. Runs without gradients. Chapter 28."""
    if ids.dim() != 2 or ids.shape[1] < 2:
        raise ValueError(f"ids must have shape (B, T) with T >= 2; got {tuple(ids.shape)}")
    with torch.no_grad():
        logits = model(ids)[:, :-1]  # (B, T - 1, V): the prediction of the next token
    return F.cross_entropy(logits.transpose(1, 2), ids[:, 1:], reduction="none")
