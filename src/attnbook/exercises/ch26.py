"""Checkers for the coding exercises of chapter 26 (the Vision Transformer)."""

from __future__ import annotations

import numpy as np
import torch

from attnbook.exercises._harness import Case, Checker, Mistake
from attnbook.numpy.positional import sinusoidal_encoding
from attnbook.torch.vit import patchify, sinusoidal_2d, unpatchify

# --- patches back to images, each patch listed channels last ------------------------------------------------


def _unpatchify(patches, patch_size, height, width):
    # each patch vector reordered from (row, column, channel) to patchify's (channel, row, column), then the
    # package's inverse of patchify
    p = patch_size
    B, N, D = patches.shape
    C = D // (p * p)
    channels_first = patches.reshape(B, N, p, p, C).permute(0, 1, 4, 2, 3).reshape(B, N, D)
    return unpatchify(channels_first, patch_size, height, width)


def _patch_cases() -> list[Case]:
    g = torch.Generator().manual_seed(2626)
    cases = []
    # (B, C, H, W, p)
    for B, C, H, W, p, why in ((2, 1, 8, 8, 2, " (the chapter's digits)"),
                               (1, 3, 6, 4, 2, " (three channels, taller than wide)"),
                               (2, 2, 6, 9, 3, " (two channels, wider than tall)"),
                               (1, 3, 4, 4, 4, " (three channels, one patch, the whole image)"),
                               (1, 2, 3, 2, 1, " (patches of one pixel)"),
                               (3, 3, 8, 4, 4, " (three channels, a column of two patches)")):
        N, D = (H // p) * (W // p), C * p * p
        patches = torch.randn(B, N, D, generator=g, dtype=torch.float64)
        cases.append(Case(f"patches of shape ({B}, {N}, {D}) from {C}-channel {H} x {W} images, patch_size {p}{why}",
                          (patches, p, H, W)))
    return cases


def _grid_by_columns(patches, patch_size, height, width):
    # the patches laid out column by column instead of row by row
    p = patch_size
    B, _, D = patches.shape
    C = D // (p * p)
    x = patches.reshape(B, width // p, height // p, p, p, C).permute(0, 5, 2, 3, 1, 4)
    return x.reshape(B, C, height, width)


def _channels_first(patches, patch_size, height, width):
    # each patch read as patchify lists it, (C, p, p), channels first: the page's layout, not this exercise's
    p = patch_size
    B, _, D = patches.shape
    C = D // (p * p)
    x = patches.reshape(B, height // p, width // p, C, p, p).permute(0, 3, 1, 4, 2, 5)
    return x.reshape(B, C, height, width)


def _patch_transposed(patches, patch_size, height, width):
    # each patch's pixels read column by column
    p = patch_size
    B, _, D = patches.shape
    C = D // (p * p)
    x = patches.reshape(B, height // p, width // p, p, p, C).permute(0, 5, 1, 4, 2, 3)
    return x.reshape(B, C, height, width)


def _reshaped_only(patches, patch_size, height, width):
    # a plain reshape: the numbers in patch order, poured into the image row by row
    B, _, D = patches.shape
    C = D // (patch_size * patch_size)
    return patches.reshape(B, C, height, width)


check_patches_to_images = Checker(
    name="patches_to_images",
    doc="Check ``fn(patches, patch_size, height, width) -> images``: patches ``(B, N, p^2 C)``, numbered row by row "
        "over the grid, each flattened channels last (pixel by pixel, row by row, the C channels of a pixel "
        "together), back to images ``(B, C, height, width)``. Allowed: ``patchify``. Forbidden: ``unpatchify``, "
        "``F.fold``, ``F.pixel_shuffle``, ``einops.rearrange``.",
    reference=_unpatchify,
    cases=_patch_cases(),
    mistakes=(
        Mistake(_channels_first, "these patches list their channels last: the C channels of pixel (0, 0) first, "
                "then those of pixel (0, 1), and so on, as images stored (height, width, channel) are cut; "
                "patchify's vectors hold all p x p pixels of channel 0 first, which is another order."),
        Mistake(_grid_by_columns, "the patches are numbered row by row: patch n sits in grid row "
                "n // (width / p) and grid column n % (width / p)."),
        Mistake(_patch_transposed, "within a patch, the pixels of one row come one after another (row by row), "
                "not column by column: check which of the two p axes is which."),
        Mistake(_reshaped_only, "a reshape alone keeps the numbers in patch order: the p rows of a patch must be "
                "spread over p rows of the image, so the axes have to be permuted, not only reshaped."),
    ),
    forbidden=(unpatchify, "torch.nn.functional.fold", "torch.nn.functional.pixel_shuffle",
               "einops.rearrange"),
    allowed=(patchify,),
)


# --- a 2-D sinusoidal encoding for a grid of patches -------------------------------------------------


def _grid_encoding(grid_h, grid_w, d_model):
    return sinusoidal_2d(grid_h, grid_w, d_model, dtype=torch.float64)


def _grid_cases() -> list[Case]:
    return [Case(f"grid_h {gh}, grid_w {gw}, d_model {d}{why}", (gh, gw, d)) for gh, gw, d, why in (
        (2, 3, 8, " (two rows, three columns)"),
        (4, 4, 16, " (the chapter's grid)"),
        (3, 2, 8, " (three rows, two columns)"),
        (1, 1, 4, " (one patch)"),
        (5, 7, 32, ""),
        (4, 4, 4, " (one frequency for rows, one for columns)"),
    )]


def _columns_first(grid_h, grid_w, d_model):
    rows = sinusoidal_encoding(grid_h, d_model // 2)
    cols = sinusoidal_encoding(grid_w, d_model // 2)
    return np.concatenate([np.tile(cols, (grid_h, 1)), np.repeat(rows, grid_w, axis=0)], axis=1)


def _flat_index(grid_h, grid_w, d_model):
    return sinusoidal_encoding(grid_h * grid_w, d_model)


def _full_width_halves(grid_h, grid_w, d_model):
    # each half cut from an encoding of width d_model: the frequencies of a d_model-wide encoding
    rows = sinusoidal_encoding(grid_h, d_model)[:, : d_model // 2]
    cols = sinusoidal_encoding(grid_w, d_model)[:, : d_model // 2]
    return np.concatenate([np.repeat(rows, grid_w, axis=0), np.tile(cols, (grid_h, 1))], axis=1)


def _patches_by_columns(grid_h, grid_w, d_model):
    rows = sinusoidal_encoding(grid_h, d_model // 2)
    cols = sinusoidal_encoding(grid_w, d_model // 2)
    return np.concatenate([np.tile(rows, (grid_w, 1)), np.repeat(cols, grid_h, axis=0)], axis=1)


def _interleaved(grid_h, grid_w, d_model):
    # row and column pairs alternating instead of in two halves
    rows = np.repeat(sinusoidal_encoding(grid_h, d_model // 2), grid_w, axis=0)
    cols = np.tile(sinusoidal_encoding(grid_w, d_model // 2), (grid_h, 1))
    out = np.empty((grid_h * grid_w, d_model))
    for k in range(d_model // 4):
        out[:, 4 * k: 4 * k + 2] = rows[:, 2 * k: 2 * k + 2]
        out[:, 4 * k + 2: 4 * k + 4] = cols[:, 2 * k: 2 * k + 2]
    return out


check_grid_encoding = Checker(
    name="grid_encoding",
    allowed=(sinusoidal_encoding,),  # the 1-D encoding; the grid is the exercise
    doc="Check ``fn(grid_h, grid_w, d_model) -> (grid_h * grid_w, d_model)``: a fixed 2-D position encoding of a "
        "grid of patches numbered row by row; patch (i, j) gets chapter 11's sinusoidal encoding (of width "
        "d_model / 2) of its row i in its first d_model / 2 columns and of its column j in the last d_model / 2.",
    reference=_grid_encoding,
    cases=_grid_cases(),
    atol=1e-6,
    rtol=1e-5,
    mistakes=(
        Mistake(_columns_first, "the row index goes in the first half and the column index in the second."),
        Mistake(_flat_index, "this is chapter 11's 1-D encoding of the patch number n = i grid_w + j: it makes "
                "patch (0, 3) and patch (1, 0) neighbours. Encode the row i and the column j separately."),
        Mistake(_full_width_halves, "each half is an encoding of width d_model / 2, with the frequencies of a "
                "d_model / 2-wide encoding; cutting half of a d_model-wide one keeps only its fastest frequencies."),
        Mistake(_patches_by_columns, "number the patches row by row: n = i grid_w + j, so the row index changes "
                "every grid_w patches and the column index at every patch."),
        Mistake(_interleaved, "put the whole row encoding in the first d_model / 2 columns and the whole column "
                "encoding after it, not their pairs alternating."),
    ),
    forbidden=(sinusoidal_2d,),
)
