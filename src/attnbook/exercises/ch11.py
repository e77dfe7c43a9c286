"""Checkers for the coding exercises of chapter 11 (positional encodings), and Part I's capstone: a NumPy
multi-head attention with masks, assembled from the learner's own parts and compared with
``torch.nn.MultiheadAttention``."""

from __future__ import annotations

import numpy as np

import attnbook.numpy as an
from attnbook.exercises._capstone import PartsChecker
from attnbook.exercises._harness import Case, Checker, Mistake
from attnbook.numpy import relative_position_map, sinusoidal_encoding, sinusoidal_frequencies

# --- the positions of a left-padded batch ------------------------------------------------------------------


def _left_padded_positions(lengths: np.ndarray, T: int, d_model: int) -> np.ndarray:
    """Each sequence's encodings as it would get them alone, placed at the end of its row; zeros on the padding."""
    table = sinusoidal_encoding(T, d_model)  # (T, d_model): positions 0 .. T - 1
    out = np.zeros((len(lengths), T, d_model))
    for b, n in enumerate(lengths):
        out[b, T - n:] = table[:n]
    return out


def _padded_cases() -> list[Case]:
    g = np.random.default_rng(1103)
    fixed = [((3, 1), 3, 4), ((5, 2, 4), 5, 8), ((4, 4), 4, 6), ((0, 3, 2), 3, 4)]
    cases = [Case(f"lengths {lengths}, T={T}, d_model={d}" + (", one empty sequence" if 0 in lengths else ""),
                  (np.array(lengths), T, d)) for lengths, T, d in fixed]
    lengths = g.integers(1, 8, size=4)
    cases.append(Case(f"lengths {tuple(int(n) for n in lengths)}, T=7, d_model=16", (lengths, 7, 16)))
    return cases


def _places(lengths, T):
    """(B, T): each place's position counted from its sequence's first real token, negative on the padding."""
    return np.arange(T)[None, :] - (T - np.asarray(lengths))[:, None]


def _encode(positions, d_model):
    angles = positions[..., None] * _frequencies(d_model)  # (..., d_model / 2)
    return np.stack([np.sin(angles), np.cos(angles)], axis=-1).reshape(*positions.shape, d_model)


def _counted_along_the_row(lengths, T, d_model):
    pos = np.broadcast_to(np.arange(T), (len(lengths), T))
    return _encode(pos, d_model) * (_places(lengths, T) >= 0)[..., None]


def _every_place_encoded(lengths, T, d_model):
    return _encode(np.broadcast_to(np.arange(T), (len(lengths), T)), d_model)


def _padded_on_the_right(lengths, T, d_model):
    pos = np.broadcast_to(np.arange(T), (len(lengths), T))
    return _encode(pos, d_model) * (pos < np.asarray(lengths)[:, None])[..., None]


def _counted_from_one(lengths, T, d_model):
    places = _places(lengths, T)
    return _encode(places + 1, d_model) * (places >= 0)[..., None]


def _padding_encoded(lengths, T, d_model):
    return _encode(_places(lengths, T), d_model)


check_left_padded_positions = Checker(
    name="left_padded_positions",
    allowed=(sinusoidal_encoding, sinusoidal_frequencies),
    doc="Check ``fn(lengths, T, d_model) -> (B, T, d_model)``: the sinusoidal position vectors to add to a batch "
        "of ``B`` sequences padded on the left to ``T`` places, sequence ``b``'s ``lengths[b]`` real tokens at the "
        "end of its row: each real token gets the encoding it has in its sequence alone, each padding place zeros.",
    reference=_left_padded_positions,
    cases=_padded_cases(),
    mistakes=(
        Mistake(_counted_along_the_row, "a sequence's first real token is its position 0 wherever the padding "
                "puts it: count each sequence's positions from its own first real token, not from the row's start."),
        Mistake(_every_place_encoded, "the padding comes first in each row: a sequence's first real token, at place "
                "T - lengths[b], is its position 0, and the padding places get zeros."),
        Mistake(_padded_on_the_right, "left padding puts the padding first: a sequence's real tokens fill the last "
                "lengths[b] places of its row."),
        Mistake(_counted_from_one, "positions count from 0: a sequence's first real token gets PE(0) = "
                "(0, 1, 0, 1, ...)."),
        Mistake(_padding_encoded, "the padding places are no token: they get rows of zeros, not the encodings of "
                "negative positions."),
    ),
)


# --- a position back from its printed encoding -------------------------------------------------------------

_DECIMALS = 4  # as the chapter prints its tables


def _frequencies(d_model: int) -> np.ndarray:
    return 10000.0 ** (-np.arange(0, d_model, 2) / d_model)


def _printed_row(pos: float, d_model: int) -> np.ndarray:
    angles = pos * _frequencies(d_model)
    return np.round(np.stack([np.sin(angles), np.cos(angles)], axis=-1).reshape(-1), _DECIMALS)


def _angles(row: np.ndarray, swapped: bool = False) -> np.ndarray:
    """Each pair's angle in [0, 2 pi)."""
    s, c = (row[1::2], row[0::2]) if swapped else (row[0::2], row[1::2])
    return np.mod(np.arctan2(s, c), 2 * np.pi)


def _refine(angles: np.ndarray, omegas: np.ndarray, pos: float) -> float:
    """From a rough ``pos``, each faster pair in turn: the whole number of turns that brings its angle nearest."""
    for a, w in zip(angles[-2::-1], omegas[-2::-1], strict=True):
        pos = (a + 2 * np.pi * np.round((pos * w - a) / (2 * np.pi))) / w
    return float(pos)


def _position_from_encoding(row: np.ndarray, d_model: int) -> float:
    """The slowest pair's angle gives the position roughly, without ambiguity; each faster pair, unwrapped
    to the turn nearest that estimate, gives it more precisely."""
    angles, omegas = _angles(row), _frequencies(d_model)
    return _refine(angles, omegas, angles[-1] / omegas[-1])


def _position_cases() -> list[Case]:
    fixed = [(0.0, 4), (3.0, 4), (2.5, 8), (1234.56, 16), (9999.9, 16), (17000.25, 16), (0.37, 32),
             (40000.5, 64)]
    g = np.random.default_rng(1101)
    for d in (8, 16, 32):
        fixed.append((round(float(g.uniform(0.0, 0.9 * 2 * np.pi / _frequencies(d)[-1])), 4), d))
    return [Case(f"the row of position {pos:.10g}, d_model={d}, to {_DECIMALS} decimals", (_printed_row(pos, d), d))
            for pos, d in fixed]


def _slowest_pair_only(row, d_model):
    return float(_angles(row)[-1] / _frequencies(d_model)[-1])


def _fastest_pair_only(row, d_model):
    return float(_angles(row)[0] / _frequencies(d_model)[0])


def _unwrapped_angles(row, d_model):  # arctan2's range (-pi, pi]: past half a turn, the rough estimate goes negative
    angles, omegas = np.arctan2(row[0::2], row[1::2]), _frequencies(d_model)
    return _refine(angles, omegas, angles[-1] / omegas[-1])


def _sine_cosine_swapped(row, d_model):
    angles, omegas = _angles(row, swapped=True), _frequencies(d_model)
    return _refine(angles, omegas, angles[-1] / omegas[-1])


def _exponent_without_two(row, d_model):
    angles, omegas = _angles(row), 10000.0 ** (-np.arange(d_model // 2) / d_model)
    return _refine(angles, omegas, angles[-1] / omegas[-1])


def _mean_of_the_pairs(row, d_model):
    angles, omegas = _angles(row), _frequencies(d_model)
    estimates, pos = [angles[-1] / omegas[-1]], angles[-1] / omegas[-1]
    for a, w in zip(angles[-2::-1], omegas[-2::-1], strict=True):
        pos = (a + 2 * np.pi * np.round((pos * w - a) / (2 * np.pi))) / w
        estimates.append(pos)
    return float(np.mean(estimates))


def _rounded(row, d_model):
    return float(np.round(_position_from_encoding(row, d_model)))


check_position_from_encoding = Checker(
    name="position_from_encoding",
    allowed=(sinusoidal_frequencies,),
    doc="Check ``fn(row, d_model) -> float``: the real position ``pos``, ``0 <= pos`` before the slowest pair's "
        "first full turn, of a row of the base-10000 sinusoidal encoding rounded to 4 decimals, within 1e-3.",
    reference=_position_from_encoding,
    cases=_position_cases(),
    mistakes=(
        Mistake(_slowest_pair_only, "the slowest pair is unambiguous but coarse: rounding to 4 decimals moves its "
                "angle by up to about 7e-5 rad, which at its tiny frequency is a large fraction of a position. "
                "Use it for a rough position, then let the faster pairs refine it."),
        Mistake(_fastest_pair_only, "the fastest pair is precise but comes back to the same angle every 2 pi "
                "positions: it tells where within a turn, not which turn."),
        Mistake(_unwrapped_angles, "arctan2 returns angles in (-pi, pi]; a position more than half a turn of the "
                "slowest pair along has a negative angle there. Bring each angle into [0, 2 pi) first."),
        Mistake(_sine_cosine_swapped, "each pair is (sin, cos), column 2i the sine: its angle is "
                "arctan2(sine, cosine)."),
        Mistake(_exponent_without_two, "pair i turns at omega_i = 10000 ** (-2i / d_model): the exponent counts "
                "columns, two per pair."),
        Mistake(_mean_of_the_pairs, "averaging every pair's estimate keeps most of the error of the slow, coarse "
                "ones: once the turns are known, the fastest pair alone is the most precise."),
        Mistake(_rounded, "the position may be any real number here, not a whole position: do not round it."),
    ),
    atol=1e-3,
    rtol=0.0,
    forbidden=(sinusoidal_encoding, relative_position_map),
)


# --- the offset between two encodings ----------------------------------------------------------------------


def _offset_between(u: np.ndarray, v: np.ndarray, d_model: int) -> int:
    """The ``k`` with ``v = u @ M_k``, found by trying every ``k`` within the cases' range at once."""
    ks = np.arange(-3000, 3001)[:, None]  # (K, 1)
    angles = ks * sinusoidal_frequencies(d_model)  # (K, d_model / 2): each pair turned by k omega_i
    s, c = np.sin(angles), np.cos(angles)
    sines, cosines = u[0::2] * c + u[1::2] * s, u[1::2] * c - u[0::2] * s  # u @ M_k, pair by pair
    errors = np.maximum(np.abs(sines - v[0::2]), np.abs(cosines - v[1::2])).max(axis=1)
    return int(ks[np.argmin(errors), 0])


def _offset_cases() -> list[Case]:
    cases = []
    # PE(12000) -> PE(9507) at d = 16: the slowest pair's angle passes pi (at position 9935) between the two, so its
    # turn must be brought into (-pi, pi] before dividing by the frequency.
    for a, b, d in ((0, 1, 8), (5, 2, 8), (10, 10, 4), (3, 1200, 16), (12000, 9507, 16), (100, 2999, 32),
                    (40, 47, 4)):
        pe = sinusoidal_encoding(max(a, b) + 1, d)
        cases.append(Case(f"u = PE({a}), v = PE({b}), d_model={d}", (pe[a], pe[b], d)))
    return cases


def _fastest_pair(u, v, d_model):
    w = sinusoidal_frequencies(d_model)[0]
    turn = np.arctan2(v[0], v[1]) - np.arctan2(u[0], u[1])
    return int(np.round(np.angle(np.exp(1j * turn)) / w))


def _slowest_pair(u, v, d_model):
    w = 10000.0 ** (-(d_model - 2) / d_model)
    turn = np.arctan2(v[-2], v[-1]) - np.arctan2(u[-2], u[-1])
    return int(np.round(np.angle(np.exp(1j * turn)) / w))


def _unsigned(u, v, d_model):
    return abs(_slowest_pair(u, v, d_model))


def _reversed(u, v, d_model):
    return -_slowest_pair(u, v, d_model)


check_offset_between = Checker(
    name="offset_between",
    allowed=(sinusoidal_frequencies,),
    doc="Check ``fn(u, v, d_model) -> int``: the offset ``k`` (positive or negative) with ``u = PE(a)``, "
        "``v = PE(a + k)``, for the usual base 10000, ``|k|`` up to a few thousand.",
    reference=_offset_between,
    cases=_offset_cases(),
    mistakes=(
        Mistake(_fastest_pair, "the fastest pair turns by a whole radian per position and so comes back to the "
                "same angle every 2 pi positions: it cannot tell offsets 2 pi apart. Which pair turns slowly "
                "enough to be unambiguous?"),
        Mistake(_unsigned, "the offset has a sign: from PE(5) to PE(2) is -3."),
        Mistake(_reversed, "the offset goes from u to v: v = PE(a + k) when u = PE(a)."),
    ),
    forbidden=(relative_position_map,),
)


# --- capstone: multi-head attention from one's own parts --------------------------------------------------


def _softmax(x: np.ndarray) -> np.ndarray:
    return an.softmax(x, axis=-1)


def _attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
    return an.scaled_dot_product_attention(q, k, v, mask)[0]


def _split(x: np.ndarray, n_heads: int) -> np.ndarray:
    return an.split_heads(x, n_heads)


def _merge(x: np.ndarray) -> np.ndarray:
    return an.merge_heads(x)


def _softmax_cases() -> list[Case]:
    g = np.random.default_rng(1101)
    return [Case("[[1, 2, 3], [0, 0, 0]]", (np.array([[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]]),)),
            Case("[[1000, 1001, 999]] (large scores)", (np.array([[1000.0, 1001.0, 999.0]]),)),
            Case("[[2, -inf, 0]] (a masked score)", (np.array([[2.0, -np.inf, 0.0]]),)),
            Case("random (2, 3, 5)", (g.normal(size=(2, 3, 5)),))]


def _attention_cases() -> list[Case]:
    g = np.random.default_rng(1102)
    causal = np.tril(np.ones((4, 4), dtype=bool))
    keep = np.array([[True] * 5, [True, True, True, False, False]])
    return [
        Case("q, k, v of shapes (3, 4), (5, 4), (5, 2), no mask",
             (g.normal(size=(3, 4)), g.normal(size=(5, 4)), g.normal(size=(5, 2)), None)),
        Case("self-attention (4, 6) with a causal (4, 4) mask", (*(g.normal(size=(4, 6)) for _ in range(3)), causal)),
        Case("heads (2, 3, 4, 2) to keys (2, 3, 5, 2), padding mask (2, 1, 1, 5)",
             (g.normal(size=(2, 3, 4, 2)), g.normal(size=(2, 3, 5, 2)), g.normal(size=(2, 3, 5, 2)),
              keep[:, None, None, :])),
    ]


# The typical mistakes, built without the package's functions (which the checkers forbid).
def _no_shift(x):
    e = np.exp(x)
    return e / e.sum(axis=-1, keepdims=True)


def _stable(x, axis=-1):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _first_axis(x):
    return _stable(x, axis=0)


def _attend(q, k, v, mask, scale=True):
    scores = q @ np.swapaxes(k, -1, -2) / (np.sqrt(q.shape[-1]) if scale else 1.0)
    return _stable(scores if mask is None else np.where(mask, scores, -np.inf)) @ v


def _unscaled_attention(q, k, v, mask):
    return _attend(q, k, v, mask, scale=False)


def _inverted_mask(q, k, v, mask):
    return _attend(q, k, v, None if mask is None else ~np.asarray(mask))


def _weights_zeroed(q, k, v, mask):
    w = _stable(q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1]))
    return (w if mask is None else w * mask) @ v


def _reshaped_heads(x, n_heads):
    *batch, T, d = x.shape
    return x.reshape(*batch, n_heads, T, d // n_heads)


def _reshaped_back(x):
    *batch, h, T, dh = x.shape
    return x.reshape(*batch, T, h * dh)


def _split_by_columns(x, n_heads):
    *batch, T, d = x.shape
    return np.swapaxes(x.reshape(*batch, T, n_heads, d // n_heads), -3, -2)


def _merge_by_columns(x):
    *batch, h, T, dh = x.shape
    return np.swapaxes(x, -3, -2).reshape(*batch, T, h * dh)


_PART_CHECKERS = (
    ("my_softmax", Checker(
        name="my_softmax", doc="Check ``fn(x) -> x.shape``: the softmax over the last axis.",
        reference=_softmax, cases=_softmax_cases(),
        mistakes=(Mistake(_no_shift, "subtract each row's largest score first: exp(1000) overflows."),
                  Mistake(_first_axis, "normalise over the last axis, one distribution per row.")),
        forbidden=(an.softmax, an.masked_softmax))),
    ("my_attention", Checker(
        name="my_attention",
        doc="Check ``fn(q, k, v, mask) -> (..., T_q, d_v)``: scaled dot-product attention; ``mask`` boolean, "
            "True where allowed, broadcastable to ``(..., T_q, T_k)``, or None.",
        reference=_attention, cases=_attention_cases(),
        mistakes=(Mistake(_unscaled_attention, "divide the scores by sqrt(d_k) (chapter 6)."),
                  Mistake(_inverted_mask, "True in the mask means allowed: forbidden scores become -inf."),
                  Mistake(_weights_zeroed, "mask the scores before the softmax (-inf), so that the allowed "
                          "weights still sum to 1.")),
        forbidden=(an.scaled_dot_product_attention, an.masked_softmax, an.attention_with))),
    ("my_split_heads", Checker(
        name="my_split_heads", doc="Check ``fn(x, n_heads) -> (B, n_heads, T, d_head)`` from ``(B, T, d_model)``.",
        reference=_split,
        cases=[Case("x (2, 5, 8), 2 heads", (np.arange(80.0).reshape(2, 5, 8), 2)),
               Case("x (1, 3, 12), 3 heads", (np.arange(36.0).reshape(1, 3, 12), 3))],
        mistakes=(Mistake(_reshaped_heads, "head i takes columns i * d_head onwards of every position: split the "
                          "last axis into (n_heads, d_head), then swap the heads in front of the positions."),),
        forbidden=(an.split_heads,))),
    ("my_merge_heads", Checker(
        name="my_merge_heads", doc="Check ``fn(x) -> (B, T, n_heads * d_head)`` from ``(B, n_heads, T, d_head)``.",
        reference=_merge,
        cases=[Case("x (2, 2, 5, 4)", (np.arange(80.0).reshape(2, 2, 5, 4),)),
               Case("x (1, 3, 2, 4)", (np.arange(24.0).reshape(1, 3, 2, 4),))],
        mistakes=(Mistake(_reshaped_back, "undo the split in reverse: swap the heads back behind the positions "
                          "before joining them into one axis."),),
        forbidden=(an.merge_heads,))),
)


def _torch_mha(weights: dict[str, np.ndarray], n_heads: int):
    import torch  # only here: chapter 11's other checkers import without PyTorch

    d = weights["out_proj.weight"].shape[0]
    mha = torch.nn.MultiheadAttention(d, n_heads, bias=True, batch_first=True, dtype=torch.float64)
    mha.load_state_dict({k: torch.as_tensor(np.asarray(v, dtype=np.float64)) for k, v in weights.items()})
    return mha.eval()


def _mha(query: np.ndarray, key: np.ndarray, value: np.ndarray, weights: dict[str, np.ndarray], n_heads: int,
         keep: np.ndarray | None = None, causal: bool = False) -> np.ndarray:
    """``torch.nn.MultiheadAttention`` with these weights, on NumPy arrays: the output ``(B, T_q, d_model)``."""
    import torch

    mha = _torch_mha(weights, n_heads)
    q, k, v = (torch.as_tensor(np.asarray(a, dtype=np.float64)) for a in (query, key, value))
    T_q, T_k = q.shape[1], k.shape[1]
    # PyTorch's boolean masks are True where attention is forbidden: the opposite of this book's.
    padding = None if keep is None else ~torch.as_tensor(np.asarray(keep, dtype=bool))
    future = torch.ones(T_q, T_k, dtype=torch.bool).triu(1) if causal else None
    out, _ = mha(q, k, v, key_padding_mask=padding, attn_mask=future, need_weights=True)  # the ordinary path
    return out.detach().numpy()


def _random_weights(g: np.random.Generator, d: int) -> dict[str, np.ndarray]:
    return {"in_proj_weight": g.normal(size=(3 * d, d)) / np.sqrt(d), "in_proj_bias": 0.3 * g.normal(size=3 * d),
            "out_proj.weight": g.normal(size=(d, d)) / np.sqrt(d), "out_proj.bias": 0.3 * g.normal(size=d)}


def _mha_cases() -> list[Case]:
    g = np.random.default_rng(1103)
    cases = []
    for label, B, T_q, T_k, d, h, lengths, causal, same in (
        ("self-attention, lengths 5 and 3, causal", 2, 5, 5, 8, 2, (5, 3), True, True),
        ("self-attention, lengths 4, 2 and 1, no causal mask", 3, 4, 4, 12, 3, (4, 2, 1), False, True),
        # causal with T_q != T_k: a mask built as (T_q, T_q) does not fit the (T_q, T_k) scores
        ("cross-attention, 3 queries to 6 keys, key lengths 6 and 4, causal", 2, 3, 6, 8, 4, (6, 4), True, False),
        ("attention without masks, one head, keys differ from values", 2, 4, 3, 6, 1, None, False, False),
    ):
        query = g.normal(size=(B, T_q, d))
        key = query.copy() if same else g.normal(size=(B, T_k, d))
        value = key.copy() if same or lengths else g.normal(size=(B, T_k, d))
        keep = None if lengths is None else np.arange(T_k)[None, :] < np.array(lengths)[:, None]
        cases.append(Case(f"{label} (B={B}, d_model={d}, {h} heads)",
                          (query, key, value, _random_weights(g, d), h, keep, causal)))
    return cases


def _mha_variant(query, key, value, weights, n_heads, keep=None, causal=False, *, transpose=True, biases=True,
                 scale=True, keep_means_forbidden=False, heads_by_reshape=False):
    """Multi-head attention in NumPy with one thing changed: the typical mistakes."""
    d = weights["out_proj.weight"].shape[0]
    W, b = weights["in_proj_weight"], weights["in_proj_bias"] if biases else np.zeros(3 * d)
    Wo, bo = weights["out_proj.weight"], weights["out_proj.bias"] if biases else np.zeros(d)
    if not transpose:
        W, Wo = np.concatenate([w.T for w in np.split(W, 3)]), Wo.T
    q, k, v = (x @ w.T + bb for x, w, bb in zip((query, key, value), np.split(W, 3), np.split(b, 3), strict=True))
    split = _reshaped_heads if heads_by_reshape else _split_by_columns
    merge = _reshaped_back if heads_by_reshape else _merge_by_columns
    q, k, v = (split(x, n_heads) for x in (q, k, v))
    mask = np.ones((q.shape[-2], k.shape[-2]), dtype=bool)
    if keep is not None:
        mask = mask & (~keep if keep_means_forbidden else keep)[:, None, None, :]
    if causal:
        mask = mask & np.tril(np.ones(mask.shape[-2:], dtype=bool))
    out = _attend(q, k, v, mask, scale)
    return merge(out) @ Wo.T + bo


def _not_transposed(*args):
    return _mha_variant(*args, transpose=False)


def _no_biases(*args):
    return _mha_variant(*args, biases=False)


def _unscaled_mha(*args):
    return _mha_variant(*args, scale=False)


def _keep_inverted(*args):
    return _mha_variant(*args, keep_means_forbidden=True)


def _heads_reshaped(*args):
    return _mha_variant(*args, heads_by_reshape=True)


check_my_mha = PartsChecker(
    name="my_mha",
    doc="Check ``fn(query, key, value, weights, n_heads, keep=None, causal=False) -> (B, T_q, d_model)``: "
        "multi-head attention as ``torch.nn.MultiheadAttention`` computes it with the weights of the dict "
        "``weights`` (its state dict as NumPy arrays); ``keep`` ``(B, T_k)`` is True for real keys, ``causal`` "
        "lets query i see keys j <= i. Pass a dict of your parts (``my_softmax``, ``my_attention``, "
        "``my_split_heads``, ``my_merge_heads``, ``my_mha``) to have each checked before the whole.",
    reference=_mha,
    cases=_mha_cases(),
    mistakes=(
        Mistake(_not_transposed, "PyTorch stores a projection as (d_out, d_in) and computes x W^T + b: use the "
                "transposes of in_proj_weight's three blocks and of out_proj.weight."),
        Mistake(_no_biases, "in_proj_bias holds the biases of q, k and v (in that order), and out_proj.bias the "
                "output's."),
        Mistake(_unscaled_mha, "scale each head's scores by 1 / sqrt(d_head), d_head = d_model / n_heads."),
        Mistake(_keep_inverted, "keep is True for real tokens: those are the keys a query may attend to."),
        Mistake(_heads_reshaped, "head i takes columns i * d_head onwards: split the last axis, then move the "
                "heads in front of the positions (and back before merging)."),
    ),
    forbidden=(an.multi_head_attention, an.scaled_dot_product_attention, an.masked_softmax, an.softmax,
               an.split_heads, an.merge_heads, an.attention_with, "torch.nn.MultiheadAttention.forward",
               "torch.nn.functional.multi_head_attention_forward", "torch.nn.functional.scaled_dot_product_attention"),
    parts=_PART_CHECKERS,
)
