"""The whole Transformer (chapter 15): encoder-decoder, encoder-only and decoder-only (GPT).

Phuong and Hutter, algorithms 8 (encoder-decoder), 9 (encoder-only) and 10 (decoder-only).
Token ids are integers in ``[0, vocab_size)``; masks are boolean, True where attention is allowed.
"""

from __future__ import annotations

import math
from dataclasses import KW_ONLY, dataclass
from typing import Literal, get_args

import torch
from torch import nn

from attnbook._validate import check_heads
from attnbook.torch.blocks import DecoderBlock, EncoderBlock
from attnbook.torch.embedding import LearnedPositions, SinusoidalPositions, TokenEmbedding, Unembedding
from attnbook.torch.feedforward import swiglu_hidden
from attnbook.torch.kvcache import KVCache
from attnbook.torch.layernorm import LayerNorm
from attnbook.torch.linear import Linear
from attnbook.torch.masks import token_padding_mask
from attnbook.torch.rmsnorm import make_norm
from attnbook.torch.rotary import RotaryTables, sliding_window_mask


def check_at_least_one(config: object, *names: str) -> None:
    """Sizes must be positive: a model with -1 layers would silently have none."""
    for name in names:
        value = getattr(config, name)
        if value is not None and value < 1:
            raise ValueError(f"{name} must be at least 1; got {value}")
    if not 0 <= config.dropout < 1:
        raise ValueError(f"dropout must lie in [0, 1); got {config.dropout}")


class _Stack(nn.Module):
    """``n_layers`` blocks of one kind (the subclass's ``block``), and a final layer norm, as ``torch.nn``'s
    ``TransformerEncoder`` and ``TransformerDecoder`` with ``norm``."""

    block: type[nn.Module]

    def __init__(self, n_layers: int, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.0,
                 norm_first: bool = False, activation: str = "relu", final_norm: bool = True) -> None:
        super().__init__()
        self.layers = nn.ModuleList(self.block(d_model, n_heads, d_ff, dropout, norm_first, activation)
                                    for _ in range(n_layers))
        self.norm = LayerNorm(d_model) if final_norm else None

    def _run(self, x: torch.Tensor, *context: torch.Tensor | None) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x, *context)
        return self.norm(x) if self.norm is not None else x


class Encoder(_Stack):
    """A stack of encoder blocks, with a final layer norm (as ``torch.nn.TransformerEncoder`` with ``norm``)."""

    block = EncoderBlock

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        return self._run(x, mask)


class Decoder(_Stack):
    """A stack of decoder blocks with cross-attention, and a final layer norm."""

    block = DecoderBlock

    def forward(self, x: torch.Tensor, memory: torch.Tensor, self_mask: torch.Tensor | None = None,
                memory_mask: torch.Tensor | None = None) -> torch.Tensor:
        return self._run(x, memory, self_mask, memory_mask)


@dataclass(kw_only=True)
class _Sizes:
    """The sizes an encoder-decoder and an encoder-only model share (chapter 15): the width, the heads, the
    feed-forward width (``None``: ``4 d_model``), the longest sequence, dropout, where the blocks normalise,
    and the padding id."""

    d_model: int = 64
    n_heads: int = 4
    d_ff: int | None = None
    max_len: int = 128
    dropout: float = 0.0
    norm_first: bool = False
    pad_id: int = 0

    def _check_sizes(self, *vocab: str) -> None:
        check_at_least_one(self, *vocab, "d_model", "n_heads", "d_ff", "max_len")
        check_heads(self.d_model, self.n_heads)
        self.d_ff = 4 * self.d_model if self.d_ff is None else self.d_ff


@dataclass
class TransformerConfig(_Sizes):
    """Sizes of an encoder-decoder model: the vocabularies (the only fields given by position), the shared
    sizes and the layers. ``d_ff`` defaults to ``4 d_model``."""

    src_vocab_size: int
    tgt_vocab_size: int
    _: KW_ONLY
    n_encoder_layers: int = 2
    n_decoder_layers: int = 2
    activation: str = "relu"
    positions: str = "sinusoidal"  # or "learned"

    def __post_init__(self) -> None:
        self._check_sizes("src_vocab_size", "tgt_vocab_size")
        for name in ("n_encoder_layers", "n_decoder_layers"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be 0 or more; got {getattr(self, name)}")
        if self.positions not in ("sinusoidal", "learned"):
            raise ValueError(f"positions must be 'sinusoidal' or 'learned'; got {self.positions!r}")


def _positions(kind: str, max_len: int, d_model: int) -> nn.Module:
    return SinusoidalPositions(max_len, d_model) if kind == "sinusoidal" else LearnedPositions(max_len, d_model)


class EncoderDecoderTransformer(nn.Module):
    """Algorithm 8: embed the source, encode it, and decode the target with cross-attention.

    ``forward(src, tgt)``: ``src`` ``(B, S)`` and ``tgt`` ``(B, T)`` token ids (``pad_id`` marks padding);
    returns logits ``(B, T, tgt_vocab_size)``, where position ``t`` predicts target token ``t + 1``.
    """

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        c = self.config = config
        self.src_embed, self.tgt_embed = TokenEmbedding(c.src_vocab_size, c.d_model), TokenEmbedding(
            c.tgt_vocab_size, c.d_model)
        self.positions = _positions(c.positions, c.max_len, c.d_model)
        self.drop = nn.Dropout(c.dropout)
        self.encoder = Encoder(c.n_encoder_layers, c.d_model, c.n_heads, c.d_ff, c.dropout, c.norm_first,
                               c.activation)
        self.decoder = Decoder(c.n_decoder_layers, c.d_model, c.n_heads, c.d_ff, c.dropout, c.norm_first,
                               c.activation)
        self.unembed = Unembedding(c.d_model, c.tgt_vocab_size, bias=True)

    def embed(self, ids: torch.Tensor, table: TokenEmbedding) -> torch.Tensor:
        # Scaling the token vectors by sqrt(d_model) keeps them comparable to the positional ones.
        x = table(ids) * math.sqrt(self.config.d_model) + self.positions(ids.shape[1])
        return self.drop(x)

    def encode(self, src: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Encoder output ``(B, S, d_model)`` and the source padding mask ``(B, 1, S)``."""
        src_mask = token_padding_mask(src, self.config.pad_id)  # (B, 1, S)
        return self.encoder(self.embed(src, self.src_embed), src_mask), src_mask

    def decode(self, tgt: torch.Tensor, memory: torch.Tensor, src_mask: torch.Tensor) -> torch.Tensor:
        """Logits ``(B, T, V)`` for the target prefix ``tgt`` given the encoder output."""
        tgt_mask = token_padding_mask(tgt, self.config.pad_id)  # (B, 1, T)
        h = self.decoder(self.embed(tgt, self.tgt_embed), memory, tgt_mask, src_mask)
        return self.unembed(h)

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        memory, src_mask = self.encode(src)
        return self.decode(tgt, memory, src_mask)


@dataclass
class EncoderConfig(_Sizes):
    """Sizes of an encoder-only model (BERT-like): the vocabulary (the only field given by position), the
    shared sizes and the layers. ``d_ff`` defaults to ``4 d_model``."""

    vocab_size: int
    _: KW_ONLY
    n_layers: int = 2
    activation: str = "gelu"

    def __post_init__(self) -> None:
        self._check_sizes("vocab_size")
        check_at_least_one(self, "n_layers")


@dataclass(kw_only=True)
class EncoderShape:
    """What fixes a small encoder-only model's architecture, less its vocabulary: the fields a masked-language-
    model run (chapter 24's ``MLMRunConfig``) composes. ``block_size`` is the longest window; the blocks are
    pre-norm (``norm_first``) as the GPT's are, and use GELU."""

    block_size: int = 64
    n_layers: int = 4
    n_heads: int = 4
    d_model: int = 128
    dropout: float = 0.0
    norm_first: bool = True  # pre-norm blocks, as the GPT has (BERT itself is post-norm)

    def __post_init__(self) -> None:
        check_at_least_one(self, "n_layers", "n_heads", "d_model", "block_size")
        if self.block_size < 2:
            raise ValueError(f"block_size must be at least 2; got {self.block_size}")
        check_heads(self.d_model, self.n_heads)

    def encoder_config(self, vocab_size: int, pad_id: int = -1) -> EncoderConfig:
        """The ``EncoderConfig`` of this shape for ``vocab_size`` tokens; ``pad_id=-1``: no padding."""
        return EncoderConfig(vocab_size=vocab_size, d_model=self.d_model, n_heads=self.n_heads,
                             n_layers=self.n_layers, max_len=self.block_size, dropout=self.dropout,
                             norm_first=self.norm_first, activation="gelu", pad_id=pad_id)


class EncoderOnlyTransformer(nn.Module):
    """Algorithm 9 (BERT-like): every position sees every other one; logits for each position.

    ``forward(ids)``: ``(B, T)`` ids to ``(B, T, vocab_size)`` logits, padding masked by ``pad_id``.
    """

    def __init__(self, config: EncoderConfig) -> None:
        super().__init__()
        if not isinstance(config, EncoderConfig):
            raise ValueError("EncoderOnlyTransformer takes an EncoderConfig, as the other models take their "
                             f"configs: EncoderOnlyTransformer(EncoderConfig(vocab_size, ...)); got {config!r}")
        c = self.config = config
        self.embed = TokenEmbedding(c.vocab_size, c.d_model)
        self.positions = LearnedPositions(c.max_len, c.d_model)
        self.drop = nn.Dropout(c.dropout)
        self.encoder = Encoder(c.n_layers, c.d_model, c.n_heads, c.d_ff, c.dropout, c.norm_first, c.activation)
        self.head = nn.Sequential(Linear(c.d_model, c.d_model), nn.GELU(), LayerNorm(c.d_model))
        self.unembed = Unembedding(c.d_model, c.vocab_size, bias=True)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.drop(self.embed(ids) + self.positions(ids.shape[1]))
        h = self.encoder(x, token_padding_mask(ids, self.config.pad_id))  # (B, 1, T): padded keys masked
        return self.unembed(self.head(h))


# The values of GPTShape's named choices, as types: the command line offers them as choices.
Norm = Literal["layer", "rms"]
# FeedForward's activations (ACTIVATIONS), or the gated SwiGLU; tests/package/test_cli_help.py checks the two agree.
GPTActivation = Literal["gelu", "gelu_tanh", "relu", "relu2", "swiglu"]
Positions = Literal["learned", "rotary"]
NORMS = get_args(Norm)  # GPTShape.norm
GPT_ACTIVATIONS = get_args(GPTActivation)  # GPTShape.activation


@dataclass(kw_only=True)
class GPTShape:
    """What fixes a GPT's architecture, less its vocabulary: the fields ``GPTConfig`` and a training run's
    ``GPTRunConfig`` share (defined once, here). ``d_ff`` ``None`` means ``4 d_model``, or
    ``swiglu_hidden(d_model)`` (``8 d_model / 3`` rounded) with ``activation="swiglu"``, as many weights.
    ``norm="rms"`` and ``activation="swiglu"`` with ``bias=False`` make the block Llama's (chapter 22)."""

    block_size: int = 64
    n_layers: int = 4
    n_heads: int = 4
    d_model: int = 128
    d_ff: int | None = None
    dropout: float = 0.0
    activation: GPTActivation = "gelu_tanh"
    eps: float = 1e-5
    bias: bool = True  # biases in linear layers and layer norms, as in GPT-2; nanoGPT's recipes leave them out
    n_kv_heads: int | None = None  # None: multi-head attention; fewer: grouped-query attention (chapter 20)
    norm: Norm = "layer"  # "layer": LayerNorm, as in GPT-2; "rms": RMSNorm, as in Llama (chapter 22)
    positions: Positions = "learned"  # "learned": a table added to the embeddings; "rotary": rotated q, k (chapter 21)
    qk_norm: bool = False  # True: every head's queries and keys divided by their RMS before the scores
    tie_embeddings: bool = True  # True: the output layer is the embedding table (GPT-2); False: a matrix of its own
    rope_base: float = 10000.0  # the base of the rotary frequencies (chapter 21); Llama 3 uses 500,000
    # None: logits as they are; c: c tanh(logits / c), every logit kept within (-c, c) (chapter 25; Gemma 2)
    logit_softcap: float | None = None

    def __post_init__(self) -> None:
        check_at_least_one(self, "block_size", "n_layers", "n_heads", "d_model", "d_ff")
        check_heads(self.d_model, self.n_heads, self.n_kv_heads)
        if self.norm not in NORMS:
            raise ValueError(f"norm must be one of {list(NORMS)}; got {self.norm!r}")
        if self.activation not in GPT_ACTIVATIONS:
            raise ValueError(f"activation must be one of {list(GPT_ACTIVATIONS)}; got {self.activation!r}")
        if self.positions not in ("learned", "rotary"):
            raise ValueError(f"positions must be 'learned' (a learned table added to the embeddings) or 'rotary' "
                             f"(queries and keys rotated, chapter 21); got {self.positions!r}")
        if self.positions == "rotary" and (self.d_model // self.n_heads) % 2:
            raise ValueError(f"rotary positions turn pairs of dimensions, so d_head = d_model / n_heads must be "
                             f"even; got d_head = {self.d_model // self.n_heads}")
        if isinstance(self.rope_base, bool) or not isinstance(self.rope_base, (int, float)) or not self.rope_base > 1:
            raise ValueError(f"rope_base (the base of the rotary frequencies) must be a number greater than 1; "
                             f"got {self.rope_base!r}")
        cap = self.logit_softcap
        if cap is not None and (isinstance(cap, bool) or not isinstance(cap, (int, float)) or not 0 < cap < math.inf):
            raise ValueError(f"logit_softcap must be None (no cap) or a positive finite number; got {cap!r}")


@dataclass(kw_only=True)
class GPTConfig(GPTShape):
    """Sizes of a decoder-only model in the GPT-2 layout: ``GPTShape`` and the vocabulary size, all given
    by name (``GPTConfig(vocab_size=65, d_model=64)``). ``d_ff`` defaults to ``4 d_model``."""

    vocab_size: int

    def __post_init__(self) -> None:
        super().__post_init__()
        check_at_least_one(self, "vocab_size")
        if self.d_ff is None:
            self.d_ff = swiglu_hidden(self.d_model) if self.activation == "swiglu" else 4 * self.d_model


class GPT(nn.Module):
    """Algorithm 10: a decoder-only Transformer with pre-norm blocks and tied embeddings (GPT-2's layout).

    ``forward(ids, cache=None)``: ``(B, T)`` ids, ``T <= block_size``, to ``(B, T, vocab_size)`` logits;
    position ``t`` sees positions ``0 .. t`` only. With a ``KVCache``, ``ids`` continue the tokens already
    cached: they take the positions after them, and attend to them without recomputing them.

    With ``positions="rotary"`` (chapter 21) there is no position table: every attention rotates its
    queries and keys by their absolute positions, so ``T`` is not limited by ``block_size`` (the model was
    trained on that many, though), and a sliding ``KVCache(max_length=...)`` may drop old positions.
    ``window`` (without a cache) lets each position see only the last ``window`` positions, itself
    included: what a sliding cache of that length computes.

    ``rope_base`` sets the rotary frequencies ``rope_base ** (-2 i / d_head)`` (10,000 by default; Llama 3
    uses 500,000), tabulated once for ``block_size`` positions. ``tie_embeddings=False`` gives the output
    layer a matrix of its own, ``head`` (``d_model`` by ``vocab_size``), instead of the embedding table;
    ``qk_norm=True`` normalises every attention head's queries and keys (``MultiHeadAttention``).
    ``logit_softcap=c`` returns ``c tanh(logits / c)``: close to the logits where they are small, never
    beyond ``c`` in size (chapter 25).
    """

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        c = self.config = config
        self.tok = TokenEmbedding(c.vocab_size, c.d_model)
        # Rotary positions live inside attention; the learned table is left out, not merely unused.
        self.pos = LearnedPositions(c.block_size, c.d_model) if c.positions == "learned" else None
        self.drop = nn.Dropout(c.dropout)
        self.blocks = nn.ModuleList(
            DecoderBlock(c.d_model, c.n_heads, c.d_ff, c.dropout, norm_first=True, activation=c.activation,
                         eps=c.eps, cross_attention=False, bias=c.bias, n_kv_heads=c.n_kv_heads,
                         rotary=c.positions == "rotary", norm=c.norm, qk_norm=c.qk_norm, rope_base=c.rope_base)
            for _ in range(c.n_layers))
        if c.positions == "rotary":
            # One table of cosines and sines for the context, computed here once and shared by every layer.
            rope = RotaryTables(c.d_model // c.n_heads, c.block_size, c.rope_base)
            for block in self.blocks:
                block.self_attn.rope = rope
        self.norm = make_norm(c.norm, c.d_model, c.eps, c.bias)
        # Untied, the output layer is a (d_model, vocab_size) matrix of its own, left out when tied.
        self.head = None if c.tie_embeddings else Linear(c.d_model, c.vocab_size, bias=False)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """GPT-2's initialisation: normal(0, 0.02), residual projections scaled by 1/sqrt(2 n_layers)."""
        for name, p in self.named_parameters():
            if name.endswith(".b") or "beta" in name:
                nn.init.zeros_(p)
            elif "gamma" in name:
                nn.init.ones_(p)
            else:
                std = 0.02 / math.sqrt(2 * self.config.n_layers) if name.endswith(("out_proj.W", "fc2.W")) else 0.02
                nn.init.normal_(p, 0.0, std)

    def forward(self, ids: torch.Tensor, cache: KVCache | None = None, window: int | None = None) -> torch.Tensor:
        self._check_forward(ids, cache, window)
        B, T = ids.shape
        x = self.tok(ids)  # (B, T, d_model)
        if self.pos is not None:  # learned positions; rotary ones enter inside attention instead
            offset = cache.length if cache is not None else 0  # the tokens already cached come first
            x = x + self.pos(T, offset)
        x = self.drop(x)
        self_mask = None if window is None else sliding_window_mask(T, window=window).to(ids.device)
        for block in self.blocks:
            x = block(x, self_mask=self_mask, cache=cache)  # (B, T, d_model)
        x = self.norm(x)
        # (B, T, vocab_size); tied, the unembedding is the embedding table
        logits = self.head(x) if self.head is not None else x @ self.tok.E.T
        cap = self.config.logit_softcap
        return logits if cap is None else cap * torch.tanh(logits / cap)

    def _check_forward(self, ids: torch.Tensor, cache: KVCache | None, window: int | None) -> None:
        """Refuses ids that are not ``(B, T)``, a window with a cache, a cache another model filled, and, with
        learned positions, a sliding cache or more than ``block_size`` positions in all."""
        if ids.dim() != 2:
            raise ValueError(f"ids must have shape (B, T); got {tuple(ids.shape)}")
        T = ids.shape[1]
        if window is not None and cache is not None:
            raise ValueError("window applies to a forward pass without a cache; for a sliding cache use "
                             "KVCache(max_length=window)")
        if cache is not None:
            cache.claim(self)  # a cache filled by another model would feed this one its keys
        if self.pos is None:  # rotary: positions enter inside attention, and any length runs
            return
        if cache is not None and cache.max_length is not None:
            raise ValueError("a sliding KVCache (max_length set) needs positions='rotary': with learned "
                             "positions every cached token changes position when the window slides")
        offset = cache.length if cache is not None else 0
        if offset + T > self.config.block_size:
            seen = f" after {offset} cached tokens" if offset else ""
            raise ValueError(f"sequence of length {T}{seen} is longer than block_size = {self.config.block_size}")

    def n_params(self, include_positions: bool = True) -> int:
        n = sum(p.numel() for p in self.parameters())
        return n if include_positions or self.pos is None else n - self.pos.P.numel()
