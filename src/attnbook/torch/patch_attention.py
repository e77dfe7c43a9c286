"""Where a vision Transformer's heads look on the image (chapter 26).

Two measurements of self-attention weights among the patches of a ``g x g`` grid, patches numbered row by
row as ``attnbook.torch.vit.patchify`` numbers them:

- ``attention_distance``: the attention-weighted mean distance, in pixels, from a query patch's centre to the
  key patches' centres, averaged over queries (the "mean attention distance" of Dosovitskiy et al. 2021).
- ``offset_weights``: the share of a head's weight that goes to keys at each relative offset ``(rows,
  columns)`` from their query; a head that acts like one offset of a convolution kernel (chapter 10) puts
  all of it on one offset, as far as the grid's edges allow.
"""

from __future__ import annotations

import torch

from attnbook._validate import require_int, shape_str
from attnbook.torch._checks import require_tensor


def _check_weights(weights: torch.Tensor, grid: int, class_token: bool) -> torch.Tensor:
    """The patch-to-patch block of ``weights``, each row renormalised when a class token is dropped."""
    require_tensor("weights", weights)
    require_int("grid", grid, 1)
    T = grid * grid + bool(class_token)
    if weights.dim() < 2 or tuple(weights.shape[-2:]) != (T, T):
        what = f"{grid} x {grid} = {grid * grid} patches" + (" and a class token" if class_token else "")
        raise ValueError(f"weights must have shape (..., {T}, {T}) for {what}; got {shape_str(weights.shape)}")
    if class_token:  # keep the patches' weight on patches, as a distribution again
        weights = weights[..., 1:, 1:]
        weights = weights / weights.sum(dim=-1, keepdim=True).clamp_min(1e-30)
    return weights


def patch_centres(grid: int, patch_size: int) -> torch.Tensor:
    """The centre of every patch in pixels, ``(grid^2, 2)`` as ``(row, column)``; patch ``(i, j)`` has its
    centre at ``(i p + (p - 1) / 2, j p + (p - 1) / 2)``, pixels counted from 0. Chapter 26."""
    require_int("grid", grid, 1)
    require_int("patch_size", patch_size, 1)
    ij = torch.stack(torch.meshgrid(torch.arange(grid), torch.arange(grid), indexing="ij"), dim=-1).reshape(-1, 2)
    return ij.double() * patch_size + (patch_size - 1) / 2


def attention_distance(weights: torch.Tensor, grid: int, patch_size: int, class_token: bool = False) -> torch.Tensor:
    """Mean attention distance in pixels: ``(1/N) sum_q sum_k w_qk |c_q - c_k|``, ``c`` the patch centres.

    ``weights`` ``(..., h, T, T)``: self-attention over ``N = grid^2`` patches (``T = N``), or over a class token
    and the patches (``T = N + 1``, ``class_token=True``: the class token's row and column are dropped and each
    patch's weights on the patches renormalised to sum to 1). Returns ``(..., h)``, averaged over the queries;
    average over images yourself. Chapter 26; Dosovitskiy et al. (2021), figure 7.
    """
    w = _check_weights(weights, grid, class_token)
    c = patch_centres(grid, patch_size)
    distance = torch.cdist(c, c).to(w.dtype)  # (N, N) Euclidean distances between centres
    return (w * distance).sum(dim=-1).mean(dim=-1)


def offsets(grid: int) -> torch.Tensor:
    """One-hot offsets: ``(N, N, (2 grid - 1)^2)``, 1 where key ``k`` sits at offset ``(a, b)`` from query ``q``,
    ``a`` rows down and ``b`` columns right, at index ``(a + grid - 1)(2 grid - 1) + (b + grid - 1)``."""
    require_int("grid", grid, 1)
    ij = torch.stack(torch.meshgrid(torch.arange(grid), torch.arange(grid), indexing="ij"), dim=-1).reshape(-1, 2)
    d = ij[None, :, :] - ij[:, None, :] + (grid - 1)  # (N, N, 2): key minus query, shifted to start at 0
    index = d[..., 0] * (2 * grid - 1) + d[..., 1]
    return torch.nn.functional.one_hot(index, (2 * grid - 1) ** 2).double()


def offset_weights(weights: torch.Tensor, grid: int, class_token: bool = False) -> torch.Tensor:
    """How a head's attention divides over relative offsets: ``(..., h, T, T)`` to ``(..., h, 2g - 1, 2g - 1)``.

    Entry ``[a + g - 1, b + g - 1]`` is the weight that keys ``a`` rows down and ``b`` columns right of their
    query receive, summed over the queries and divided by the number of queries ``N``: the share of all the
    head's weight that goes to that offset (the entries sum to 1 when every query's weights do). Uniform
    attention gives offset ``(a, b)`` the share ``(g - |a|)(g - |b|) / N^2``, at most ``1/N`` (at ``(0, 0)``);
    one head of chapter 10's convolution, weight 1 on the key at one offset wherever there is one, gives it
    ``(g - |a|)(g - |b|) / N``, the share of queries that have a key there (1 for ``(0, 0)``). ``weights`` as for
    ``attention_distance``. Chapter 26.
    """
    w = _check_weights(weights, grid, class_token)
    one_hot = offsets(grid).to(w.dtype)  # (N, N, O)
    total = torch.einsum("...qk,qko->...o", w, one_hot)  # weight at each offset, summed over the queries
    return (total / (grid * grid)).unflatten(-1, (2 * grid - 1, 2 * grid - 1))


def offset_coverage(grid: int) -> torch.Tensor:
    """The share of the ``N = grid^2`` queries that have a key at each offset, ``(2g - 1, 2g - 1)``: the most a
    head can put on that offset, and what a convolution head for that offset puts there. Chapter 26."""
    one_hot = offsets(grid)
    return (one_hot.sum(dim=(0, 1)) / (grid * grid)).unflatten(-1, (2 * grid - 1, 2 * grid - 1))


def strongest_offset(offset_map: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The largest entry of each ``offset_weights`` map and its offset: ``(..., 2g - 1, 2g - 1)`` to
    ``(share (...), offset (..., 2))``, the offset as ``(rows down, columns right)``. Chapter 26."""
    require_tensor("offset_map", offset_map)
    size = offset_map.shape[-1]
    if offset_map.dim() < 2 or offset_map.shape[-2] != size or size % 2 == 0:
        raise ValueError(f"offset_map must have shape (..., 2g - 1, 2g - 1); got {shape_str(offset_map.shape)}")
    share, index = offset_map.flatten(-2).max(dim=-1)
    g = (size + 1) // 2
    return share, torch.stack([index // size - (g - 1), index % size - (g - 1)], dim=-1)
