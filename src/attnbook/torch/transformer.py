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

from attnbook._fields import Checked, blame, choice, count, flag, real
from attnbook._validate import check_heads, check_rotary_width
from attnbook.torch.blocks import DecoderBlock, EncoderBlock
from attnbook.torch.embedding import LearnedPositions, SinusoidalPositions, TokenEmbedding, Unembedding
from attnbook.torch.feedforward import swiglu_hidden
from attnbook.torch.kvcache import KVCache
from attnbook.torch.layernorm import LayerNorm
from attnbook.torch.linear import Linear
from attnbook.torch.masks import token_padding_mask
from attnbook.torch.rmsnorm import make_norm
from attnbook.torch.rotary import RotaryTables, sliding_window_mask

# The values of the configurations' named choices, as types: the command line offers them as choices.
Norm = Literal["layer", "rms"]
# FeedForward's activations (ACTIVATIONS), or the gated SwiGLU; tests/package/test_cli_help.py checks the two agree.
GPTActivation = Literal["gelu", "gelu_tanh", "relu", "relu2", "swiglu"]
Positions = Literal["learned", "rotary"]
SeqPositions = Literal["sinusoidal", "learned"]
FFActivation = Literal["relu", "gelu", "gelu_tanh", "relu2"]  # FeedForward's (ACTIVATIONS)
FF_ACTIVATIONS = get_args(FFActivation)
NORMS = get_args(Norm)  # GPTShape.norm
GPT_ACTIVATIONS = get_args(GPTActivation)  # GPTShape.activation


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


def _dropout(default: float = 0.0) -> float:
    return real(default, ok=lambda p: 0 <= p < 1, expected="in [0, 1)",
                help="the probability of zeroing each activation where dropout applies, in training only")


def _ff_width(d_model: int, d_ff: int | None, activation: str = "") -> int:
    """The feed-forward width: ``d_ff`` if given, else ``4 d_model``, or ``swiglu_hidden(d_model)`` for SwiGLU
    (as many weights as ``4 d_model`` with two matrices)."""
    if d_ff is not None:
        return d_ff
    return swiglu_hidden(d_model) if activation == "swiglu" else 4 * d_model


@dataclass(kw_only=True)
class _Sizes(Checked):
    """The sizes an encoder-decoder and an encoder-only model share (chapter 15): the width, the heads, the
    feed-forward width (``None``: ``4 d_model``), the longest sequence, dropout, where the blocks normalise,
    and the padding id."""

    d_model: int = count(64, help="the width of every token's vector, d_model")
    n_heads: int = count(4, help="attention heads per layer; they must divide d_model")
    d_ff: int | None = count(None, optional="4 d_model", help="the feed-forward layer's hidden width, d_ff")
    max_len: int = count(128, help="the longest sequence the position table covers")
    dropout: float = _dropout()
    norm_first: bool = flag(False, help="pre-norm blocks (normalise before each sublayer) instead of post-norm")
    pad_id: int = count(0, minimum=-1, help="the padding token's id, masked out of attention (-1: none)")

    def check(self) -> None:
        super().check()
        with blame("n_heads", "d_model"):
            check_heads(self.d_model, self.n_heads)

    @property
    def ff_width(self) -> int:
        """The feed-forward width the blocks get: ``d_ff``, or ``4 d_model`` when ``d_ff`` is ``None``."""
        return _ff_width(self.d_model, self.d_ff)


@dataclass
class TransformerConfig(_Sizes):
    """Sizes of an encoder-decoder model: the vocabularies (the only fields given by position), the shared
    sizes and the layers. ``ff_width`` is ``d_ff``, or ``4 d_model`` when it is ``None``."""

    src_vocab_size: int = count(help="the source vocabulary's size")
    tgt_vocab_size: int = count(help="the target vocabulary's size")
    _: KW_ONLY
    n_encoder_layers: int = count(2, minimum=0, help="encoder blocks")
    n_decoder_layers: int = count(2, minimum=0, help="decoder blocks")
    activation: FFActivation = choice("relu", FF_ACTIVATIONS, help="the feed-forward layer's activation")
    positions: SeqPositions = choice("sinusoidal", get_args(SeqPositions),
                                     help="'sinusoidal': fixed encodings (chapter 11); 'learned': a trained table")


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
        self.encoder = Encoder(c.n_encoder_layers, c.d_model, c.n_heads, c.ff_width, c.dropout, c.norm_first,
                               c.activation)
        self.decoder = Decoder(c.n_decoder_layers, c.d_model, c.n_heads, c.ff_width, c.dropout, c.norm_first,
                               c.activation)
        self.unembed = Unembedding(c.d_model, c.tgt_vocab_size, bias=True)

    def embed(self, ids: torch.Tensor, table: TokenEmbedding) -> torch.Tensor:
        # The token vectors are multiplied by sqrt(d_model), as in section 3.4 of Vaswani et al. (2017), to bring
        # them nearer the positions' scale: the token table starts with entries of standard deviation 0.02, while
        # the sinusoidal positions (the default) have a root mean square of 1/sqrt(2) at any width. The factor
        # raises the tokens to 0.02 sqrt(d_model): 0.16 at d_model = 64, still under a quarter of the positions'
        # (chapter 15). The package scales here, with either kind of positions; the GPT and the encoder-only
        # model, whose learned positions start as small as their tokens, add the two unscaled.
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
    shared sizes and the layers. ``ff_width`` is ``d_ff``, or ``4 d_model`` when it is ``None``."""

    vocab_size: int = count(help="the vocabulary's size")
    _: KW_ONLY
    n_layers: int = count(2, help="encoder blocks")
    activation: FFActivation = choice("gelu", FF_ACTIVATIONS, help="the feed-forward layer's activation")


@dataclass(kw_only=True)
class EncoderShape(Checked):
    """What fixes a small encoder-only model's architecture, less its vocabulary: the fields a masked-language-
    model run (chapter 24's ``MLMRunConfig``) composes. ``block_size`` is the longest window; the blocks are
    pre-norm (``norm_first``) as the GPT's are, and use GELU."""

    block_size: int = count(64, minimum=2, help="the longest window of characters the model reads")
    n_layers: int = count(4, help="encoder blocks")
    n_heads: int = count(4, help="attention heads per layer; they must divide d_model")
    d_model: int = count(128, help="the width of every token's vector, d_model")
    dropout: float = _dropout()
    # pre-norm blocks, as the GPT has (BERT itself is post-norm)
    norm_first: bool = flag(True, help="pre-norm blocks, as the GPT's (BERT itself is post-norm)")

    def check(self) -> None:
        super().check()
        with blame("n_heads", "d_model"):
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
        self.encoder = Encoder(c.n_layers, c.d_model, c.n_heads, c.ff_width, c.dropout, c.norm_first, c.activation)
        self.head = nn.Sequential(Linear(c.d_model, c.d_model), nn.GELU(), LayerNorm(c.d_model))
        self.unembed = Unembedding(c.d_model, c.vocab_size, bias=True)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.drop(self.embed(ids) + self.positions(ids.shape[1]))
        h = self.encoder(x, token_padding_mask(ids, self.config.pad_id))  # (B, 1, T): padded keys masked
        return self.unembed(self.head(h))




@dataclass(kw_only=True)
class GPTShape(Checked):
    """What fixes a GPT's architecture, less its vocabulary: the fields ``GPTConfig`` and a training run's
    ``GPTRunConfig`` share (defined once, here). ``d_ff`` ``None`` means ``4 d_model``, or
    ``swiglu_hidden(d_model)`` (``8 d_model / 3`` rounded) with ``activation="swiglu"``, as many weights: the
    width the blocks get is ``ff_width``. ``norm="rms"`` and ``activation="swiglu"`` with ``bias=False`` make the
    block Llama's (chapter 22)."""

    block_size: int = count(64, help="the context: the longest sequence of tokens the model reads")
    n_layers: int = count(4, help="decoder blocks")
    n_heads: int = count(4, help="attention heads per layer; they must divide d_model")
    d_model: int = count(128, help="the width of every token's vector, d_model")
    d_ff: int | None = count(None, optional="4 d_model, or 8 d_model / 3 rounded with swiglu",
                             help="the MLP's hidden width, d_ff")
    dropout: float = _dropout()
    activation: GPTActivation = choice("gelu_tanh", get_args(GPTActivation),
                                       help="the MLP's activation; swiglu makes it gated (chapter 22)")
    eps: float = real(1e-5, ok=lambda e: e >= 0, expected="a finite number, 0 or more",
                      help="the small number the norms add to the variance before its root")
    bias: bool = flag(True, help="biases in linear layers and layer norms, as in GPT-2 (nanoGPT's recipes have none)")
    n_kv_heads: int | None = count(None, optional="multi-head attention",
                                   help="key-value heads; fewer than n_heads: grouped-query attention (chapter 20)")
    norm: Norm = choice("layer", get_args(Norm), help="'layer': LayerNorm, as GPT-2; 'rms': RMSNorm, as Llama")
    positions: Positions = choice("learned", get_args(Positions),
                                  help="'learned': a table added to the embeddings; 'rotary': rotated queries "
                                       "and keys (chapter 21)")
    qk_norm: bool = flag(False, help="divide every head's queries and keys by their RMS before the scores")
    tie_embeddings: bool = flag(True, help="the output layer is the embedding table (GPT-2) rather than a "
                                           "matrix of its own")
    rope_base: float = real(10000.0, ok=lambda b: b > 1, expected="a finite number greater than 1",
                            help="the base of the rotary frequencies (chapter 21); Llama 3 uses 500,000")
    logit_softcap: float | None = real(None, ok=lambda c: c > 0, expected="a positive finite number",
                                       optional="no cap",
                                       help="c: logits become c tanh(logits / c), kept within (-c, c) (chapter 25)")

    def check(self) -> None:
        super().check()
        with blame("n_heads", "d_model", "n_kv_heads"):
            check_heads(self.d_model, self.n_heads, self.n_kv_heads)
        if self.positions == "rotary":
            with blame("positions", "n_heads", "d_model"):
                check_rotary_width(self.d_model, self.n_heads)

    @property
    def ff_width(self) -> int:
        """The MLP's hidden width: ``d_ff``, or ``4 d_model`` (``swiglu_hidden(d_model)`` for SwiGLU) when it is
        ``None``. A property, so that ``replace(config, d_model=...)`` derives it again."""
        return _ff_width(self.d_model, self.d_ff, self.activation)


@dataclass(kw_only=True)
class GPTConfig(GPTShape):
    """Sizes of a decoder-only model in the GPT-2 layout: ``GPTShape`` and the vocabulary size, all given
    by name (``GPTConfig(vocab_size=65, d_model=64)``). ``ff_width`` is ``d_ff``, or ``4 d_model`` when ``d_ff``
    is ``None``."""

    vocab_size: int = count(help="the vocabulary's size")


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
            DecoderBlock(c.d_model, c.n_heads, c.ff_width, c.dropout, norm_first=True, activation=c.activation,
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
