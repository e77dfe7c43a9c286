"""The online softmax and tiled, FlashAttention-style attention (chapter 20).

Plain attention forms the ``(T_q, T_k)`` matrix of scores, so its memory grows with ``T^2``. The online
softmax (Milakov and Gimelshein, 2018) computes a softmax's normaliser in one pass over blocks of the
scores, keeping a running maximum ``m`` and a running sum ``ell`` and rescaling ``ell`` whenever ``m`` grows.
Tiled attention (Dao et al., 2022; the loop order of Dao, 2023) applies the same rescaling to the weighted
sum of values, so it never holds more than one ``(block_q, block_k)`` tile of scores at a time. Its backward
pass keeps one number per query, the log-sum-exp of its scores, and recomputes each tile of weights from it.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

from attnbook._validate import check_mask_fits, check_qkv_shapes, shape_str
from attnbook.numpy._arrays import as_float, as_mask


def _check_block(name: str, size: int) -> None:
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 1:
        raise ValueError(f"{name} must be a positive integer (the number of positions in a block); got {size!r}")


def _rescale(m_old: np.ndarray, m_new: np.ndarray) -> np.ndarray:
    """``exp(m_old - m_new)``, the factor that moves sums taken relative to ``m_old`` to ``m_new``.

    While a row has seen only ``-inf`` both are ``-inf``; its sums are 0, and the factor is 0 rather than NaN.
    """
    with np.errstate(invalid="ignore"):
        return np.where(np.isneginf(m_new), 0.0, np.exp(m_old - m_new))


def online_normalizer(x: ArrayLike, block_size: int = 1, history: bool = False):
    """The maximum ``m`` and the sum ``ell = sum_j exp(x_j - m)`` of the last axis, in one pass over blocks.

    Shapes: ``x`` ``(..., n)``; returns ``m`` and ``ell`` of shape ``(...)``. The blocks of ``block_size``
    entries are read once, left to right: after each, ``m`` is the maximum so far and ``ell`` the sum so far
    measured relative to it, so ``softmax(x) = exp(x - m) / ell``. A row of all ``-inf`` gives
    ``m = -inf`` and ``ell = 0``. With ``history=True`` it returns ``(m, ell)`` after every block instead, each
    of shape ``(n_blocks, ...)``. Chapter 20; Milakov and Gimelshein (2018).
    """
    x = as_float("x", x)
    _check_block("block_size", block_size)
    if x.ndim == 0 or x.shape[-1] == 0:
        raise ValueError(f"online_normalizer needs x of shape (..., n) with n >= 1; got shape {shape_str(x.shape)}")
    m = np.full(x.shape[:-1], -np.inf)
    ell = np.zeros(x.shape[:-1])
    ms, ls = [], []
    for start in range(0, x.shape[-1], block_size):
        block = x[..., start:start + block_size]
        m_new = np.maximum(m, block.max(axis=-1))
        shift = np.where(np.isneginf(m_new), 0.0, m_new)[..., None]  # all -inf so far: exp gives zeros
        ell = _rescale(m, m_new) * ell + np.exp(block - shift).sum(axis=-1)
        m = m_new
        if history:
            ms.append(m.copy())
            ls.append(ell.copy())
    return (np.stack(ms), np.stack(ls)) if history else (m, ell)


def online_softmax(x: ArrayLike, block_size: int = 1) -> np.ndarray:
    """Softmax over the last axis from the one-pass normaliser: ``exp(x - m) / ell``.

    Shapes: ``x`` ``(..., n)``; the result has its shape. Equal to ``attnbook.numpy.softmax(x)`` for any
    ``block_size``; a row of all ``-inf`` gives zeros, a row holding NaN or ``+inf`` gives NaN, as softmax
    does. Chapter 20.
    """
    x = as_float("x", x)
    m, ell = online_normalizer(x, block_size)
    shift = np.where(np.isneginf(m), 0.0, m)[..., None]
    e = np.exp(x - shift)
    # ell is 0 only for a row of all -inf (zeros out); a NaN ell stays NaN rather than turning into zeros.
    return np.divide(e, ell[..., None], out=np.zeros_like(e), where=ell[..., None] != 0)


def tile_schedule(T_q: int, T_k: int, block_q: int, block_k: int, causal: bool = False) -> np.ndarray:
    """Which ``(query block, key block)`` tiles tiled attention computes: ``(n_q_blocks, n_k_blocks)`` bools.

    Without ``causal`` every tile is computed. With it, query ``i`` sees keys ``j <= i + T_k - T_q``
    (the convention of ``causal_mask``), and a tile whose first key lies beyond the last query's horizon is
    entirely masked: it is skipped. Chapter 20.
    """
    for name, size in (("T_q", T_q), ("T_k", T_k), ("block_q", block_q), ("block_k", block_k)):
        _check_block(name, size)
    q_last = np.minimum(np.arange(0, T_q, block_q) + block_q, T_q) - 1  # last query of each block
    k_first = np.arange(0, T_k, block_k)  # first key of each block
    if not causal:
        return np.ones((len(q_last), len(k_first)), dtype=bool)
    return k_first[None, :] <= q_last[:, None] + (T_k - T_q)


def tiled_attention(
    Q: ArrayLike,
    K: ArrayLike,
    V: ArrayLike,
    mask: ArrayLike | None = None,
    causal: bool = False,
    block_q: int = 64,
    block_k: int = 64,
    scale: float | None = None,
    return_lse: bool = False,
):
    """``softmax(Q K^T * scale) V`` one ``(block_q, block_k)`` tile at a time, never forming all scores.

    Shapes: ``Q`` ``(..., T_q, d_k)``, ``K`` ``(..., T_k, d_k)``, ``V`` ``(..., T_k, d_v)``; ``mask``
    boolean, broadcastable to ``(..., T_q, T_k)``, True where allowed; ``causal=True`` adds the causal mask
    and skips the tiles it masks entirely (``tile_schedule``). Returns the output ``(..., T_q, d_v)``, equal
    to ``scaled_dot_product_attention``'s to rounding; a query with no allowed key gets a zero output.
    Extra memory: one tile of scores and, per query block, its running max, sum and output. NaN in a
    query's scores (from ``Q``, ``K`` or a NaN ``scale``) gives NaN in its output, as in plain attention.
    Refuses block sizes that are not positive integers. With
    ``return_lse=True`` it returns ``(output, lse)``, ``lse`` ``(..., T_q)`` the log-sum-exp
    ``m + log(ell)`` of each query's scaled scores (``-inf`` for a query with no allowed key): all that
    ``flash_attention_backward`` needs to recompute the weights. Chapter 20; Dao et al. (2022),
    algorithm 1, with the loop order of Dao (2023): query blocks outside, one division at the end.
    """
    Q, K, V = as_float("Q", Q), as_float("K", K), as_float("V", V)
    check_qkv_shapes(Q.shape, K.shape, V.shape)
    T_q, T_k = Q.shape[-2], K.shape[-2]
    if mask is not None:
        mask = as_mask(mask)
        check_mask_fits(mask.shape, Q.shape[:-1] + (T_k,))
        mask = np.broadcast_to(mask, Q.shape[:-1] + (T_k,))  # a view: slicing a tile now always works
    schedule = tile_schedule(T_q, T_k, block_q, block_k, causal)
    scale = 1.0 / math.sqrt(Q.shape[-1]) if scale is None else scale
    dtype = np.result_type(Q, K, V)
    out = np.zeros(Q.shape[:-1] + (V.shape[-1],), dtype=dtype)  # (..., T_q, d_v)
    lse = np.full(Q.shape[:-1], -np.inf, dtype=dtype) if return_lse else None  # (..., T_q)
    for qi, q0 in enumerate(range(0, T_q, block_q)):
        q1 = min(q0 + block_q, T_q)
        Qb = Q[..., q0:q1, :] * scale  # (..., bq, d_k)
        m = np.full(Qb.shape[:-1], -np.inf, dtype=dtype)  # running max of each query's scores
        ell = np.zeros(Qb.shape[:-1], dtype=dtype)  # running sum of exp(score - m)
        acc = np.zeros(Qb.shape[:-1] + (V.shape[-1],), dtype=dtype)  # running sum of exp(score - m) v
        for ki, k0 in enumerate(range(0, T_k, block_k)):
            if not schedule[qi, ki]:
                continue  # every pair in this tile is in the future: nothing to add
            k1 = min(k0 + block_k, T_k)
            S = Qb @ np.swapaxes(K[..., k0:k1, :], -1, -2)  # (..., bq, bk): one tile of scores
            allowed = _tile_mask(mask, causal, q0, q1, k0, k1, T_k - T_q)
            if allowed is not None:
                S = np.where(allowed, S, -np.inf)
            m_new = np.maximum(m, S.max(axis=-1))
            shift = np.where(np.isneginf(m_new), 0.0, m_new)
            P = np.exp(S - shift[..., None])  # (..., bq, bk), 0 where masked
            alpha = _rescale(m, m_new)  # how much the old sums shrink now that the max grew
            ell = alpha * ell + P.sum(axis=-1)
            acc = alpha[..., None] * acc + P @ V[..., k0:k1, :]
            m = m_new
            del S, P  # free this tile before the next is made: the workspace stays one tile, whatever T is
        # ell is 0 only where every key is masked (a zero output); NaN stays NaN.
        out[..., q0:q1, :] = np.divide(acc, ell[..., None], out=np.zeros_like(acc), where=ell[..., None] != 0)
        if return_lse:
            with np.errstate(divide="ignore"):  # ell = 0 (no allowed key): log gives -inf, as it should
                lse[..., q0:q1] = m + np.log(ell)
    return (out, lse) if return_lse else out


def flash_attention_backward(
    Q: ArrayLike,
    K: ArrayLike,
    V: ArrayLike,
    O: ArrayLike,  # noqa: E741 (the output's name in the papers)
    dO: ArrayLike,
    lse: ArrayLike,
    mask: ArrayLike | None = None,
    causal: bool = False,
    block_q: int = 64,
    block_k: int = 64,
    scale: float | None = None,
):
    """Gradients ``(dQ, dK, dV)`` of tiled attention, recomputing each tile of weights from ``lse``.

    Shapes: ``Q``, ``K``, ``V``, ``mask`` and ``causal`` as in ``tiled_attention``; ``O`` ``(..., T_q, d_v)``
    its output, ``dO`` the gradient of the loss with respect to it, ``lse`` ``(..., T_q)`` the log-sum-exp
    that ``tiled_attention(..., return_lse=True)`` returns. Each tile's weights are ``exp(S - lse)``;
    chapter 19's ``rowsum(dP * P)`` is ``D = rowsum(dO * O)``, computed once from ``O``. So no
    ``(T_q, T_k)`` array is ever held: the extra memory is ``D``, one tile's ``S``, ``P``, ``dP`` and
    ``dS``, and the running ``dK`` and ``dV`` of one block of keys. Returns arrays of the shapes of ``Q``,
    ``K``, ``V``, equal to chapter 19's ``attention_backward`` up to rounding. Chapter 20; Dao et al.
    (2022), algorithm 4, in the loop order of Dao (2023), algorithm 2: key blocks outside.
    """
    Q, K, V, O, dO = (as_float(n, a) for n, a in (("Q", Q), ("K", K), ("V", V), ("O", O), ("dO", dO)))  # noqa: E741
    lse = as_float("lse", lse)
    check_qkv_shapes(Q.shape, K.shape, V.shape)
    T_q, T_k = Q.shape[-2], K.shape[-2]
    out_shape = Q.shape[:-1] + (V.shape[-1],)
    for name, arr in (("O", O), ("dO", dO)):
        if arr.shape != out_shape:
            raise ValueError(f"{name} must have the shape of the output (..., T_q, d_v) = {shape_str(out_shape)}; "
                             f"got {shape_str(arr.shape)}")
    if lse.shape != Q.shape[:-1]:
        raise ValueError(f"lse must have shape (..., T_q) = {shape_str(Q.shape[:-1])}, one number per query; "
                         f"got {shape_str(lse.shape)}")
    if mask is not None:
        mask = as_mask(mask)
        check_mask_fits(mask.shape, Q.shape[:-1] + (T_k,))
        mask = np.broadcast_to(mask, Q.shape[:-1] + (T_k,))
    schedule = tile_schedule(T_q, T_k, block_q, block_k, causal)
    scale = 1.0 / math.sqrt(Q.shape[-1]) if scale is None else scale
    dtype = np.result_type(Q, K, V, dO)
    D = (dO * O).sum(axis=-1)  # (..., T_q): rowsum(dP * P) of chapter 19, from O instead of P
    empty = np.isneginf(lse)  # queries with no allowed key (lse = -inf): all their weights are 0
    safe_lse, any_empty = np.where(empty, 0.0, lse), bool(empty.any())
    dQ = np.zeros(Q.shape, dtype=dtype)
    dK, dV = np.zeros(K.shape, dtype=dtype), np.zeros(V.shape, dtype=dtype)
    for ki, k0 in enumerate(range(0, T_k, block_k)):
        k1 = min(k0 + block_k, T_k)
        Kb, Vb = K[..., k0:k1, :], V[..., k0:k1, :]  # (..., bk, d_k), (..., bk, d_v)
        dKb, dVb = np.zeros(Kb.shape, dtype=dtype), np.zeros(Vb.shape, dtype=dtype)
        for qi, q0 in enumerate(range(0, T_q, block_q)):
            if not schedule[qi, ki]:
                continue  # every weight in this tile is 0, and so is every gradient through it
            q1 = min(q0 + block_q, T_q)
            S = (Q[..., q0:q1, :] * scale) @ np.swapaxes(Kb, -1, -2)  # (..., bq, bk), as in the forward
            allowed = _tile_mask(mask, causal, q0, q1, k0, k1, T_k - T_q)
            if allowed is not None:
                S = np.where(allowed, S, -np.inf)
            P = np.exp(S - safe_lse[..., q0:q1, None])  # this tile of the weights, 0 where masked
            if any_empty:
                P = np.where(empty[..., q0:q1, None], 0.0, P)
            dOb = dO[..., q0:q1, :]
            dVb += np.swapaxes(P, -1, -2) @ dOb  # (..., bk, d_v)
            dP = dOb @ np.swapaxes(Vb, -1, -2)  # (..., bq, bk)
            dS = P * (dP - D[..., q0:q1, None])  # the softmax's backward, with D in place of rowsum(dP * P)
            dQ[..., q0:q1, :] += (dS @ Kb) * scale
            dKb += (np.swapaxes(dS, -1, -2) @ Q[..., q0:q1, :]) * scale
            del S, P, dP, dS  # one tile at a time
        dK[..., k0:k1, :], dV[..., k0:k1, :] = dKb, dVb
    return dQ, dK, dV


def _tile_mask(mask: np.ndarray | None, causal: bool, q0: int, q1: int, k0: int, k1: int,
               offset: int) -> np.ndarray | None:
    """The mask of one tile, ``(..., bq, bk)`` or ``(bq, bk)``, or None when everything is allowed."""
    allowed = None
    if mask is not None:
        allowed = mask[..., q0:q1, k0:k1]
    if causal and k1 - 1 > q0 + offset:  # the tile reaches past the first query's horizon
        rows, cols = np.arange(q0, q1)[:, None], np.arange(k0, k1)[None, :]
        tri = cols <= rows + offset
        allowed = tri if allowed is None else allowed & tri
    return allowed
