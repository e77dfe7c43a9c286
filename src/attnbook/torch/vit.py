"""The Vision Transformer (chapter 26): an image read as a sequence of patches by chapter 13's encoder.

Dosovitskiy et al. (2021): cut an image into non-overlapping ``p x p`` patches, flatten each one, map it
linearly to ``d_model`` (the same map as a convolution whose kernel and stride are both ``p``), put a class
token in front or pool the patches' vectors at the end, add a position per token, run pre-norm encoder
blocks, normalise, and classify.

Layout: images are ``(B, C, H, W)``, as ``torch.nn.Conv2d`` takes them. Patches are numbered row by row (left
to right, then top to bottom), and a patch is flattened channel first, then its rows, then its columns: the
layout of a ``conv2d`` weight ``(d_model, C, p, p)`` flattened, so that the two maps share their weights.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

import numpy as np
import torch
from torch import nn

from attnbook._fields import Checked, FieldError, blame, choice, count, real
from attnbook._validate import check_heads, require_int, shape_str
from attnbook.numpy.positional import sinusoidal_encoding
from attnbook.torch._checks import require_tensor
from attnbook.torch.blocks import EncoderBlock
from attnbook.torch.embedding import LearnedPositions
from attnbook.torch.layernorm import LayerNorm
from attnbook.torch.linear import Linear
from attnbook.torch.transformer import FF_ACTIVATIONS, FFActivation


def _check_images(images: torch.Tensor, patch_size: int) -> None:
    require_tensor("images", images)
    require_int("patch_size", patch_size, 1)
    if images.dim() != 4:
        raise ValueError(f"images must have shape (B, C, H, W); got {shape_str(images.shape)}")
    H, W = images.shape[-2:]
    if H % patch_size or W % patch_size:
        raise ValueError(f"the patch size {patch_size} must divide the height and the width of the images; got "
                         f"images of shape (B, C, H, W) = {shape_str(images.shape)}")


def patchify(images: torch.Tensor, patch_size: int) -> torch.Tensor:
    """Cut images into non-overlapping square patches and flatten each one (chapter 26).

    ``(B, C, H, W)`` to ``(B, N, C p^2)`` with ``p = patch_size`` and ``N = (H / p)(W / p)`` patches, numbered row
    by row; patch ``n = i (W / p) + j`` holds pixels ``[i p, (i + 1) p) x [j p, (j + 1) p)`` of every channel,
    flattened channel first, then rows, then columns. ``p`` must divide ``H`` and ``W``.
    """
    _check_images(images, patch_size)
    B, C, H, W = images.shape
    p = patch_size
    x = images.reshape(B, C, H // p, p, W // p, p)  # (B, C, grid row, row in patch, grid column, column in patch)
    x = x.permute(0, 2, 4, 1, 3, 5)  # (B, H/p, W/p, C, p, p)
    return x.reshape(B, (H // p) * (W // p), C * p * p)


def unpatchify(patches: torch.Tensor, patch_size: int, height: int, width: int) -> torch.Tensor:
    """The inverse of ``patchify``: ``(B, N, C p^2)`` patches back to ``(B, C, height, width)`` images.

    ``N`` must be ``(height / p)(width / p)`` and the last axis a multiple of ``p^2``. Chapter 26.
    """
    require_tensor("patches", patches)
    for name, value in (("patch_size", patch_size), ("height", height), ("width", width)):
        require_int(name, value, 1)
    p = patch_size
    if height % p or width % p:
        raise ValueError(f"the patch size {p} must divide height {height} and width {width}")
    gh, gw = height // p, width // p
    if patches.dim() != 3 or patches.shape[1] != gh * gw or patches.shape[2] % (p * p) or patches.shape[2] == 0:
        raise ValueError(f"patches must have shape (B, N, C p^2) with N = {gh} x {gw} = {gh * gw} patches of "
                         f"{p} x {p} pixels per channel; got {shape_str(patches.shape)}")
    B, _, D = patches.shape
    C = D // (p * p)
    x = patches.reshape(B, gh, gw, C, p, p).permute(0, 3, 1, 4, 2, 5)  # (B, C, H/p, p, W/p, p)
    return x.reshape(B, C, height, width)


class PatchEmbedding(nn.Module):
    """A linear map of each flattened patch to ``d_model``: ``z_n = x_n E + b`` (chapter 26).

    ``forward(images)``: ``(B, C, H, W)`` to ``(B, N, d_model)``. ``E`` is ``proj.W``, ``(C p^2, d_model)``.
    ``conv_weight()`` gives the same map as the weight of a ``conv2d`` with kernel and stride ``p``.
    """

    def __init__(self, patch_size: int, in_channels: int, d_model: int) -> None:
        super().__init__()
        for name, value in (("patch_size", patch_size), ("in_channels", in_channels), ("d_model", d_model)):
            require_int(name, value, 1)
        self.patch_size, self.in_channels, self.d_model = patch_size, in_channels, d_model
        self.proj = Linear(in_channels * patch_size * patch_size, d_model)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        self._check(images)
        patches = patchify(images, self.patch_size)  # (B, N, C p^2): one flattened patch per row
        return self.proj(patches)  # (B, N, d_model): z_n = x_n E + b, the same E for every patch

    def conv_weight(self) -> torch.Tensor:
        """``E`` as a ``conv2d`` weight, ``(d_model, C, p, p)``: output channel ``k`` is column ``k`` of ``E``."""
        p = self.patch_size
        return self.proj.W.T.reshape(self.d_model, self.in_channels, p, p)

    def _check(self, images: torch.Tensor) -> None:
        """Refuses anything but ``(B, C, H, W)`` images of ``in_channels`` channels that ``p`` divides."""
        _check_images(images, self.patch_size)
        if images.shape[1] != self.in_channels:
            raise ValueError(f"images must have {self.in_channels} channel(s), shape (B, {self.in_channels}, H, W); "
                             f"got {shape_str(images.shape)}")


def sinusoidal_2d(grid_h: int, grid_w: int, d_model: int, base: float = 10000.0,
                  dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """A fixed 2-D position encoding for a grid of patches, ``(grid_h grid_w, d_model)`` (chapter 26).

    Patch ``(i, j)`` (row ``n = i grid_w + j``) gets chapter 11's sinusoidal encoding of its row ``i`` in its
    first ``d_model / 2`` columns and of its column ``j`` in the last ``d_model / 2``, each with ``d_model / 2``
    dimensions. ``d_model`` must be a multiple of 4.
    """
    require_int("grid_h", grid_h, 1)
    require_int("grid_w", grid_w, 1)
    require_int("d_model", d_model, 4)
    if d_model % 4:
        raise ValueError(f"d_model must be a multiple of 4 (a sine and a cosine per frequency, for rows and for "
                         f"columns); got {d_model}")
    rows = sinusoidal_encoding(grid_h, d_model // 2, base)  # (grid_h, d/2)
    cols = sinusoidal_encoding(grid_w, d_model // 2, base)  # (grid_w, d/2)
    grid = np.concatenate([np.repeat(rows, grid_w, axis=0), np.tile(cols, (grid_h, 1))], axis=1)
    return torch.tensor(grid, dtype=dtype)


Pool = Literal["mean", "cls"]
ViTPositions = Literal["learned", "sinusoidal", "none"]
POOLS = get_args(Pool)
POSITIONS = get_args(ViTPositions)


@dataclass
class ViTConfig(Checked):
    """The shape of a ``ViT``. ``pool``: ``"mean"`` averages the patch vectors, ``"cls"`` reads a class token
    put in front of them. ``positions``: ``"learned"`` (a table with a row per token), ``"sinusoidal"``
    (``sinusoidal_2d``, fixed; the class token gets zeros) or ``"none"``."""

    image_size: int = count(8, help="the images' side in pixels")
    patch_size: int = count(2, help="the patches' side in pixels; it must divide image_size")
    in_channels: int = count(1, help="colour channels per pixel")
    n_classes: int = count(10, help="the classes the head scores")
    d_model: int = count(32, help="the width of every token's vector, d_model")
    n_heads: int = count(4, help="attention heads per layer; they must divide d_model")
    n_layers: int = count(2, minimum=0, help="encoder blocks")
    d_ff: int = count(64, help="the MLP's hidden width, d_ff")
    pool: Pool = choice("mean", POOLS, help="'mean': average the patch vectors; 'cls': read a class token")
    positions: ViTPositions = choice("learned", POSITIONS,
                                     help="'learned': a table; 'sinusoidal': fixed 2-D encodings; 'none'")
    dropout: float = real(0.0, ok=lambda p: 0 <= p < 1, expected="in [0, 1)",
                          help="the probability of zeroing each activation where dropout applies, in training only")
    activation: FFActivation = choice("gelu", FF_ACTIVATIONS, help="the MLP's activation")

    def check(self) -> None:
        super().check()
        if self.image_size % self.patch_size:
            raise FieldError(f"patch_size {self.patch_size} must divide image_size {self.image_size}",
                             "patch_size", "image_size")
        with blame("n_heads", "d_model"):
            check_heads(self.d_model, self.n_heads)

    @property
    def grid(self) -> int:
        """Patches per side: ``image_size / patch_size``."""
        return self.image_size // self.patch_size

    @property
    def n_patches(self) -> int:
        return self.grid**2

    @property
    def n_tokens(self) -> int:
        """The sequence length the blocks see: the patches, and the class token if there is one."""
        return self.n_patches + (self.pool == "cls")


class ViT(nn.Module):
    """The Vision Transformer (Dosovitskiy et al. 2021), built from chapter 13's pre-norm ``EncoderBlock``.

    ``forward(images)``: ``(B, C, H, W)`` to logits ``(B, n_classes)``. ``tokens(images)`` is the sequence the
    first block reads, ``(B, T, d_model)``: the embedded patches, the class token in front (``pool="cls"``),
    positions added. The blocks are in ``blocks``; their attention modules are ``blocks.{i}.attn``, which
    ``attnbook.torch.inspect.record_attention`` records. Chapter 26.
    """

    def __init__(self, config: ViTConfig) -> None:
        super().__init__()
        if not isinstance(config, ViTConfig):
            raise ValueError(f"ViT takes a ViTConfig: ViT(ViTConfig(...)); got {config!r}")
        c = self.config = config
        self.patch = PatchEmbedding(c.patch_size, c.in_channels, c.d_model)  # E: (C p^2, d_model)
        self.cls = nn.Parameter(torch.zeros(1, 1, c.d_model)) if c.pool == "cls" else None  # the class token
        self.pos: nn.Module | None = None
        if c.positions == "learned":
            self.pos = LearnedPositions(c.n_tokens, c.d_model)  # P: one row per token, (T, d_model)
        elif c.positions == "sinusoidal":
            table = sinusoidal_2d(c.grid, c.grid, c.d_model)  # (N, d_model), fixed
            if c.pool == "cls":
                table = torch.cat([torch.zeros(1, c.d_model), table])  # the class token's row: zeros
            self.register_buffer("sinusoidal", table)  # moves with the model, not trained
        self.drop = nn.Dropout(c.dropout)
        self.blocks = nn.ModuleList(EncoderBlock(c.d_model, c.n_heads, c.d_ff, c.dropout, norm_first=True,
                                                 activation=c.activation) for _ in range(c.n_layers))
        self.norm = LayerNorm(c.d_model)
        self.head = Linear(c.d_model, c.n_classes)

    def tokens(self, images: torch.Tensor) -> torch.Tensor:
        """The input of the first block: ``(B, C, H, W)`` images to ``(B, T, d_model)``."""
        self._check_images(images)
        x = self.patch(images)  # (B, N, d_model)
        if self.cls is not None:  # the same learned vector in front of every image's patches
            x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1)  # (B, N + 1, d_model)
        if self.pos is not None:  # learned: row t of the table added to token t
            x = x + self.pos(x.shape[1])
        elif self.config.positions == "sinusoidal":  # the fixed table, (T, d_model), broadcast over the batch
            x = x + self.sinusoidal
        return x

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = self.drop(self.tokens(images))  # (B, T, d_model)
        for block in self.blocks:
            x = block(x)  # (B, T, d_model): pre-norm, z + MHA(LN(z)), then z + FFN(LN(z))
        x = self.norm(x)
        pooled = x[:, 0] if self.cls is not None else x.mean(dim=1)  # (B, d_model): the class token, or the mean
        return self.head(pooled)  # (B, n_classes)

    def n_params(self) -> int:
        """The number of parameters, the class token and the learned positions included."""
        return sum(p.numel() for p in self.parameters())

    def _check_images(self, images: torch.Tensor) -> None:
        """Refuses anything but images of the configured shape, ``(B, in_channels, image_size, image_size)``."""
        c = self.config
        require_tensor("images", images)
        if images.dim() != 4 or tuple(images.shape[1:]) != (c.in_channels, c.image_size, c.image_size):
            raise ValueError(f"images must have shape (B, {c.in_channels}, {c.image_size}, {c.image_size}); got "
                             f"{shape_str(images.shape)}")
