"""Checkers for the coding exercises of chapter 13 (the encoder block)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from attnbook.exercises._harness import Case, Checker, Mistake
from attnbook.exercises._modules import (
    ModuleCase,
    ModuleChecker,
    ReferenceAttention,
    away_from_init,
    causal_mask,
    lengths_mask,
)
from attnbook.torch import EncoderBlock, LayerNorm, TokenEmbedding, layer_norm
from attnbook.torch.attention import scaled_dot_product_attention

# --- the gradient of an embedding lookup -------------------------------------------------------------------


def _embedding_grad(ids: torch.Tensor, G: torch.Tensor, V: int) -> torch.Tensor:
    """Autograd through the package's ``TokenEmbedding``: the gradient reaching ``E`` when the looked-up vectors
    receive ``G``."""
    with torch.random.fork_rng():  # the module's random start would move the caller's generator
        embed = TokenEmbedding(V, G.shape[-1]).to(G.dtype)
    embed(ids).backward(G)
    return embed.E.grad


def _grad_cases() -> list[Case]:
    g = torch.Generator().manual_seed(1305)
    f64 = torch.float64
    cases = [Case("ids [[2, 0, 2]] (token 2 twice, token 1 never), V=3, G [[[1, 1], [2, 2], [1, -1]]]",
                  (torch.tensor([[2, 0, 2]]), torch.tensor([[[1.0, 1.0], [2.0, 2.0], [1.0, -1.0]]], dtype=f64), 3))]
    for B, T, V, d in ((2, 4, 5, 3), (3, 6, 10, 4), (1, 8, 4, 2)):
        ids = torch.randint(0, V, (B, T), generator=g)
        ids[-1, 0] = ids[0, -1]  # one token in two sequences of the batch
        cases.append(Case(f"random ids (B={B}, T={T}) of V={V} tokens, one shared by two sequences, random G "
                          f"(d_model={d})", (ids, torch.randn(B, T, d, generator=g, dtype=f64), V)))
    return cases


def _one_hots(ids, V, dtype):
    return (ids[..., None] == torch.arange(V)).to(dtype)  # (B, T, V)


def _assigned(ids, G, V):
    grad = torch.zeros(V, G.shape[-1], dtype=G.dtype)
    grad[ids.reshape(-1)] = G.reshape(-1, G.shape[-1])  # a repeated id keeps one of its rows
    return grad


def _averaged(ids, G, V):
    hot = _one_hots(ids, V, G.dtype).reshape(-1, V)
    return (hot.T @ G.reshape(-1, G.shape[-1])) / hot.sum(0).clamp(min=1)[:, None]


def _first_sequence(ids, G, V):
    return _one_hots(ids[0], V, G.dtype).T @ G[0]


check_embedding_grad = Checker(
    name="embedding_grad",
    doc="Check ``fn(ids, G, V) -> (V, d_model)``: the gradient of a loss with respect to the embedding matrix "
        "``E`` ``(V, d_model)`` of a lookup ``E[ids]``, ``ids`` ``(B, T)``, given ``G`` ``(B, T, d_model)``, the "
        "loss's gradient with respect to the looked-up vectors.",
    reference=_embedding_grad,
    cases=_grad_cases(),
    mistakes=(
        Mistake(_assigned, "a token that appears several times receives the sum of the gradients of all its "
                "places: an assignment grad[ids] = G keeps only one of them."),
        Mistake(_averaged, "each place where a token appears adds its own term to the loss, so its gradients add "
                "up: sum them, do not average them."),
        Mistake(_first_sequence, "every sequence of the batch looks up rows of the same E: the gradients of all B "
                "sequences add up in it."),
    ),
    forbidden=("torch.autograd.grad", "torch.autograd.backward", "torch.ops.aten.embedding_dense_backward",
               "torch.ops.aten.embedding_backward"),
)


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


# --- debugging a pre-norm block whose padding leaks ---------------------------------------------------------


class BlockParts:
    """The parts of a pre-norm encoder block: the two norms' scales and shifts ``gamma1``, ``beta1``, ``gamma2``,
    ``beta2`` (tensors of shape ``(d_model,)``) and their ``eps``, and two functions, ``attn(q_in, kv_in, mask)``
    (the attention's output only) and ``ff(x)``. Two are equal when their weights are."""

    def __init__(self, block: EncoderBlock) -> None:
        self._block = block
        self.gamma1, self.beta1 = block.norm1.gamma.detach(), block.norm1.beta.detach()
        self.gamma2, self.beta2 = block.norm2.gamma.detach(), block.norm2.beta.detach()
        self.eps = block.norm1.eps

    def attn(self, q_in: torch.Tensor, kv_in: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        return self._block.attn(q_in, kv_in, mask=mask)[0]

    def ff(self, x: torch.Tensor) -> torch.Tensor:
        return self._block.ff(x)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, BlockParts):
            return NotImplemented
        mine, theirs = self._block.state_dict(), other._block.state_dict()
        return (self.eps == other.eps and mine.keys() == theirs.keys()
                and all(torch.equal(mine[k], theirs[k]) for k in mine))

    __hash__ = None  # equal by value, so not hashable

    def __repr__(self) -> str:
        return f"BlockParts(d_model={self.gamma1.shape[0]}, eps={self.eps:g})"


def _pre_norm_block(x: torch.Tensor, parts: BlockParts, mask: torch.Tensor | None) -> torch.Tensor:
    with torch.no_grad():
        return parts._block(x, mask)


def _block_cases() -> list[Case]:
    cases = []
    for seed, (B, T, d, h, d_ff, lengths, eps, scale) in enumerate((
            (2, 5, 8, 2, 16, (5, 3), 1e-5, 2.0), (1, 4, 12, 3, 24, None, 1e-5, 2.0),
            (3, 6, 8, 4, 32, (6, 6, 2), 1e-5, 2.0), (2, 3, 4, 2, 8, (3, 1), 1e-2, 0.05))):
        torch.manual_seed(1302 + seed)
        block = EncoderBlock(d, h, d_ff, norm_first=True, eps=eps).double()
        with torch.no_grad():
            for p in block.parameters():  # norms and biases away from 1 and 0, so that each counts
                if p.dim() == 1:
                    p.add_(0.3 * torch.randn_like(p))
        x = scale * torch.randn(B, T, d, dtype=torch.float64)
        keep = None if lengths is None else torch.arange(T)[None, :] < torch.tensor(lengths)[:, None]  # (B, T)
        if keep is not None:
            x[~keep] = 5.0 * torch.randn(int((~keep).sum()), d, dtype=torch.float64)  # loud padding
        mask = None if keep is None else keep[:, None, :]  # (B, 1, T): the same keys for every query
        label = (f"a pre-norm block (d_model={d}, {h} heads, d_ff={d_ff}, eps={eps:g}), x ({B}, {T}, {d}) of "
                 f"scale {scale:g}, " + ("no mask" if mask is None else f"padding mask, lengths {lengths}"))
        cases.append(Case(label, (x, BlockParts(block), mask)))
    return cases


def _norm(x, gamma, beta, eps, dim=-1, unbiased=False, eps_outside=False):
    # The mistakes' own layer norm: the package's and PyTorch's are forbidden to answers.
    mean = x.mean(dim=dim, keepdim=True)
    var = x.var(dim=dim, keepdim=True, unbiased=unbiased)
    spread = torch.sqrt(var) + eps if eps_outside else torch.sqrt(var + eps)
    return gamma * (x - mean) / spread + beta


def _block_with(x, block, mask, **norm):
    h = _norm(x, block.gamma1, block.beta1, block.eps, **norm)
    x = x + block.attn(h, h, mask)
    return x + block.ff(_norm(x, block.gamma2, block.beta2, block.eps, **norm))


def _as_given(x, block, mask):
    return _block_with(x, block, mask, dim=1, unbiased=True)


def _over_positions(x, block, mask):
    return _block_with(x, block, mask, dim=1)


def _over_the_sequence(x, block, mask):
    return _block_with(x, block, mask, dim=(1, 2))


def _unbiased(x, block, mask):
    return _block_with(x, block, mask, unbiased=True)


def _eps_outside(x, block, mask):
    return _block_with(x, block, mask, eps_outside=True)


def _post_norm(x, block, mask):
    x = _norm(x + block.attn(x, x, mask), block.gamma1, block.beta1, block.eps)
    return _norm(x + block.ff(x), block.gamma2, block.beta2, block.eps)


def _residual_to_normed(x, block, mask):
    h = _norm(x, block.gamma1, block.beta1, block.eps)
    h = h + block.attn(h, h, mask)
    return h + block.ff(_norm(h, block.gamma2, block.beta2, block.eps))


check_pre_norm_block = Checker(
    name="pre_norm_block",
    doc="Check ``fn(x, block, mask) -> (B, T, d_model)``: the output of a pre-norm encoder block for ``x`` "
        "``(B, T, d_model)`` and a boolean ``mask`` (True where allowed, or None), computed from the block's "
        "parts: the norms' ``block.gamma1``, ``block.beta1``, ``block.gamma2``, ``block.beta2`` and ``block.eps``, "
        "``block.attn(q_in, kv_in, mask)`` and ``block.ff(x)``; the layer norms written by hand.",
    reference=_pre_norm_block,
    cases=_block_cases(),
    mistakes=(
        Mistake(_as_given, "this is the colleague's block as given, both bugs still in it. Compare its norm with "
                "the package's on one small tensor."),
        Mistake(_over_positions, "x is (B, T, d_model): dim=1 is the positions' axis, not the features'. A layer "
                "norm takes each position's statistics over its own d_model features, dim=-1; statistics over the "
                "positions mix in the other tokens, padding included."),
        Mistake(_over_the_sequence, "a layer norm takes each position's statistics over its own features (dim=-1), "
                "not over the whole sequence: those mix in the other tokens, padding included."),
        Mistake(_unbiased, "torch's var divides by d - 1 unless told otherwise; layer norm's variance divides by "
                "d (unbiased=False)."),
        Mistake(_eps_outside, "eps goes under the square root, added to the variance: sqrt(var + eps)."),
        Mistake(_post_norm, "this is a post-norm block, LN(x + sublayer(x)): the norms come after the residual "
                "sums. The block is pre-norm (norm_first=True): each sublayer reads a normalised copy, "
                "x + attn(LN(x)), and the residual stream itself is never normalised."),
        Mistake(_residual_to_normed, "the residual stream carries x itself: add each sublayer's output to the "
                "block's input, not to its normalised copy."),
    ),
    forbidden=(EncoderBlock.forward, layer_norm, LayerNorm.forward, F.layer_norm, torch.layer_norm,
               torch.native_layer_norm, torch.nn.LayerNorm.forward, F.group_norm, torch.group_norm,
               torch.native_group_norm, torch.nn.GroupNorm.forward, F.instance_norm, torch.instance_norm,
               F.batch_norm, torch.batch_norm, torch.native_batch_norm, F.rms_norm, "torch.rms_norm"),
)


# --- modules: a parallel block as in GPT-J, and an encoder that classifies -------------------------------------


class _SelfAttention(ReferenceAttention):
    """The exercises' self-attention submodule: ``forward(x, mask=None)``."""

    def __init__(self, d_model: int, n_heads: int) -> None:
        super().__init__(d_model, n_heads)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        return super().forward(x, None, mask)


class _ParallelBlock(nn.Module):
    """``x + attn(LN(x)) + ff(LN(x))``, one norm for both branches (GPT-J)."""

    def __init__(self, d_model: int, n_heads: int, d_ff: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d_model)
        self.attn = _SelfAttention(d_model, n_heads)
        self.ff = nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model))

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        h = self.norm(x)
        return x + self.attn(h, mask) + self.ff(h)


def _parallel_cases() -> list[ModuleCase]:
    g = torch.Generator().manual_seed(1303)
    f64 = torch.float64
    return [
        ModuleCase("x (2, 5, 8), no mask", (8, 2, 16), (2 * torch.randn(2, 5, 8, generator=g, dtype=f64),)),
        ModuleCase("x (2, 6, 12), the causal mask (6, 6)", (12, 3, 24),
                   (torch.randn(2, 6, 12, generator=g, dtype=f64) + 1, causal_mask(6))),
        ModuleCase("x (3, 5, 8), a padding mask (3, 1, 5) of lengths 5, 2, 4", (8, 4, 32),
                   (torch.randn(3, 5, 8, generator=g, dtype=f64), lengths_mask((5, 2, 4), 5)[:, None, :])),
        ModuleCase("x (1, 4, 16) in float32, no mask", (16, 4, 32), (torch.randn(1, 4, 16, generator=g),)),
    ]


check_parallel_block = ModuleChecker(
    name="ParallelBlock",
    doc="Check the class ``ParallelBlock(d_model, n_heads, d_ff)``: ``forward(x, mask=None)`` returns "
        "``x + attn(norm(x), mask) + ff(norm(x))`` for ``x`` ``(B, T, d_model)`` and a boolean ``mask`` "
        "broadcastable to ``(B, T, T)``, True where allowed; ``norm`` an ``nn.LayerNorm(d_model)``; ``attn`` "
        "multi-head self-attention with ``nn.Linear`` submodules ``w_q``, ``w_k``, ``w_v``, ``w_o`` "
        "``(d_model -> d_model)``; ``ff`` ``nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(), "
        "nn.Linear(d_ff, d_model))``.",
    reference=_ParallelBlock,
    cases=_parallel_cases(),
    prepare=away_from_init,
    allowed=(scaled_dot_product_attention,),
    seed=1303,
)


class _EncoderClassifier(nn.Module):
    """Post-norm encoder blocks, the mean of each sequence's real positions, and a linear head."""

    def __init__(self, d_model: int, n_heads: int, d_ff: int, n_layers: int, n_classes: int) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(EncoderBlock(d_model, n_heads, d_ff) for _ in range(n_layers))
        self.head = nn.Linear(d_model, n_classes)

    def forward(self, x: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x, keep[:, None, :])
        pooled = (x * keep[..., None]).sum(1) / keep.sum(1, keepdim=True)  # (B, d_model): real positions only
        return self.head(pooled)


def _classifier_cases() -> list[ModuleCase]:
    g = torch.Generator().manual_seed(1304)
    f64 = torch.float64
    return [
        ModuleCase("x (2, 5, 8), lengths 5 and 3", (8, 2, 16, 2, 3),
                   (torch.randn(2, 5, 8, generator=g, dtype=f64), lengths_mask((5, 3), 5))),
        ModuleCase("x (3, 6, 12), lengths 6, 1 and 4", (12, 3, 24, 1, 5),
                   (torch.randn(3, 6, 12, generator=g, dtype=f64), lengths_mask((6, 1, 4), 6))),
        ModuleCase("x (2, 4, 8), no padding", (8, 4, 16, 3, 2),
                   (torch.randn(2, 4, 8, generator=g, dtype=f64), lengths_mask((4, 4), 4))),
        ModuleCase("x (2, 5, 16) in float32, lengths 2 and 5", (16, 4, 32, 2, 4),
                   (torch.randn(2, 5, 16, generator=g), lengths_mask((2, 5), 5))),
    ]


check_encoder_classifier = ModuleChecker(
    name="EncoderClassifier",
    doc="Check the class ``EncoderClassifier(d_model, n_heads, d_ff, n_layers, n_classes)``: ``blocks`` an "
        "``nn.ModuleList`` of ``n_layers`` of the package's ``EncoderBlock(d_model, n_heads, d_ff)`` (post-norm), "
        "``head`` an ``nn.Linear(d_model, n_classes)``; ``forward(x, keep)`` for ``x`` ``(B, T, d_model)`` and "
        "``keep`` ``(B, T)`` boolean (True at the real positions, at least one a row) runs the blocks with the "
        "padding mask, averages each sequence's outputs over its real positions and returns the head's logits "
        "``(B, n_classes)``.",
    reference=_EncoderClassifier,
    cases=_classifier_cases(),
    prepare=away_from_init,
    allowed=(EncoderBlock,),
    seed=1304,
)
