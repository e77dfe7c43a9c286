"""Checkers for the coding exercises of chapter 10 (attention, dense layers and convolutions)."""

from __future__ import annotations

import numpy as np

from attnbook.exercises._harness import Case, Checker, Mistake
from attnbook.numpy import conv1d_as_attention, offset_attention_weights


def _causal_heads(T: int, k: int, dilation: int) -> np.ndarray:
    # Torch's conv1d on the signal padded with (k - 1) dilation zeros on the left reads, for output i and tap j,
    # padded position i + j dilation, which is token i - (k - 1 - j) dilation: one shifted identity per tap.
    return offset_attention_weights(T, [-(k - 1 - j) * dilation for j in range(k)])


_CASES = [Case(f"T={T}, k={k}, dilation={r}", (T, k, r))
          for T, k, r in ((5, 2, 2), (8, 3, 1), (10, 3, 2), (12, 2, 3), (6, 4, 1), (5, 3, 3))]


def _shifted(T: int, offsets: list[int]) -> np.ndarray:
    # The mistakes' own shifted identities: the package's are forbidden to answers.
    return np.stack([np.eye(T, k=o) for o in offsets])


def _centred(T: int, k: int, dilation: int) -> np.ndarray:
    return _shifted(T, [(j - k // 2) * dilation for j in range(k)])


def _kernel_reversed(T: int, k: int, dilation: int) -> np.ndarray:
    return _shifted(T, [-j * dilation for j in range(k)])


def _no_dilation(T: int, k: int, dilation: int) -> np.ndarray:
    return _shifted(T, [-(k - 1 - j) for j in range(k)])


def _looks_ahead(T: int, k: int, dilation: int) -> np.ndarray:
    return _shifted(T, [j * dilation for j in range(k)])


def _keys_on_rows(T: int, k: int, dilation: int) -> np.ndarray:
    return _shifted(T, [(k - 1 - j) * dilation for j in range(k)])


def _wraps_round(T: int, k: int, dilation: int) -> np.ndarray:
    # np.roll of the identity: a key before position 0 comes back from the end of the sequence
    return np.stack([np.roll(np.eye(T), -(k - 1 - j) * dilation, axis=1) for j in range(k)])


check_dilated_causal_conv = Checker(
    name="dilated_causal_conv",
    doc="Check ``fn(T, k, dilation) -> (k, T, T)``: the fixed attention weights of the ``k`` heads that compute "
        "a causal dilated convolution of a signal of ``T`` tokens, head ``j`` with ``kernel[:, :, j]`` as its "
        "value projection (the layout ``(C_out, C_in, k)`` of torch's conv1d), so that the sum over ``j`` of "
        "``A[j] @ x @ kernel[:, :, j].T`` equals torch's conv1d with that ``dilation`` on ``x`` padded with "
        "``(k - 1) dilation`` zeros on the left.",
    reference=_causal_heads,
    cases=_CASES,
    mistakes=(
        Mistake(_centred, "a causal convolution reads only the present and the past: its window ends at the "
                          "query's own position instead of being centred on it."),
        Mistake(_kernel_reversed, "the last tap of the kernel reads the present token and the first the oldest "
                                  "one, as in torch's conv1d, which does not flip the kernel."),
        Mistake(_no_dilation, "with dilation r neighbouring taps read tokens r positions apart."),
        Mistake(_looks_ahead, "the taps read the past, keys before the query: offsets are negative."),
        Mistake(_keys_on_rows, "row i of a head's matrix holds query i's weights over the keys, and the key it reads "
                               "stands before the query: each head's ones sit on or below the diagonal."),
        Mistake(_wraps_round, "the zeros of the padding are no token: a query whose tap falls before position 0 "
                              "reads nothing, a row of zeros, rather than a token from the end of the sequence."),
    ),
    forbidden=(conv1d_as_attention, offset_attention_weights, "torch.nn.functional.conv1d", np.convolve, np.correlate),
)


# --- a convolution as one token-mixing matrix ----------------------------------------------------------------


def _mixing_matrix(w: np.ndarray, T: int) -> np.ndarray:
    # Column t is the convolution of the signal that is 1 at token t and 0 elsewhere: the package's convolution,
    # one channel in and out, read off on the basis vectors.
    one_hots = np.eye(T)
    return np.stack([conv1d_as_attention(one_hots[:, [t]], w[None, None, :])[:, 0] for t in range(T)], axis=1)


def _mixing_cases() -> list[Case]:
    g = np.random.default_rng(1001)
    fixed = [Case("w=[1, 2, 3], T=5", (np.array([1.0, 2.0, 3.0]), 5)),
             Case("w=[0.5], T=3 (one tap)", (np.array([0.5]), 3))]
    drawn = [Case(f"random w of {k} taps, T={T}" + (" (the kernel longer than the sequence)" if k > T else ""),
                  (g.normal(size=k), T)) for k, T in ((5, 8), (3, 10), (7, 4))]
    return fixed + drawn


def _by_offsets(w: np.ndarray, T: int, offsets: list[int]) -> np.ndarray:
    # The mistakes' own weighted shifted identities: the package's are forbidden to answers.
    return sum(w_j * np.eye(T, k=o) for w_j, o in zip(w, offsets, strict=True))


def _flipped(w, T):  # also the transpose of the right matrix: np.convolve's reading of the kernel
    return _by_offsets(w, T, [len(w) // 2 - j for j in range(len(w))])


def _window_from_i(w, T):
    return _by_offsets(w, T, list(range(len(w))))


def _wraps_round(w, T):
    return sum(w_j * np.roll(np.eye(T), j - len(w) // 2, axis=1) for j, w_j in enumerate(w))


check_conv_mixing_matrix = Checker(
    name="conv_mixing_matrix",
    doc="Check ``fn(w, T) -> (T, T)``: the token-mixing matrix ``M`` of a one-channel convolution with the kernel "
        "``w`` (``k`` taps, ``k`` odd) and zero padding ``k // 2``: ``M @ x`` equals torch's ``conv1d`` of the "
        "signal ``x`` of ``T`` tokens with ``padding=k // 2``.",
    reference=_mixing_matrix,
    cases=_mixing_cases(),
    mistakes=(
        Mistake(_flipped, "conv1d does not flip the kernel: w[0] weighs the first token of output i's window, "
                          "k // 2 places before i, and row i of M holds output i's weights, so w[0] sits left of the "
                          "diagonal."),
        Mistake(_window_from_i, "padding k // 2 on both sides centres the window on the output's own token: the "
                                "middle tap w[k // 2] weighs token i, on the diagonal."),
        Mistake(_wraps_round, "zero padding reads zeros beyond the ends of the sequence: the first and last rows "
                              "lose the taps that fall outside, rather than reading tokens from the other end."),
    ),
    forbidden=(conv1d_as_attention, offset_attention_weights, "torch.nn.functional.conv1d", np.convolve, np.correlate),
)
