"""Input checks shared by the PyTorch modules: shapes and masks, with errors that name what arrived."""

from __future__ import annotations

from numbers import Integral

import torch

from attnbook._validate import check_mask_fits as _check_mask_fits
from attnbook._validate import shape_str


def require_tensor(name: str, x: object) -> None:
    """Raise ``ValueError`` unless ``x`` is a ``torch.Tensor`` (not a NumPy array or a list)."""
    if not isinstance(x, torch.Tensor):
        kind = f"{type(x).__module__}.{type(x).__name__}" if type(x).__module__ != "builtins" else type(x).__name__
        raise ValueError(f"{name} must be a torch.Tensor; got {kind}. Convert it with torch.as_tensor({name}), or "
                         "use the NumPy twin in attnbook.numpy for NumPy arrays")


def require_size(name: str, value: object, minimum: int = 0) -> None:
    """Raise ``ValueError`` unless ``value`` is an integer (or, under ``torch.compile``, a symbolic one), at least
    ``minimum``: a length or a position that arrives as a float is refused rather than rounded. Python-side only,
    so it costs no device sync."""
    if isinstance(value, bool) or not isinstance(value, (Integral, torch.SymInt)) or value < minimum:
        raise ValueError(f"{name} must be an integer, at least {minimum}; got {value!r}")


def as_float(name: str, x: torch.Tensor) -> torch.Tensor:
    """Accept integer tensors and compute in floating point, as the NumPy twins do; booleans and complex
    numbers are refused."""
    x = torch.as_tensor(x)
    if x.dtype == torch.bool or x.is_complex():
        raise ValueError(f"{name} must hold real numbers; got dtype {x.dtype}")
    if not x.is_floating_point():
        x = x.to(torch.get_default_dtype())
    return x


def as_mask(mask: torch.Tensor) -> torch.Tensor:
    """A boolean mask, True where attention is allowed; any other dtype is an error."""
    mask = torch.as_tensor(mask)
    if mask.dtype != torch.bool:
        raise ValueError(
            f"mask must be boolean, True where attention is allowed; got dtype {mask.dtype}. "
            "For a 0/1 mask use mask.bool(); for an additive mask of 0 and -inf use mask == 0"
        )
    return mask


def check_mask_fits(mask: torch.Tensor, scores_shape: tuple[int, ...]) -> None:
    """Raise ``ValueError`` unless ``mask`` broadcasts to the scores' shape ``(..., T_q, T_k)``."""
    _check_mask_fits(tuple(mask.shape), scores_shape)


def head_mask(mask: torch.Tensor, scores_shape: tuple[int, ...], device: torch.device) -> torch.Tensor:
    """A boolean mask on ``device``, checked against the scores ``(..., T_q, T_k)`` of one head, with a head axis
    added: ``(..., 1, T_q, T_k)``, the same for every head. The one preparation the multi-head functions share."""
    mask = as_mask(mask).to(device)
    check_mask_fits(mask, scores_shape)
    return mask.unsqueeze(-3)


def check_last_dim(name: str, x: torch.Tensor, d: int, layout: str) -> None:
    """Raise ``ValueError`` unless ``x`` has at least 2 dimensions and last dimension ``d``."""
    if x.dim() < 2 or x.shape[-1] != d:
        raise ValueError(f"{name} must have shape {layout} with last dimension {d}; got {shape_str(x.shape)}")
