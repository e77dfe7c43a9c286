"""Rotary position embeddings (chapter 21; Su et al. 2021), twin of ``attnbook.numpy.rotary``.

Instead of adding a position vector to each token, rotate its query and its key by angles proportional
to its position. Dimension ``i`` is paired with dimension ``i + d/2`` (the "rotate-half" layout of
GPT-NeoX and Llama), and pair ``i`` turns by ``pos * theta_i`` with ``theta_i = base ** (-2 i / d)``,
the frequencies of chapter 11. A rotation by ``m theta`` and one by ``n theta`` meet in a dot product as
a single rotation by ``(m - n) theta``, so the score of a rotated query and key depends on their
positions only through the offset ``m - n``.
"""

from __future__ import annotations

import torch
from torch import nn

from attnbook._validate import require_real, shape_str
from attnbook.torch._checks import as_float, require_size, require_tensor


def _check_dim(d: int) -> None:
    if isinstance(d, bool) or not isinstance(d, int) or d < 2 or d % 2:
        raise ValueError(f"the rotated dimension d must be even and at least 2 (dimensions turn in pairs); got {d!r}")


def _positions(x: torch.Tensor, positions: torch.Tensor | None) -> torch.Tensor:
    if x.dim() < 2:
        raise ValueError(f"x must have shape (..., T, d); got shape {shape_str(x.shape)}")
    _check_dim(x.shape[-1])
    T = x.shape[-2]
    positions = torch.arange(T, device=x.device) if positions is None else torch.as_tensor(positions, device=x.device)
    if tuple(positions.shape) != (T,):
        raise ValueError(f"positions must have shape (T,) = ({T},), one per row of x; got {shape_str(positions.shape)}")
    return positions


def rotary_frequencies(d: int, base: float = 10000.0) -> torch.Tensor:
    """The angular frequencies ``theta_i = base ** (-2 i / d)`` of the ``d/2`` rotated pairs: shape ``(d/2,)``.

    Pair 0 turns fastest (one radian per position); the last pair turns slowest. Chapter 21.
    """
    _check_dim(d)
    require_real("base", base, "a finite number greater than 1", lambda b: b > 1)
    return base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)


def rotary_angles(positions: torch.Tensor, d: int, base: float = 10000.0) -> torch.Tensor:
    """The angles ``positions[t] * theta_i``: ``positions`` ``(T,)`` to ``(T, d/2)``. Chapter 21."""
    positions = torch.as_tensor(positions)
    if positions.dim() != 1:
        raise ValueError(f"positions must have shape (T,); got {shape_str(positions.shape)}")
    # In float64: the angles of late positions (thousands of radians) keep their fractional part.
    return positions.to(torch.float64)[:, None] * rotary_frequencies(d, base).to(positions.device)[None, :]


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """``(x1, x2)`` to ``(-x2, x1)``, halves of the last axis: each pair ``(x_i, x_{i + d/2})`` turned by
    90 degrees. Shapes: ``(..., d)`` to ``(..., d)``, ``d`` even. Chapter 21."""
    require_tensor("x", x)
    _check_dim(x.shape[-1] if x.dim() else 0)
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([-x2, x1], dim=-1)


def apply_rotary(x: torch.Tensor, positions: torch.Tensor | None = None, base: float = 10000.0) -> torch.Tensor:
    """Rotate each pair ``(x_i, x_{i + d/2})`` of row ``t`` by the angle ``positions[t] * theta_i``.

    ``x cos + rotate_half(x) sin``, the rotate-half form. Shapes: ``x`` ``(..., T, d)``, ``d`` even;
    ``positions`` ``(T,)`` (default ``0 .. T-1``); returns ``(..., T, d)``. Chapter 21.
    """
    require_tensor("x", x)
    x = as_float("x", x)
    positions = _positions(x, positions)
    angles = rotary_angles(positions, x.shape[-1], base)  # (T, d/2), float64
    cos = torch.cat([angles.cos()] * 2, dim=-1).to(x.dtype)  # (T, d): pair i uses the same angle in both halves
    sin = torch.cat([angles.sin()] * 2, dim=-1).to(x.dtype)
    return x * cos + rotate_half(x) * sin


def apply_rotary_complex(x: torch.Tensor, positions: torch.Tensor | None = None,
                         base: float = 10000.0) -> torch.Tensor:
    """``apply_rotary`` in complex numbers: pair ``i`` is ``z_i = x_i + 1j x_{i + d/2}``, multiplied by
    ``exp(1j positions[t] theta_i)``. The same shapes and result as ``apply_rotary``. Chapter 21.
    """
    require_tensor("x", x)
    x = as_float("x", x)
    positions = _positions(x, positions)
    d = x.shape[-1]
    z = torch.complex(x[..., : d // 2].double(), x[..., d // 2 :].double())  # (..., T, d/2)
    angles = rotary_angles(positions, d, base)  # (T, d/2)
    z = z * torch.polar(torch.ones_like(angles), angles)  # a rotation is a multiplication by e^{i angle}
    return torch.cat([z.real, z.imag], dim=-1).to(x.dtype)


class RotaryTables(nn.Module):
    """``apply_rotary``'s cosines and sines for positions ``0 .. length-1``, computed once, sliced at each use.

    ``RotaryTables(d, length, base)`` holds ``cos`` and ``sin``, each ``(length, d)`` in float64 (buffers
    that a checkpoint leaves out); ``forward(x, start)`` rotates ``x`` ``(..., T, d)`` as
    ``apply_rotary(x, arange(start, start + T), base)`` does, to the last bit, without recomputing the
    angles. Positions past ``length`` (a rotary model runs past its context) grow the tables. Chapter 21.
    """

    def __init__(self, d: int, length: int, base: float = 10000.0) -> None:
        super().__init__()
        _check_dim(d)
        if isinstance(length, bool) or not isinstance(length, int) or length < 1:
            raise ValueError(f"length (positions to tabulate) must be an integer, at least 1; got {length!r}")
        rotary_frequencies(d, base)  # checks the base
        self.d, self.base = d, base
        self._build(length, None)

    def _build(self, length: int, device: torch.device | None) -> None:
        angles = rotary_angles(torch.arange(length, device=device), self.d, self.base)  # (length, d/2), float64
        self.register_buffer("cos", torch.cat([angles.cos()] * 2, dim=-1), persistent=False)  # (length, d)
        self.register_buffer("sin", torch.cat([angles.sin()] * 2, dim=-1), persistent=False)
        # The tables cast to each dtype in use: a forward pass casts them once, not at every layer and step.
        self._cast: dict[torch.dtype, tuple[torch.Tensor, torch.Tensor]] = {}

    def _apply(self, fn, *args, **kwargs):
        # model.float() or .half() would round the float64 tables; rebuild them where they now live instead.
        super()._apply(fn, *args, **kwargs)
        self._build(self.cos.shape[0], self.cos.device)
        return self

    def forward(self, x: torch.Tensor, start: int = 0) -> torch.Tensor:
        T = x.shape[-2]
        if start + T > self.cos.shape[0]:
            self._build(max(2 * self.cos.shape[0], start + T), self.cos.device)
        if x.dtype not in self._cast or self._cast[x.dtype][0].device != self.cos.device:
            self._cast[x.dtype] = (self.cos.to(x.dtype), self.sin.to(x.dtype))
        cos, sin = self._cast[x.dtype]  # the float64 values apply_rotary would cast
        return x * cos[start:start + T] + rotate_half(x) * sin[start:start + T]  # tables (T, d)

    def extra_repr(self) -> str:
        return f"d={self.d}, length={self.cos.shape[0]}, base={self.base:g}"


def sliding_window_mask(T_q: int, T_k: int | None = None, *, window: int) -> torch.Tensor:
    """Causal attention to the last ``window`` positions only: ``(T_q, T_k)`` booleans, True where allowed.

    The queries are the last ``T_q`` of the ``T_k`` positions (as in ``causal_mask``); query ``i`` sits
    at position ``T_k - T_q + i`` and may see key ``j`` when ``0 <= T_k - T_q + i - j < window``. This is
    what a sliding key-value cache of ``window`` positions computes (chapter 21). Refuses sizes that are
    not integers, and ``T_k < T_q``.
    """
    T_k = T_q if T_k is None else T_k
    require_size("T_q", T_q)
    require_size("T_k", T_k)
    if T_q < 1 or T_k < T_q:
        raise ValueError(f"need 1 <= T_q <= T_k; got T_q = {T_q}, T_k = {T_k}")
    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
        raise ValueError(f"window must be an integer, at least 1; got {window!r}")
    offset = (T_k - T_q + torch.arange(T_q))[:, None] - torch.arange(T_k)[None, :]  # query position - key position
    return (offset >= 0) & (offset < window)
