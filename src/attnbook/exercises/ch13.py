"""Checkers for the coding exercises of chapter 13 (the encoder block)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from attnbook.exercises._harness import Case, Checker, Mistake
from attnbook.torch import EncoderBlock, LayerNorm, layer_norm

# --- layer norm per group of features, in a channels-first array ----------------------------------------------


def _group_ln_columns(x: torch.Tensor, gamma: torch.Tensor, beta: torch.Tensor, groups: int,
                      eps: float) -> torch.Tensor:
    """The package's layer norm, without its scale and shift, on each group of each column; then ``gamma``,
    ``beta`` per feature."""
    B, d, T = x.shape
    per_group = x.transpose(-1, -2).reshape(B, T, groups, d // groups)
    ones = torch.ones(d // groups, dtype=x.dtype)
    normed = layer_norm(per_group, ones, torch.zeros_like(ones), eps).reshape(B, T, d)
    return (normed * gamma + beta).transpose(-1, -2)


def _ln_cases() -> list[Case]:
    g = torch.Generator().manual_seed(1301)
    f64 = torch.float64
    cases = [Case("x=[[[1], [2], [3], [4]]] (one position, d=4), groups=2, gamma=1, beta=0",
                  (torch.tensor([[[1.0], [2.0], [3.0], [4.0]]], dtype=f64), torch.ones(4, dtype=f64),
                   torch.zeros(4, dtype=f64), 2, 1e-5))]
    for B, d, T, G in ((2, 6, 3, 1), (3, 4, 4, 2), (2, 8, 5, 4), (1, 6, 6, 3), (2, 4, 3, 4)):
        x = torch.randn(B, d, T, generator=g, dtype=f64) * 3 + 1
        if G == 3:
            x[0, :2, 1] = 5.0  # a group whose features are all equal: only eps keeps it defined
        cases.append(Case(f"random x (B={B}, d={d}, T={T}), groups={G}, random gamma and beta"
                          + (", one constant group" if G == 3 else ""),
                          (x, torch.randn(d, generator=g, dtype=f64), torch.randn(d, generator=g, dtype=f64), G,
                           1e-5)))
    return cases


def _normalise(x, groups, eps, dim_mean=-2, unbiased=False, interleaved=False):
    # The mistakes' own normalisation, over groups of the features of each column.
    B, d, T = x.shape
    z = x.reshape(B, d // groups, groups, T) if interleaved else x.reshape(B, groups, d // groups, T)
    axis = 1 if interleaved else 2
    mean = z.mean(axis, keepdim=True)
    var = z.var(axis, keepdim=True, unbiased=unbiased)
    return ((z - mean) / torch.sqrt(var + eps)).reshape(B, d, T)


def _whole_column(x, gamma, beta, groups, eps):
    return _normalise(x, 1, eps) * gamma[:, None] + beta[:, None]


def _interleaved_groups(x, gamma, beta, groups, eps):
    return _normalise(x, groups, eps, interleaved=True) * gamma[:, None] + beta[:, None]


def _unbiased(x, gamma, beta, groups, eps):
    return _normalise(x, groups, eps, unbiased=True) * gamma[:, None] + beta[:, None]


def _pooled_positions(x, gamma, beta, groups, eps):
    # PyTorch's GroupNorm: each group's statistics over its features and every position together
    B, d, T = x.shape
    z = x.reshape(B, groups, -1)
    mean, var = z.mean(-1, keepdim=True), z.var(-1, keepdim=True, unbiased=False)
    return ((z - mean) / torch.sqrt(var + eps)).reshape(B, d, T) * gamma[:, None] + beta[:, None]


def _gamma_along_positions(x, gamma, beta, groups, eps):
    return _normalise(x, groups, eps) * gamma + beta  # broadcasts along T: runs only when T == d


check_group_norm_columns = Checker(
    name="group_norm_columns",
    doc="Check ``fn(x, gamma, beta, groups, eps) -> x.shape``: for ``x`` ``(B, d, T)`` with one column of ``d`` "
        "features per position, each column's ``groups`` consecutive blocks of ``d / groups`` features "
        "normalised on their own (mean 0, biased variance 1, ``eps`` added to it), then ``gamma``, ``beta`` "
        "``(d,)`` per feature.",
    reference=_group_ln_columns,
    cases=_ln_cases(),
    mistakes=(
        Mistake(_whole_column, "each group of d / groups features has its own mean and variance; the whole "
                "column's statistics are right only for groups=1."),
        Mistake(_interleaved_groups, "a group is a block of consecutive features, 0 .. d/groups - 1 first; "
                "reshape the feature axis to (groups, d/groups), not (d/groups, groups)."),
        Mistake(_unbiased, "layer norm divides by the number of features averaged, not one fewer: use the "
                "biased variance."),
        Mistake(_pooled_positions, "that is PyTorch's GroupNorm, whose statistics pool every position of the "
                "sequence; here each position is normalised on its own."),
        Mistake(_gamma_along_positions, "gamma and beta have one entry per feature, and the features run down "
                "axis -2: give them a trailing axis of length 1 so that they broadcast along the positions."),
    ),
    forbidden=(layer_norm, LayerNorm.forward, F.layer_norm, torch.layer_norm, torch.native_layer_norm,
               torch.nn.LayerNorm.forward, F.group_norm, torch.group_norm, torch.native_group_norm,
               torch.nn.GroupNorm.forward, F.instance_norm, torch.instance_norm, F.batch_norm, torch.batch_norm,
               torch.native_batch_norm, F.rms_norm, "torch.rms_norm"),
)


# --- debugging a pre-norm block ---------------------------------------------------------------------------


class BlockParts:
    """The four parts of an encoder block, as functions: ``norm1(x)``, ``attn(q_in, kv_in, mask)`` (the
    attention's output only), ``norm2(x)`` and ``ff(x)``. Two are equal when their weights are."""

    def __init__(self, block: EncoderBlock) -> None:
        self._block = block

    def norm1(self, x: torch.Tensor) -> torch.Tensor:
        return self._block.norm1(x)

    def attn(self, q_in: torch.Tensor, kv_in: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        return self._block.attn(q_in, kv_in, mask=mask)[0]

    def norm2(self, x: torch.Tensor) -> torch.Tensor:
        return self._block.norm2(x)

    def ff(self, x: torch.Tensor) -> torch.Tensor:
        return self._block.ff(x)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, BlockParts):
            return NotImplemented
        mine, theirs = self._block.state_dict(), other._block.state_dict()
        return mine.keys() == theirs.keys() and all(torch.equal(mine[k], theirs[k]) for k in mine)

    __hash__ = None  # equal by value, so not hashable

    def __repr__(self) -> str:
        return f"BlockParts(d_model={self._block.norm1.gamma.shape[0]})"


def _pre_norm_block(x: torch.Tensor, parts: BlockParts, mask: torch.Tensor | None) -> torch.Tensor:
    with torch.no_grad():
        return parts._block(x, mask)


def _block_cases() -> list[Case]:
    cases = []
    for seed, (B, T, d, h, d_ff, lengths) in enumerate(((2, 5, 8, 2, 16, (5, 3)), (1, 4, 12, 3, 24, None),
                                                        (3, 6, 8, 4, 32, (6, 6, 2)))):
        torch.manual_seed(1302 + seed)
        block = EncoderBlock(d, h, d_ff, norm_first=True).double()
        with torch.no_grad():
            for p in block.parameters():  # norms and biases away from 1 and 0, so that each counts
                if p.dim() == 1:
                    p.add_(0.3 * torch.randn_like(p))
        x = 2 * torch.randn(B, T, d, dtype=torch.float64)
        keep = None if lengths is None else torch.arange(T)[None, :] < torch.tensor(lengths)[:, None]  # (B, T)
        mask = None if keep is None else keep[:, None, :]  # (B, 1, T): the same keys for every query
        label = (f"a pre-norm block (d_model={d}, {h} heads, d_ff={d_ff}), x ({B}, {T}, {d}), "
                 + ("no mask" if mask is None else f"padding mask, lengths {lengths}"))
        cases.append(Case(label, (x, BlockParts(block), mask)))
    return cases


def _buggy(x, block, mask):
    h = block.norm1(x)
    h = h + block.attn(h, h, mask)
    return h + block.ff(block.norm2(h))


def _post_norm(x, block, mask):
    x = block.norm1(x + block.attn(x, x, mask))
    return block.norm2(x + block.ff(x))


def _one_norm(x, block, mask):
    h = block.norm1(x)
    x = x + block.attn(h, h, mask)
    return x + block.ff(block.norm1(x))


check_pre_norm_block = Checker(
    name="pre_norm_block",
    doc="Check ``fn(x, block, mask) -> (B, T, d_model)``: the output of a pre-norm encoder block for ``x`` "
        "``(B, T, d_model)`` and a boolean ``mask`` (True where allowed, or None), computed from the block's "
        "parts ``block.norm1(x)``, ``block.attn(q_in, kv_in, mask)``, ``block.norm2(x)`` and ``block.ff(x)``.",
    reference=_pre_norm_block,
    cases=_block_cases(),
    mistakes=(
        Mistake(_buggy, "the residual stream carries x itself: add each sublayer's output to the block's input, "
                "not to its normalised copy, which exists only to feed the sublayer."),
        Mistake(_post_norm, "this block is pre-norm: the norm comes before each sublayer, and the stream itself is "
                "never normalised."),
        Mistake(_one_norm, "each sublayer has its own norm: norm2 before the feed-forward network."),
    ),
    forbidden=(EncoderBlock.forward,),
)
