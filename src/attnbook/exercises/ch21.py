"""Checkers for the coding exercises of chapter 21 (rotary position embeddings)."""

from __future__ import annotations

import numpy as np

import attnbook.numpy as an
from attnbook.exercises._harness import Case, Checker, Mistake
from attnbook.numpy import sliding_window_mask

# --- the mask of a ring cache ---------------------------------------------------------------------------


def _slot_positions(newest: int, window: int) -> np.ndarray:
    """The position each slot of a ring of ``window`` slots holds once position ``newest`` is written."""
    slots = np.arange(window)
    return newest - (newest - slots) % window  # negative: the slot has not been written yet


def _ring_reference(query_positions, window):
    queries = np.asarray(query_positions)
    held = _slot_positions(int(queries.max()), window)
    # the package's sliding-window mask over absolute positions, read at the positions the slots hold
    absolute = sliding_window_mask(int(queries.max()) + 1, window=window)
    return np.where(held >= 0, absolute[queries][:, np.maximum(held, 0)], False)


def _ring_cases() -> list[Case]:
    return [Case(f"query positions {list(q)}, window {w}{why}", (list(q), w)) for q, w, why in (
        ((0,), 4, " (only slot 0 written so far)"),
        ((2,), 4, " (the ring not yet full)"),
        ((5,), 4, " (the ring has wrapped: slot 0 holds position 4)"),
        ((6, 7, 8, 9), 4, " (a chunk of four queries written at once)"),
        ((9, 10, 11), 5, " (a chunk across the wrap)"),
        ((0, 1, 2), 8, " (a prompt shorter than the ring)"),
        ((13,), 1, " (a ring of one slot)"),
        ((29, 30), 7, ""),
    )]


def _slot_is_position(query_positions, window):
    # reading the slot index as the position: right only until the ring wraps
    queries = np.asarray(query_positions)[:, None]
    slots = np.arange(window)[None, :]
    return (slots <= queries) & (queries - slots < window)


def _empty_slots_kept(query_positions, window):
    queries = np.asarray(query_positions)
    held = _slot_positions(int(queries.max()), window)
    return held[None, :] <= queries[:, None]


def _chunk_not_causal(query_positions, window):
    queries = np.asarray(query_positions)
    held = _slot_positions(int(queries.max()), window)
    return np.broadcast_to(held >= 0, (len(queries), window)).copy()


check_ring_cache_mask = Checker(
    name="ring_cache_mask",
    doc="Check ``fn(query_positions, window) -> (T_q, window) booleans``: a cache of ``window`` slots where "
        "position p is written to slot p % window, every position up to the largest query written; True where "
        "the query may attend to the key the slot holds (written, and not after the query).",
    reference=_ring_reference,
    cases=_ring_cases(),
    mistakes=(
        Mistake(_slot_is_position, "once the ring has wrapped, slot s holds the latest position p <= newest with "
                "p % window == s, not position s: compute that position first."),
        Mistake(_empty_slots_kept, "before the ring is full some slots hold nothing (the position they would hold "
                "is negative): mask them out."),
        Mistake(_chunk_not_causal, "when several queries are written at once, the earlier ones must not see the "
                "later ones' keys: keep only slots whose position is at most the query's."),
    ),
)

# --- rotating keys that are already rotated -------------------------------------------------------------


def _rotate_to_reference(x, positions, base, rotated_at=None):
    # R(p) R(a)^T = R(p - a): one rotation by the difference
    return an.apply_rotary(x, _shift(positions, rotated_at), base)


def _turn(x, shift, base):
    """Rows of x turned by ``shift * theta_i`` in the rotate-half pairing, written out (the mistakes below may
    not call the package's rotation: the checker refuses it in them as in a learner's answer)."""
    d = x.shape[-1]
    a = np.outer(shift, base ** (-np.arange(0, d, 2) / d))
    x1, x2 = x[:, : d // 2], x[:, d // 2:]
    return np.concatenate([x1 * np.cos(a) - x2 * np.sin(a), x1 * np.sin(a) + x2 * np.cos(a)], axis=-1)


def _shift(positions, rotated_at):
    return np.asarray(positions, dtype=float) - (0.0 if rotated_at is None else np.asarray(rotated_at))


def _added(x, positions, base, rotated_at=None):
    return _turn(x, np.asarray(positions, dtype=float), base)  # the old rotation never undone


def _difference_reversed(x, positions, base, rotated_at=None):
    return _turn(x, -_shift(positions, rotated_at), base)


def _interleaved(x, positions, base, rotated_at=None):
    d = x.shape[-1]
    a = _shift(positions, rotated_at)[:, None] * base ** (-np.arange(0, d, 2) / d)
    out = np.empty_like(x)
    out[:, 0::2] = x[:, 0::2] * np.cos(a) - x[:, 1::2] * np.sin(a)
    out[:, 1::2] = x[:, 0::2] * np.sin(a) + x[:, 1::2] * np.cos(a)
    return out


def _wrong_frequencies(x, positions, base, rotated_at=None):
    return _turn(x, _shift(positions, rotated_at), base**0.5)  # base ** (-i / d): the exponent's 2 forgotten


def _rotate_to_cases() -> list[Case]:
    rng = np.random.default_rng(2121)
    cases = [Case("x = [[1, 0]] at position 1, not rotated yet, base 10000 (one pair, one radian)",
                  (np.array([[1.0, 0.0]]), [1], 1e4)),
             Case("x = [[0, 1]] rotated at position 3, moved to position 1", (np.array([[0.0, 1.0]]), [1], 1e4, [3]))]
    for T, d, base, positions, rotated_at in (
            (3, 4, 1e4, [2, 3, 4], None),
            (5, 8, 1e4, [1, 2, 3, 4, 5], [68, 69, 70, 71, 72]),
            (4, 16, 100.0, [0, 0, 9, 9], [4, 7, 2, 9]),
            (6, 8, 1e4, [7, 3, 0, 40, 5, 5], [7, 0, 3, 1, 100, 5])):
        at = "not rotated yet" if rotated_at is None else f"rotated at {rotated_at}"
        cases.append(Case(f"random x of shape ({T}, {d}), {at}, to positions {positions}, base {base:g}",
                          (rng.normal(size=(T, d)), positions, base) + (() if rotated_at is None else (rotated_at,))))
    return cases


check_rotate_to = Checker(
    name="rotate_to",
    doc="Check ``fn(x, positions, base, rotated_at=None) -> (T, d)``: the rows of ``x`` (``(T, d)``), already "
        "rotated at ``rotated_at`` (None: not rotated), rotated instead at ``positions``, in chapter 21's "
        "pairing: pair ``(x_i, x_{i + d/2})`` turned by ``position * base ** (-2 i / d)``.",
    reference=_rotate_to_reference,
    cases=_rotate_to_cases(),
    mistakes=(
        Mistake(_added, "rotating already-rotated rows adds the angles: undo the rotation at rotated_at (or turn by "
                "the difference positions - rotated_at)."),
        Mistake(_difference_reversed, "the rotation turns counter-clockwise, by positions - rotated_at: "
                "(a, b) goes to (a cos - b sin, a sin + b cos)."),
        Mistake(_interleaved, "this chapter pairs dimension i with i + d/2 (the rotate-half layout), not with i + 1."),
        Mistake(_wrong_frequencies, "the frequencies are base ** (-2 i / d) for pair i = 0 .. d/2 - 1, "
                "the exponents of chapter 11."),
    ),
    atol=1e-10,
    forbidden=(an.apply_rotary, an.apply_rotary_complex, an.rotate_half, "attnbook.torch.apply_rotary",
               "attnbook.torch.apply_rotary_complex", "attnbook.torch.rotate_half",
               "attnbook.torch.rotary.RotaryTables.forward"),
)
