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
    return_lse: bool = False,
):
    """``softmax(Q K^T * scale) V`` one ``(block_q, block_k)`` tile at a time, never forming all scores.

    Same signature and meaning as the NumPy twin.

    Shapes: ``Q`` ``(..., T_q, d_k)``, ``K`` ``(..., T_k, d_k)``, ``V`` ``(..., T_k, d_v)``; ``mask``
    broadcastable to ``(..., T_q, T_k)``. Returns ``(..., T_q, d_v)``, and with ``return_lse=True`` also the
    log-sum-exp of each query's scores, ``(..., T_q)``. Written with differentiable operations, so autograd
    can run backward through it (keeping every tile it made). NaN scores give NaN, as in the NumPy twin.
    Refuses arrays that are not tensors and block sizes that are not positive integers. Chapter 20.
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
    lse = torch.full(Q.shape[:-1], float("-inf"), dtype=Q.dtype, device=Q.device) if return_lse else None
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
            allowed = _tile_allowed(mask, causal, q0, q1, k0, k1, offset, Q.device)
            if allowed is not None:
                S = S.masked_fill(~allowed, float("-inf"))
            m_new = torch.maximum(m, S.amax(dim=-1))
            shift = torch.where(torch.isneginf(m_new), torch.zeros_like(m_new), m_new)
            P = torch.exp(S - shift[..., None])
            alpha = _rescale(m, m_new)
            ell = alpha * ell + P.sum(dim=-1)
            acc = alpha[..., None] * acc + P @ V[..., k0:k1, :]
            m = m_new
        safe = torch.where(ell != 0, ell, torch.ones_like(ell))[..., None]  # 0: every key masked
        out[..., q0:q1, :] = torch.where(ell[..., None] != 0, acc / safe, torch.zeros_like(acc))
        if return_lse:
            lse[..., q0:q1] = m + torch.log(ell)  # log 0 = -inf for a query with no allowed key
    return (out, lse) if return_lse else out


def _tile_allowed(mask, causal, q0, q1, k0, k1, offset, device):
    """The mask of one tile, or None when everything is allowed (as the NumPy module's ``_tile_mask``)."""
    allowed = mask[..., q0:q1, k0:k1] if mask is not None else None
    if causal and k1 - 1 > q0 + offset:
        rows = torch.arange(q0, q1, device=device)[:, None]
        tri = torch.arange(k0, k1, device=device)[None, :] <= rows + offset
        allowed = tri if allowed is None else allowed & tri
    return allowed


def flash_attention_backward(
    Q: torch.Tensor,
    K: torch.Tensor,
    V: torch.Tensor,
    O: torch.Tensor,  # noqa: E741 (the output's name in the papers)
    dO: torch.Tensor,
    lse: torch.Tensor,
    mask: torch.Tensor | None = None,
    causal: bool = False,
    block_q: int = 64,
    block_k: int = 64,
    scale: float | None = None,
):
    """Gradients ``(dQ, dK, dV)`` of tiled attention, recomputing each tile of weights from ``lse``.

    Same signature and meaning as the NumPy twin: ``D = rowsum(dO * O)`` replaces ``rowsum(dP * P)``, and
    no ``(T_q, T_k)`` tensor is held. Chapter 20.
    """
    check_qkv_shapes(tuple(Q.shape), tuple(K.shape), tuple(V.shape))
    T_q, T_k = Q.shape[-2], K.shape[-2]
    out_shape = tuple(Q.shape[:-1]) + (V.shape[-1],)
    for name, t in (("O", O), ("dO", dO)):
        if tuple(t.shape) != out_shape:
            raise ValueError(f"{name} must have the shape of the output (..., T_q, d_v) = {shape_str(out_shape)}; "
                             f"got {shape_str(t.shape)}")
    if tuple(lse.shape) != tuple(Q.shape[:-1]):
        raise ValueError(f"lse must have shape (..., T_q) = {shape_str(Q.shape[:-1])}, one number per query; "
                         f"got {shape_str(lse.shape)}")
    if mask is not None:
        mask = as_mask(mask).to(Q.device)
        check_mask_fits(mask, tuple(Q.shape[:-1]) + (T_k,))
        mask = mask.expand(*Q.shape[:-1], T_k)
    schedule = tile_schedule(T_q, T_k, block_q, block_k, causal)
    scale = 1.0 / math.sqrt(Q.shape[-1]) if scale is None else scale
    D = (dO * O).sum(dim=-1)  # (..., T_q): rowsum(dP * P), from O
    empty = torch.isneginf(lse)
    safe_lse = torch.where(empty, torch.zeros_like(lse), lse)
    dQ, dK, dV = torch.zeros_like(Q), torch.zeros_like(K), torch.zeros_like(V)
    for ki, k0 in enumerate(range(0, T_k, block_k)):
        k1 = min(k0 + block_k, T_k)
        Kb, Vb = K[..., k0:k1, :], V[..., k0:k1, :]
        for qi, q0 in enumerate(range(0, T_q, block_q)):
            if not schedule[qi, ki]:
                continue
            q1 = min(q0 + block_q, T_q)
            S = (Q[..., q0:q1, :] * scale) @ Kb.transpose(-1, -2)  # (..., bq, bk)
            allowed = _tile_allowed(mask, causal, q0, q1, k0, k1, T_k - T_q, Q.device)
            if allowed is not None:
                S = S.masked_fill(~allowed, float("-inf"))
            P = torch.exp(S - safe_lse[..., q0:q1, None]).masked_fill(empty[..., q0:q1, None], 0.0)
            dOb = dO[..., q0:q1, :]
            dV[..., k0:k1, :] += P.transpose(-1, -2) @ dOb
            dS = P * (dOb @ Vb.transpose(-1, -2) - D[..., q0:q1, None])
            dQ[..., q0:q1, :] += (dS @ Kb) * scale
            dK[..., k0:k1, :] += (dS.transpose(-1, -2) @ Q[..., q0:q1, :]) * scale
    return dQ, dK, dV
