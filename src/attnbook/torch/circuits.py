"""Reading heads as circuits: previous-token and induction scores, and Q-, K-, V-composition (chapter 28).

The scores of a head's attention are averages of the weight its queries put on one chosen key each
(``attnbook.torch.inspect.weight_on``). The composition scores follow Elhage et al. (2021), who write the
column convention: a head's ``W_QK = W_Q^T W_K`` gives the score ``x_dst^T W_QK x_src``, and its
``W_OV = W_O W_V`` moves ``x_src`` to ``W_OV x_src``. In the package's row convention (weights ``(in, out)``,
``x W``) the same head has ``QK = W_Q^h W_K^{h T}``, the very matrix ``W_QK`` (the score is
``x_dst QK x_src^T``), and ``OV = W_V^h W_O^h``, the transpose of ``W_OV`` (a source row ``y`` writes ``y OV``).
Biases are left out, as in the paper; the ``1 / sqrt(d_head)`` of the scores is left out too (every
composition score is unchanged by scaling a matrix).
"""

from __future__ import annotations

import math

import torch

from attnbook.torch.inspect import offset_score, weight_on
from attnbook.torch.multihead import MultiHeadAttention

KINDS = ("q", "k", "v")


def induction_targets(ids: torch.Tensor) -> torch.Tensor:
    """Where an induction head at each position looks: for ``ids`` ``(T,)`` or ``(B, T)``, the position
    ``p + 1`` after the most recent earlier occurrence ``p < t`` of the token ``ids[t]``, or -1 where the
    token has not occurred before. Same shape as ``ids``. Chapter 28."""
    if ids.dim() not in (1, 2) or ids.dtype.is_floating_point or ids.dtype == torch.bool:
        raise ValueError(f"ids must be integer ids of shape (T,) or (B, T); got {ids.dtype} of shape "
                         f"{tuple(ids.shape)}")
    T = ids.shape[-1]
    same = ids[..., :, None] == ids[..., None, :]  # (..., T, T): [t, p] where the tokens match
    earlier = torch.ones(T, T, dtype=torch.bool, device=ids.device).tril(-1)  # p < t
    positions = torch.arange(T, device=ids.device)
    last = torch.where(same & earlier, positions, -1).max(dim=-1).values  # (..., T): latest match, or -1
    return torch.where(last >= 0, last + 1, -1)


def induction_score(weights: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """The weight each head puts on the induction target (``induction_targets``), averaged over the queries
    that have one: ``weights`` ``(B, h, T, T)`` and ``ids`` ``(B, T)`` to ``(B, h)``. 1 for a head that
    always looks exactly there. Chapter 28."""
    if weights.dim() != 4 or ids.shape != (weights.shape[0], weights.shape[-2]):
        raise ValueError(f"weights must be (B, h, T, T) and ids (B, T) of the same B and T; got "
                         f"{tuple(weights.shape)} and {tuple(ids.shape)}")
    return weight_on(weights, induction_targets(ids))


def previous_token_score(weights: torch.Tensor) -> torch.Tensor:
    """The weight each query ``t >= 1`` puts on key ``t - 1``, averaged: ``(..., h, T, T)`` to ``(..., h)``.
    ``offset_score(weights, -1)`` (chapter 18) under the name this chapter uses. Chapter 28."""
    return offset_score(weights, -1)


def _head_slice(attention: MultiHeadAttention, head: int) -> slice:
    if not 0 <= head < attention.n_heads:
        raise ValueError(f"head must lie in [0, {attention.n_heads - 1}]; got {head}")
    if attention.n_kv_heads != attention.n_heads:
        raise ValueError("composition scores need one key and value head per query head (n_kv_heads = n_heads)")
    d_head = attention.d_model // attention.n_heads
    return slice(head * d_head, (head + 1) * d_head)


def qk_matrix(attention: MultiHeadAttention, head: int) -> torch.Tensor:
    """``QK = W_Q^h W_K^{h T}``, ``(d_model, d_model)``: the score of head ``head`` is ``x_dst QK x_src^T``
    (before the ``1 / sqrt(d_head)``, without biases, and without the rotation that rotary positions apply to
    queries and keys, so for a rotary model it is the score at offset 0). Equal to Elhage et al.'s ``W_QK``.
    Chapter 28."""
    s = _head_slice(attention, head)  # the head's d_head columns of W_q, W_k and W_v, and rows of W_o
    return attention.W_q[:, s] @ attention.W_k[:, s].T  # (d_model, d_head) @ (d_head, d_model)


def ov_matrix(attention: MultiHeadAttention, head: int) -> torch.Tensor:
    """``OV = W_V^h W_O^h``, ``(d_model, d_model)``: a source row ``y`` attended with weight 1 writes ``y OV``
    to the residual stream (without biases). The transpose of Elhage et al.'s ``W_OV``. Chapter 28."""
    s = _head_slice(attention, head)
    return attention.W_v[:, s] @ attention.W_o[s, :]  # (d_model, d_head) @ (d_head, d_model)


def composition_score(left: torch.Tensor, right: torch.Tensor) -> torch.Tensor:
    """``||left right||_F / (||left||_F ||right||_F)`` for ``left`` ``(m, n)`` and ``right`` ``(n, p)``: a scalar
    between 0 and 1, unchanged by scaling either matrix. Chapter 28."""
    _check_product(left, right)
    norm = torch.linalg.matrix_norm  # the Frobenius norm, the default for a matrix
    return norm(left @ right) / (norm(left) * norm(right))


def _check_product(left: torch.Tensor, right: torch.Tensor) -> None:
    if left.dim() != 2 or right.dim() != 2 or left.shape[1] != right.shape[0]:
        raise ValueError(f"need two matrices that multiply, (m, n) and (n, p); got {tuple(left.shape)} and "
                         f"{tuple(right.shape)}")


def k_composition(qk2: torch.Tensor, ov1: torch.Tensor) -> torch.Tensor:
    """How much the keys of a later head (``qk2``, its ``QK``) read what an earlier head writes (``ov1``, its
    ``OV``), both ``(d_model, d_model)``: Elhage et al.'s ``||W_QK W_OV||_F / (||W_QK||_F ||W_OV||_F)``, in the
    row convention ``||QK OV^T|| / (||QK|| ||OV||)``. A scalar. Chapter 28."""
    return composition_score(qk2, ov1.T)


def q_composition(qk2: torch.Tensor, ov1: torch.Tensor) -> torch.Tensor:
    """The same for the queries: ``||W_QK^T W_OV||_F / (...)``, in the row convention ``||QK^T OV^T|| / (...)``."""
    return composition_score(qk2.T, ov1.T)


def v_composition(ov2: torch.Tensor, ov1: torch.Tensor) -> torch.Tensor:
    """The same for the values: ``||W_OV^2 W_OV^1||_F / (...)``, in the row convention ``||OV^1 OV^2|| / (...)``."""
    return composition_score(ov1, ov2)


def composition_scores(earlier: MultiHeadAttention, later: MultiHeadAttention, kind: str = "k") -> torch.Tensor:
    """``(h_later, h_earlier)``: entry ``[j, i]`` is the ``kind`` (``"q"``, ``"k"`` or ``"v"``) composition of
    head ``j`` of the later layer with head ``i`` of the earlier one. Chapter 28."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}; got {kind!r}")
    with torch.no_grad():
        return torch.stack([torch.stack([_compose(kind, earlier, i, later, j) for i in range(earlier.n_heads)])
                            for j in range(later.n_heads)])


def _compose(kind: str, earlier: MultiHeadAttention, i: int, later: MultiHeadAttention, j: int) -> torch.Tensor:
    ov1 = ov_matrix(earlier, i)
    if kind == "v":
        return v_composition(ov_matrix(later, j), ov1)
    return (k_composition if kind == "k" else q_composition)(qk_matrix(later, j), ov1)


def random_composition(d_model: int, d_head: int, kind: str = "k", n: int = 1000,
                       generator: torch.Generator | None = None) -> torch.Tensor:
    """``(n,)`` composition scores of random heads of the same shapes: every factor (``W_Q``, ``W_K``,
    ``W_V`` ``(d_model, d_head)``, ``W_O`` ``(d_head, d_model)``) drawn with independent standard normal
    entries, so ``QK`` and ``OV`` have the rank ``d_head`` of a real head's. The baseline a trained pair is
    compared with. Chapter 28."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}; got {kind!r}")

    def draw(*shape: int) -> torch.Tensor:
        return torch.randn(n, *shape, generator=generator, dtype=torch.float64)

    ov1 = draw(d_model, d_head) @ draw(d_head, d_model)  # (n, d_model, d_model)
    second = draw(d_model, d_head) @ draw(d_model, d_head).transpose(1, 2)  # QK, or OV's shape for "v"
    left, right = {"k": (second, ov1.transpose(1, 2)), "q": (second.transpose(1, 2), ov1.transpose(1, 2)),
                   "v": (ov1, second)}[kind]
    return torch.stack([composition_score(a, b) for a, b in zip(left, right, strict=True)]).float()


# Token-level circuits (Elhage et al. 2021): the matrices above multiplied out between the embedding and the
# unembedding, one row and one column for each token of the vocabulary.


def full_ov_circuit(model: torch.nn.Module, layer: int, head: int) -> torch.Tensor:
    """``(V, V)``: entry ``[s, o]`` is the logit of token ``o`` that head ``head`` of layer ``layer`` of an
    ``AttnOnlyTransformer`` adds at a position whose query attends with weight 1 to a position holding token ``s``
    (its embedding alone): ``E OV C diag(gamma) W_u``, where ``C`` centres a row as the final norm does. The
    norm's division by the scale of the whole stream is left out (one positive factor per position, which changes
    no row's ranking), and so is its shift ``beta`` (the same logits whatever the head writes). Elhage et al.'s
    ``W_U W_OV W_E`` in the row convention. A head that copies has the largest entry of most rows on the
    diagonal (``diagonal_top_share``) and mostly positive eigenvalues (``eigenvalue_signs``). Chapter 28."""
    attention = model.layers[layer]
    with torch.no_grad():
        written = model.tok.E @ ov_matrix(attention, head)  # (V, d_model): what the head writes for each token
        if model.norm is not None:
            written = (written - written.mean(-1, keepdim=True)) * model.norm.gamma  # C diag(gamma)
        return written @ model.unembed.W_u  # (V, V)


def k_circuit(model: torch.nn.Module, earlier: tuple[int, int], later: tuple[int, int], offset: int) -> torch.Tensor:
    """``(V, V)``: entry ``[a, b]`` is the score (before the softmax, with its ``1 / sqrt(d_head)``) that head
    ``later = (layer, head)`` of an ``AttnOnlyTransformer``, at a query holding token ``a``, gives a key ``offset``
    positions back through what head ``earlier`` wrote there when it attended with weight 1 to a position holding
    token ``b``: ``(E W_Q) R(offset) (E OV W_K)^T``, with ``R`` the rotary rotation of the offset (none for
    learned positions, where only the tokens count). The token-level K-composition of Elhage et al.: a pair that
    implements induction through a previous-token head has its largest entry of most rows on the diagonal (the key
    whose previous token is the query's token). Chapter 28."""
    _check_k_circuit(earlier, later, offset)
    first, second = model.layers[earlier[0]], model.layers[later[0]]
    s = _head_slice(second, later[1])
    with torch.no_grad():
        E = model.tok.E  # (V, d_model)
        q = E @ second.W_q[:, s]  # (V, d_head): each token's query
        k = (E @ ov_matrix(first, earlier[1])) @ second.W_k[:, s]  # (V, d_head): the key of each token moved there
        if second.rope is not None:
            q = second.rope(q.unsqueeze(-2), offset).squeeze(-2)  # rotated as at position offset; the key at 0
        return q @ k.T / math.sqrt(q.shape[-1])


def _check_k_circuit(earlier: tuple[int, int], later: tuple[int, int], offset: int) -> None:
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise ValueError(f"offset must be an integer >= 0 (the query sits offset positions after the key); got "
                         f"{offset!r}")
    if not earlier[0] < later[0]:
        raise ValueError(f"the earlier head must sit in an earlier layer than the later one; got layers "
                         f"{earlier[0]} and {later[0]}")


def diagonal_top_share(matrix: torch.Tensor) -> float:
    """The share of the rows of a square ``matrix`` whose largest entry lies on the diagonal. Chapter 28."""
    if matrix.dim() != 2 or matrix.shape[0] != matrix.shape[1]:
        raise ValueError(f"need a square matrix; got shape {tuple(matrix.shape)}")
    return float((matrix.argmax(-1) == torch.arange(matrix.shape[0], device=matrix.device)).float().mean())


def eigenvalue_signs(matrix: torch.Tensor) -> tuple[float, float]:
    """``(share, score)`` for a square ``matrix``: the share of its eigenvalues with a positive real part, and
    Elhage et al.'s summary ``sum(lambda) / sum(|lambda|)`` (real, between -1 and 1; 1 when every eigenvalue is
    positive, as for a matrix that copies every token). Chapter 28."""
    if matrix.dim() != 2 or matrix.shape[0] != matrix.shape[1]:
        raise ValueError(f"need a square matrix; got shape {tuple(matrix.shape)}")
    eig = torch.linalg.eigvals(matrix.double())
    return float((eig.real > 0).double().mean()), float(eig.sum().real / eig.abs().sum())
