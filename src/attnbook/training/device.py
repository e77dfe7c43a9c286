"""Where to train and in what precision (chapter 17): CUDA, Apple's MPS, or the CPU."""

from __future__ import annotations

import contextlib

import torch


def pick_device(name: str = "auto") -> torch.device:
    """``"auto"``: CUDA if present, else MPS if present, else the CPU. Any other name is taken as given."""
    if name != "auto":
        device = torch.device(name)
        if device.type == "cuda" and not torch.cuda.is_available():
            raise ValueError(f"device {name!r} requested but CUDA is not available here")
        return device
    if torch.cuda.is_available():
        return torch.device("cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def autocast(device: torch.device, precision: str = "auto") -> contextlib.AbstractContextManager:
    """bfloat16 autocast on CUDA GPUs that support it (``"auto"`` or ``"bf16"``), float32 elsewhere.

    bf16 keeps float32's exponent range, so unlike float16 it needs no loss scaling.
    """
    if precision not in ("auto", "bf16", "fp32"):
        raise ValueError(f"precision must be 'auto', 'bf16' or 'fp32'; got {precision!r}")
    if precision == "fp32" or device.type != "cuda":
        if precision == "bf16" and device.type != "cuda":
            raise ValueError(f"bf16 autocast is used on CUDA only; this run is on {device.type}")
        return contextlib.nullcontext()
    if not torch.cuda.is_bf16_supported():
        if precision == "bf16":
            raise ValueError("this GPU does not support bfloat16")
        return contextlib.nullcontext()
    return torch.autocast(device_type="cuda", dtype=torch.bfloat16)
