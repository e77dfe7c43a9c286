"""Boolean attention masks in PyTorch, True where attention is allowed (chapter 8), twins of
``attnbook.numpy.masks``.

Shapes follow the scores they mask: ``(..., T_q, T_k)``. A padding mask has shape ``(B, 1, T_k)`` so
that it broadcasts over the queries. Masks are built on the CPU; move them with ``.to(device)``.
"""

from __future__ import annotations

import torch

from attnbook._validate import shape_str
from attnbook.torch._checks import require_size


def causal_mask(T_q: int, T_k: int | None = None) -> torch.Tensor:
    """Query ``i`` may attend to keys ``j <= i``: the past and itself, never the future.

    Shapes: returns ``(T_q, T_k)`` (``T_k`` defaults to ``T_q``). When ``T_k > T_q`` the queries are
    taken to be the last ``T_q`` positions, so query ``i`` sees keys ``j <= i + T_k - T_q``. Refuses sizes
    that are not integers, at least 1.
    """
    T_k = T_q if T_k is None else T_k
    require_size("T_q", T_q)
    require_size("T_k", T_k)
    if T_q < 1 or T_k < 1:
        raise ValueError(f"causal_mask needs T_q >= 1 and T_k >= 1; got T_q={T_q}, T_k={T_k}")
    return torch.ones(T_q, T_k, dtype=torch.bool).tril(T_k - T_q)


def padding_mask(lengths: torch.Tensor, T: int) -> torch.Tensor:
    """Keys at positions ``>= lengths[b]`` are padding and may not be attended to.

    Shapes: ``lengths`` ``(B,)`` of integers in ``[0, T]``; returns ``(B, 1, T)``, which broadcasts
    against scores of shape ``(B, T_q, T)``. Refuses a ``T`` that is not an integer, 0 or more.
    """
    require_size("T", T, 0)
    lengths = torch.as_tensor(lengths)
    if lengths.dim() != 1 or lengths.dtype.is_floating_point or lengths.dtype.is_complex or lengths.dtype == torch.bool:
        raise ValueError(f"lengths must be a 1-D array of integers; got shape {shape_str(lengths.shape)} "
                         f"and dtype {lengths.dtype}")
    if bool((lengths < 0).any()) or bool((lengths > T).any()):
        raise ValueError(f"every length must lie in [0, T={T}]; got {lengths.tolist()}")
    return (torch.arange(T, device=lengths.device)[None, :] < lengths[:, None])[:, None, :]


def token_padding_mask(ids: torch.Tensor, pad_id: int) -> torch.Tensor:
    """Keys whose token is ``pad_id`` may not be attended to, wherever they stand.

    Shapes: ``ids`` ``(B, T)`` integer token ids; returns ``(B, 1, T)``, like ``padding_mask``, which it
    equals for sequences padded at the end.
    """
    ids = torch.as_tensor(ids)
    if ids.dim() != 2:
        raise ValueError(f"ids must have shape (B, T); got shape {shape_str(ids.shape)}")
    return (ids != pad_id)[:, None, :]


def combine_masks(*masks: torch.Tensor) -> torch.Tensor:
    """Allowed only where every mask allows: the logical AND, broadcast to a common shape.

    Each mask must be boolean; shapes must broadcast together (for example a causal ``(T, T)`` with a
    padding ``(B, 1, T)`` gives ``(B, T, T)``).
    """
    if not masks:
        raise ValueError("combine_masks needs at least one mask")
    tensors = [torch.as_tensor(m) for m in masks]
    for m in tensors:
        if m.dtype != torch.bool:
            raise ValueError(f"masks must be boolean, True where attention is allowed; got dtype {m.dtype}")
    try:
        shape = torch.broadcast_shapes(*(m.shape for m in tensors))
    except RuntimeError:
        raise ValueError("masks of shapes " + ", ".join(shape_str(m.shape) for m in tensors)
                         + " do not broadcast to one shape") from None
    device = tensors[0].device
    out = tensors[0].to(device).expand(shape)
    for m in tensors[1:]:
        out = out & m.to(device)
    return out.clone()
