"""Checkers for the coding exercises of chapter 10 (attention, dense layers and convolutions)."""

from __future__ import annotations

import numpy as np

from attnbook.exercises._harness import Case, Checker, Mistake
from attnbook.numpy import conv1d_as_attention, offset_attention_weights


def _dilated_causal(x, kernel, dilation) -> np.ndarray:
    # torch's conv1d (a cross-correlation) on the signal padded on the left only, so no output sees the future.
    k = kernel.shape[-1]
    import torch  # only here: the NumPy chapters' checkers import without PyTorch
    import torch.nn.functional as F

    padded = F.pad(torch.tensor(np.asarray(x, dtype=np.float64).T[None]), ((k - 1) * dilation, 0))
    return F.conv1d(padded, torch.tensor(np.asarray(kernel, dtype=np.float64)), dilation=dilation)[0].numpy().T


def _dilated_cases() -> list[Case]:
    rng = np.random.default_rng(1001)
    cases = [Case("x = [1, 2, 3, 4, 5] (one channel), kernel [[[1, 10]]], dilation 2",
                  (np.arange(1.0, 6.0)[:, None], np.array([[[1.0, 10.0]]]), 2))]
    for T, C_in, C_out, k, r in ((8, 1, 1, 3, 1), (10, 2, 3, 3, 2), (12, 3, 2, 2, 3), (6, 2, 2, 4, 1), (5, 1, 2, 3, 3)):
        cases.append(Case(f"x ({T}, {C_in}), kernel ({C_out}, {C_in}, {k}), dilation {r}",
                          (rng.normal(size=(T, C_in)), rng.normal(size=(C_out, C_in, k)), r)))
    return cases


def _heads(x, kernel, dilation, offsets) -> np.ndarray:
    T = x.shape[0]
    out = np.zeros((T, kernel.shape[0]))
    for j, o in enumerate(offsets):
        out += np.eye(T, k=o) @ x @ kernel[:, :, j].T
    return out


def _centred(x, kernel, dilation) -> np.ndarray:
    k = kernel.shape[-1]
    return _heads(x, kernel, dilation, [(j - k // 2) * dilation for j in range(k)])


def _kernel_reversed(x, kernel, dilation) -> np.ndarray:
    k = kernel.shape[-1]
    return _heads(x, kernel, dilation, [-j * dilation for j in range(k)])


def _no_dilation(x, kernel, dilation) -> np.ndarray:
    k = kernel.shape[-1]
    return _heads(x, kernel, dilation, [-(k - 1 - j) for j in range(k)])


def _looks_ahead(x, kernel, dilation) -> np.ndarray:
    k = kernel.shape[-1]
    return _heads(x, kernel, dilation, [j * dilation for j in range(k)])


check_dilated_causal_conv = Checker(
    name="dilated_causal_conv",
    doc="Check ``fn(x, kernel, dilation) -> (T, C_out)``: the causal dilated convolution (cross-correlation, "
        "as torch's conv1d) of ``x (T, C_in)`` with ``kernel (C_out, C_in, k)``, zeros before the signal: "
        "``y_i = sum_j kernel[:, :, j] x_{i - (k - 1 - j) dilation}``.",
    reference=_dilated_causal,
    cases=_dilated_cases(),
    mistakes=(
        Mistake(_centred, "a causal convolution reads only the present and the past: its window ends at the "
                          "query's own position instead of being centred on it."),
        Mistake(_kernel_reversed, "the last tap of the kernel reads the present token and the first the oldest "
                                  "one, as in torch's conv1d, which does not flip the kernel."),
        Mistake(_no_dilation, "with dilation r neighbouring taps read tokens r positions apart."),
        Mistake(_looks_ahead, "the taps read the past, keys before the query: offsets are negative."),
    ),
    atol=1e-10,
    forbidden=(conv1d_as_attention, offset_attention_weights, "torch.nn.functional.conv1d", np.convolve, np.correlate),
)
