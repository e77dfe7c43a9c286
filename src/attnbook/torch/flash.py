"""The online softmax and tiled attention in PyTorch (chapter 20), twins of ``attnbook.numpy.flash``.

Same names, signatures and meaning; the tile schedule is the NumPy module's, since it is index
arithmetic only.
"""

from __future__ import annotations

import math

import torch

from attnbook._validate import check_qkv_shapes, shape_str
from attnbook.numpy.flash import _check_block, tile_schedule
from attnbook.torch._checks import as_mask, check_mask_fits, require_tensor


def _rescale(m_old: torch.Tensor, m_new: torch.Tensor) -> torch.Tensor:
    """``exp(m_old - m_new)``, or 0 for a row that has seen only ``-inf`` (instead of NaN)."""
    safe_new = torch.where(torch.isneginf(m_new), torch.zeros_like(m_new), m_new)
    return torch.where(torch.isneginf(m_new), torch.zeros_like(m_new), torch.exp(m_old - safe_new))


def online_normalizer(x: torch.Tensor, block_size: int = 1, history: bool = False):
    """The maximum ``m`` and the sum ``ell = sum_j exp(x_j - m)`` of the last axis, in one pass over blocks.

    Shapes: ``x`` ``(..., n)``; returns ``m`` and ``ell`` of shape ``(...)``; with ``history=True``, their
    values after every block, ``(n_blocks, ...)``. Same meaning as the NumPy twin. Chapter 20.
    """
    require_tensor("x", x)
    _check_block("block_size", block_size)
    if x.dim() == 0 or x.shape[-1] == 0:
        raise ValueError(f"online_normalizer needs x of shape (..., n) with n >= 1; got shape {shape_str(x.shape)}")
    m = torch.full(x.shape[:-1], float("-inf"), dtype=x.dtype, device=x.device)
    ell = torch.zeros(x.shape[:-1], dtype=x.dtype, device=x.device)
    ms, ls = [], []
    for start in range(0, x.shape[-1], block_size):
        block = x[..., start:start + block_size]
        m_new = torch.maximum(m, block.amax(dim=-1))
        shift = torch.where(torch.isneginf(m_new), torch.zeros_like(m_new), m_new)[..., None]
        ell = _rescale(m, m_new) * ell + torch.exp(block - shift).sum(dim=-1)
        m = m_new
        if history:
            ms.append(m.clone())
            ls.append(ell.clone())
    return (torch.stack(ms), torch.stack(ls)) if history else (m, ell)


def online_softmax(x: torch.Tensor, block_size: int = 1) -> torch.Tensor:
    """Softmax over the last axis from the one-pass normaliser: ``exp(x - m) / ell``.

    Same meaning as the NumPy twin: a row of all ``-inf`` gives zeros, a row holding NaN or ``+inf`` NaN."""
    m, ell = online_normalizer(x, block_size)
    shift = torch.where(torch.isneginf(m), torch.zeros_like(m), m)[..., None]
    e = torch.exp(x - shift)
    # ell is 0 only for a row of all -inf (zeros out); a NaN ell stays NaN rather than turning into zeros.
    return torch.where(ell[..., None] != 0, e / torch.where(ell != 0, ell, torch.ones_like(ell))[..., None],
                       torch.zeros_like(e))


def tiled_attention(
    Q: torch.Tensor,
    K: torch.Tensor,
    V: torch.Tensor,
    mask: torch.Tensor | None = None,
    causal: bool = False,
    block_q: int = 64,
    block_k: int = 64,
    scale: float | None = None,
) -> torch.Tensor:
    """``softmax(Q K^T * scale) V`` one ``(block_q, block_k)`` tile at a time, never forming all scores.

    Same signature and meaning as the NumPy twin.

    Shapes: ``Q`` ``(..., T_q, d_k)``, ``K`` ``(..., T_k, d_k)``, ``V`` ``(..., T_k, d_v)``; ``mask``
    broadcastable to ``(..., T_q, T_k)``. Returns ``(..., T_q, d_v)``; NaN scores give NaN, as in the NumPy
    twin. Refuses arrays that are not tensors and block sizes that are not positive integers. Chapter 20.
    """
    for name, t in (("Q", Q), ("K", K), ("V", V)):
        require_tensor(name, t)
    check_qkv_shapes(tuple(Q.shape), tuple(K.shape), tuple(V.shape))
    T_q, T_k = Q.shape[-2], K.shape[-2]
    if mask is not None:
        mask = as_mask(mask).to(Q.device)
        check_mask_fits(mask, tuple(Q.shape[:-1]) + (T_k,))
        mask = mask.expand(*Q.shape[:-1], T_k)  # a view: slicing a tile now always works
    schedule = tile_schedule(T_q, T_k, block_q, block_k, causal)
    scale = 1.0 / math.sqrt(Q.shape[-1]) if scale is None else scale
    out = torch.zeros(*Q.shape[:-1], V.shape[-1], dtype=Q.dtype, device=Q.device)
    offset = T_k - T_q
    for qi, q0 in enumerate(range(0, T_q, block_q)):
        q1 = min(q0 + block_q, T_q)
        Qb = Q[..., q0:q1, :] * scale
        m = torch.full(Qb.shape[:-1], float("-inf"), dtype=Q.dtype, device=Q.device)
        ell = torch.zeros(Qb.shape[:-1], dtype=Q.dtype, device=Q.device)
        acc = torch.zeros(*Qb.shape[:-1], V.shape[-1], dtype=Q.dtype, device=Q.device)
        for ki, k0 in enumerate(range(0, T_k, block_k)):
            if not schedule[qi, ki]:
                continue  # a tile entirely in the future
            k1 = min(k0 + block_k, T_k)
            S = Qb @ K[..., k0:k1, :].transpose(-1, -2)  # (..., bq, bk)
            allowed = mask[..., q0:q1, k0:k1] if mask is not None else None
            if causal and k1 - 1 > q0 + offset:
                rows = torch.arange(q0, q1, device=Q.device)[:, None]
                tri = torch.arange(k0, k1, device=Q.device)[None, :] <= rows + offset
                allowed = tri if allowed is None else allowed & tri
            if allowed is not None:
                S = S.masked_fill(~allowed, float("-inf"))
            m_new = torch.maximum(m, S.amax(dim=-1))
            shift = torch.where(torch.isneginf(m_new), torch.zeros_like(m_new), m_new)
            P = torch.exp(S - shift[..., None])
            alpha = _rescale(m, m_new)
            ell = alpha * ell + P.sum(dim=-1)
            acc = alpha[..., None] * acc + P @ V[..., k0:k1, :]
            m = m_new
        safe = torch.where(ell != 0, ell, torch.ones_like(ell))[..., None]  # 0 only where every key is masked
        out[..., q0:q1, :] = torch.where(ell[..., None] != 0, acc / safe, torch.zeros_like(acc))
    return out
