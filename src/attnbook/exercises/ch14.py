"""Checkers for the coding exercises of chapter 14 (the decoder block)."""

from __future__ import annotations

import torch
from torch import nn

from attnbook.exercises._harness import Case, Checker, Mistake
from attnbook.exercises._modules import ModuleCase, ModuleChecker, ReferenceAttention, away_from_init, lengths_mask
from attnbook.torch import DecoderBlock, EncoderBlock, causal_mask
from attnbook.torch.attention import scaled_dot_product_attention

# --- several documents packed into one row: causal within each document, nothing across them -------------


def _doc_ids(lengths, T, boundary_early=False):
    """``(B, T)`` ids: the document of each position, -1 for the padding after the row's documents. With
    ``boundary_early``, each document's last position is counted in the next one (a sum of lengths taken as the
    last position of a document instead of the first of the next)."""
    ids = torch.full((len(lengths), T), -1, dtype=torch.long)
    for b, row in enumerate(lengths):
        ends = torch.tensor(row).cumsum(0)  # the first position after each document
        pos = torch.arange(int(ends[-1]))
        ids[b, :len(pos)] = (pos[:, None] >= ends[None, :] - int(boundary_early)).sum(-1)
    return ids


def _packed_ids(doc_ids):
    same = doc_ids[:, :, None] == doc_ids[:, None, :]  # (B, T, T): query i and key j in one document
    real_key = (doc_ids >= 0)[:, None, :]  # padding (id -1) is no document
    return causal_mask(doc_ids.shape[1]) & same & real_key


def _packed(lengths, T):
    return _packed_ids(_doc_ids(lengths, T))


def _packed_causal_only(lengths, T):
    return causal_mask(T) & (_doc_ids(lengths, T) >= 0)[:, None, :]


def _packed_no_causal(lengths, T):
    ids = _doc_ids(lengths, T)
    return (ids[:, :, None] == ids[:, None, :]) & (ids >= 0)[:, None, :]


def _packed_pads_see_pads(lengths, T):
    ids = _doc_ids(lengths, T)
    return causal_mask(T) & (ids[:, :, None] == ids[:, None, :])


def _packed_upper(lengths, T):
    return _packed(lengths, T).mT


def _packed_boundary_early(lengths, T):
    return _packed_ids(_doc_ids(lengths, T, boundary_early=True))


check_packed_self_mask = Checker(
    name="packed_self_mask",
    doc="Check ``fn(lengths, T) -> (B, T, T)`` booleans: the decoder's self-attention mask for documents packed "
        "into rows of length ``T``, ``lengths[b]`` the lengths of row b's documents in order, padding after them.",
    reference=_packed,
    cases=[Case(f"lengths={lengths}, T={T}", (lengths, T)) for lengths, T in (
        ([[3]], 3),
        ([[2, 3]], 5),
        ([[1, 2, 1], [5]], 6),
        ([[2, 4, 1]], 8),
        ([[1, 1, 1, 1]], 4),
    )],
    mistakes=(
        Mistake(_packed_causal_only, "a token must not see the end of the previous document packed before it: "
                "keys of another document would change its output."),
        Mistake(_packed_no_causal, "within a document the mask is still causal: key j only where j <= i."),
        Mistake(_packed_pads_see_pads, "padding belongs to no document: no query may attend to a padded key, "
                "not even a padded query."),
        Mistake(_packed_upper, "query i may see keys j <= i: the lower triangle, not the upper."),
        Mistake(_packed_boundary_early, "a document of n tokens covers n positions, from the sum of the lengths "
                "before it to that sum + n - 1: the last of them still belongs to it."),
    ),
    allowed=(causal_mask,),
)


# --- the influence matrix, one output row at a time ------------------------------------------------------

def _seeded(block: torch.nn.Module, seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    for p in block.parameters():  # biases and gains away from 0 and 1, so that nothing vanishes by accident
        p.data.normal_(0.0, 0.3)
    return block.double().eval()


_DECODER = _seeded(DecoderBlock(4, 2, 8, cross_attention=False), 1401)
_ENCODER = _seeded(EncoderBlock(4, 2, 8), 1402)


def running_sum(x):
    """``x.cumsum(1)``: output t is the sum of inputs 0..t."""
    return x.cumsum(1)


def decoder_block(x):
    """A decoder block without cross-attention, random weights, d_model = 4."""
    return _DECODER(x)


def encoder_block(x):
    """An encoder block, random weights, d_model = 4."""
    return _ENCODER(x)


def _influence(f, x, variant=""):
    # The typical mistakes run inside the reference, where the full Jacobian may be asked for.
    J = torch.autograd.functional.jacobian(f, x)[0, :, :, 0]  # (T, d, T, d)
    if variant == "abs_sum":
        return J.abs().sum(dim=(1, 3))
    M = J.pow(2).sum(dim=(1, 3)).sqrt()
    return {"transposed": M.T, "squared": M**2}.get(variant, M)


def _influence_of_row_sums(f, x):
    # one backward pass per output position, of the sum of its features: the norm of the summed rows
    J = torch.autograd.functional.jacobian(f, x)[0, :, :, 0]  # (T, d, T, d)
    return J.sum(dim=1).pow(2).sum(dim=-1).sqrt()


def _influence_grads_accumulated(f, x):
    # one backward pass per output feature, x.grad never zeroed: each pass adds to all the ones before it
    J = torch.autograd.functional.jacobian(f, x)[0, :, :, 0]  # (T, d, T, d)
    T, d = J.shape[:2]
    accumulated = J.reshape(T * d, T, d).cumsum(dim=0).reshape(T, d, T, d)
    return accumulated.pow(2).sum(dim=(1, 3)).sqrt()


def _influence_transposed(f, x):
    return _influence(f, x, "transposed")


def _influence_squared(f, x):
    return _influence(f, x, "squared")


def _influence_abs_sum(f, x):
    return _influence(f, x, "abs_sum")


def _influence_cases() -> list[Case]:
    g = torch.Generator().manual_seed(1403)
    return [
        Case("f = decoder_block, x of shape (1, 5, 4)",
             (decoder_block, torch.randn(1, 5, 4, generator=g, dtype=torch.float64))),
        Case("f = encoder_block, x of shape (1, 4, 4)",
             (encoder_block, torch.randn(1, 4, 4, generator=g, dtype=torch.float64))),
        Case("f = running_sum, x of shape (1, 4, 3)",
             (running_sum, torch.randn(1, 4, 3, generator=g, dtype=torch.float64))),
    ]


check_influence_by_rows = Checker(
    name="influence_by_rows",
    doc="Check ``fn(f, x) -> (T, T)``: ``M[t, s]``, the Frobenius norm of d f(x)[0, t] / d x[0, s] for ``x`` "
        "``(1, T, d)``, from backward passes (full-Jacobian functions are refused).",
    reference=_influence,
    cases=_influence_cases(),
    mistakes=(
        Mistake(_influence_transposed, "row t is the output position, column s the input position."),
        Mistake(_influence_squared, "the Frobenius norm is the square root of the sum of squares."),
        Mistake(_influence_abs_sum, "the Frobenius norm sums squares, not absolute values, and takes the root."),
        Mistake(_influence_of_row_sums, "a backward pass of f(x)[0, t].sum() gives the sum of the d rows of the "
                "Jacobian block, not the rows themselves: the norm of a sum is not the root of the summed squares. "
                "Take one backward pass per output feature j, of f(x)[0, t, j], and add up the squares."),
        Mistake(_influence_grads_accumulated, "backward adds to x.grad: each pass's gradient here includes every "
                "pass before it. Zero x.grad (or take torch.autograd.grad, which returns a fresh one) before each "
                "pass."),
    ),
    atol=1e-9,
    forbidden=("torch.autograd.functional.jacobian", "torch.autograd.functional.hessian", "torch.func.jacrev",
               "torch.func.jacfwd"),
)


# --- modules: a cross-attention block with a source padding mask, and a gated one as in Flamingo ---------------


class _CrossAttentionBlock(nn.Module):
    """``x + attn(LN(x), memory)``: queries from the normalised target, keys and values from the memory, the
    source's padding hidden from every query."""

    def __init__(self, d_model: int, n_heads: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d_model)
        self.attn = ReferenceAttention(d_model, n_heads)

    def forward(self, x: torch.Tensor, memory: torch.Tensor, src_keep: torch.Tensor) -> torch.Tensor:
        return x + self.attn(self.norm(x), memory, src_keep[:, None, :])  # mask (B, 1, S): the same for every query


class _GatedCrossBlock(nn.Module):
    """Flamingo's gated cross-attention block: each sublayer's output scaled by the tanh of a learned gate that
    starts at 0, so that the new block starts as the identity."""

    def __init__(self, d_model: int, n_heads: int, d_ff: int) -> None:
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.attn = ReferenceAttention(d_model, n_heads)
        self.ff = nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model))
        self.attn_gate, self.ff_gate = nn.Parameter(torch.zeros(1)), nn.Parameter(torch.zeros(1))

    def forward(self, x: torch.Tensor, memory: torch.Tensor, src_keep: torch.Tensor) -> torch.Tensor:
        x = x + torch.tanh(self.attn_gate) * self.attn(self.norm1(x), memory, src_keep[:, None, :])
        return x + torch.tanh(self.ff_gate) * self.ff(self.norm2(x))


def _cross_cases(with_ff: bool) -> list[ModuleCase]:
    g = torch.Generator().manual_seed(1405 + with_ff)
    f64 = torch.float64
    cases = []
    for B, T, S, d, h, lengths, dtype in ((2, 4, 6, 8, 2, (6, 3), f64), (3, 5, 3, 12, 3, (3, 1, 2), f64),
                                          (1, 3, 7, 8, 4, (7,), f64), (2, 5, 4, 16, 4, (2, 4), torch.float32)):
        init = (d, h, 2 * d) if with_ff else (d, h)
        x = torch.randn(B, T, d, generator=g, dtype=f64).to(dtype)
        memory = torch.randn(B, S, d, generator=g, dtype=f64).to(dtype)
        keep = lengths_mask(lengths, S)
        memory[~keep] = 5.0  # loud padding: it must not count
        kind = " in float32" if dtype == torch.float32 else ""
        cases.append(ModuleCase(f"x ({B}, {T}, {d}){kind}, memory ({B}, {S}, {d}) of lengths "
                                f"{', '.join(map(str, lengths))}", init, (x, memory, keep)))
    return cases


check_cross_attention_block = ModuleChecker(
    name="CrossAttentionBlock",
    doc="Check the class ``CrossAttentionBlock(d_model, n_heads)``: ``forward(x, memory, src_keep)`` returns "
        "``x + attn(norm(x), memory)`` for ``x`` ``(B, T, d_model)``, ``memory`` ``(B, S, d_model)`` and "
        "``src_keep`` ``(B, S)`` boolean (True at the real source positions), every query attending only to the "
        "real positions of its own source; ``norm`` an ``nn.LayerNorm(d_model)``; ``attn`` multi-head attention "
        "with ``nn.Linear`` submodules ``w_q``, ``w_k``, ``w_v``, ``w_o`` ``(d_model -> d_model)``, queries from "
        "its first input, keys and values from its second.",
    reference=_CrossAttentionBlock,
    cases=_cross_cases(with_ff=False),
    prepare=away_from_init,
    allowed=(scaled_dot_product_attention,),
    seed=1405,
)

check_gated_cross_block = ModuleChecker(
    name="GatedCrossBlock",
    doc="Check the class ``GatedCrossBlock(d_model, n_heads, d_ff)``: ``forward(x, memory, src_keep)`` computes "
        "``x = x + tanh(attn_gate) * attn(norm1(x), memory)``, then returns ``x + tanh(ff_gate) * ff(norm2(x))``, "
        "for ``x`` ``(B, T, d_model)``, ``memory`` ``(B, S, d_model)`` and ``src_keep`` ``(B, S)`` boolean; "
        "``norm1``, ``norm2`` ``nn.LayerNorm(d_model)``; ``attn`` as in ``CrossAttentionBlock``; ``ff`` "
        "``nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model))``; ``attn_gate`` and "
        "``ff_gate`` parameters of shape ``(1,)`` starting at 0.",
    reference=_GatedCrossBlock,
    cases=_cross_cases(with_ff=True),
    prepare=away_from_init,
    allowed=(scaled_dot_product_attention,),
    seed=1406,
)
