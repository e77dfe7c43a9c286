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

# --- a rotated key cache moved to another base -------------------------------------------------------


def _rebase_reference(x, positions, base, old_base=None):
    # the package's rotation undone at the old base, then done at the new one
    positions = np.asarray(positions, dtype=float)
    raw = x if old_base is None else an.apply_rotary(x, -positions, old_base)
    return an.apply_rotary(raw, positions, base)


def _turn(x, shift, base):
    """Rows of x turned by ``shift * theta_i`` in the rotate-half pairing, written out (the mistakes below may
    not call the package's rotation: the checker refuses it in them as in a learner's answer)."""
    return _turn_by(x, np.outer(shift, _freqs(x.shape[-1], base)))


def _freqs(d, base):
    return 0.0 if base is None else base ** (-np.arange(0, d, 2) / d)


def _turn_by(x, a):
    d = x.shape[-1]
    x1, x2 = x[:, : d // 2], x[:, d // 2:]
    return np.concatenate([x1 * np.cos(a) - x2 * np.sin(a), x1 * np.sin(a) + x2 * np.cos(a)], axis=-1)


def _angles(x, positions, base, old_base):
    d = x.shape[-1]
    return np.outer(np.asarray(positions, dtype=float), _freqs(d, base) - _freqs(d, old_base))


def _added(x, positions, base, old_base=None):
    return _turn(x, np.asarray(positions, dtype=float), base)  # the old rotation never undone


def _difference_reversed(x, positions, base, old_base=None):
    return _turn_by(x, -_angles(x, positions, base, old_base))


def _bases_divided(x, positions, base, old_base=None):
    return _turn(x, np.asarray(positions, dtype=float), base / (1.0 if old_base is None else old_base))


def _interleaved(x, positions, base, old_base=None):
    a = _angles(x, positions, base, old_base)
    out = np.empty_like(x)
    out[:, 0::2] = x[:, 0::2] * np.cos(a) - x[:, 1::2] * np.sin(a)
    out[:, 1::2] = x[:, 0::2] * np.sin(a) + x[:, 1::2] * np.cos(a)
    return out


def _wrong_frequencies(x, positions, base, old_base=None):
    # base ** (-i / d): the exponent's 2 forgotten
    return _turn_by(x, _angles(x, positions, base**0.5, None if old_base is None else old_base**0.5))


def _rebase_cases() -> list[Case]:
    rng = np.random.default_rng(2121)
    cases = [Case("x = [[0, 1, 0, 0]] (pair 1) rotated at position 100 with base 10000, to base 500000",
                  (an.apply_rotary(np.array([[0.0, 1.0, 0.0, 0.0]]), [100], 1e4), [100], 5e5, 1e4)),
             Case("x = [[1, 0]] rotated at position 5 with base 10000, to base 500000 (d = 2: one pair)",
                  (an.apply_rotary(np.array([[1.0, 0.0]]), [5], 1e4), [5], 5e5, 1e4))]
    for T, d, positions, base, old_base in (
            (3, 8, [0, 1, 2], 1e4, None),
            (5, 16, [68, 69, 70, 71, 72], 5e5, 1e4),
            (4, 8, [4000, 0, 17, 17], 100.0, 1e4),
            (6, 16, [3, 9, 27, 81, 243, 729], 1e4, 1e4),
            (3, 64, [1000, 30000, 131071], 1e6, 1e4),
            (4, 8, [7, 6, 5, 4], 1e4, 5e5)):
        raw = rng.normal(size=(T, d))
        if old_base is None:
            label, x = "not rotated yet", raw
        else:
            label, x = f"rotated with base {old_base:g}", an.apply_rotary(raw, positions, old_base)
        cases.append(Case(f"random keys of shape ({T}, {d}) at positions {positions}, {label}, to base {base:g}",
                          (x, positions, base) + (() if old_base is None else (old_base,))))
    return cases


check_rebase_rotary = Checker(
    name="rebase_rotary",
    doc="Check ``fn(x, positions, base, old_base=None) -> (T, d)``: the rows of ``x`` (``(T, d)``), rotated at "
        "``positions`` with frequencies ``old_base ** (-2 i / d)`` (None: not rotated), rotated instead at the "
        "same positions with ``base``, in chapter 21's pairing: pair ``(x_i, x_{i + d/2})`` turned by "
        "``position * base ** (-2 i / d)``.",
    reference=_rebase_reference,
    cases=_rebase_cases(),
    mistakes=(
        Mistake(_added, "the keys are already rotated with the old base: turning them by position * theta_new "
                "adds the new angles to the old ones; turn pair i by the difference, p (theta_new_i - "
                "theta_old_i)."),
        Mistake(_difference_reversed, "the difference goes from the old angle to the new one: p (theta_new_i - "
                "theta_old_i), turned counter-clockwise ((a, b) goes to (a cos - b sin, a sin + b cos))."),
        Mistake(_bases_divided, "the angles subtract, the bases do not divide: base_new ** (-2i/d) - "
                "base_old ** (-2i/d) is not (base_new / base_old) ** (-2i/d)."),
        Mistake(_interleaved, "this chapter pairs dimension i with i + d/2 (the rotate-half layout), not with i + 1."),
        Mistake(_wrong_frequencies, "the frequencies are base ** (-2 i / d) for pair i = 0 .. d/2 - 1, "
                "the exponents of chapter 11."),
    ),
    atol=1e-9,
    forbidden=(an.apply_rotary, an.apply_rotary_complex, an.rotate_half, "attnbook.torch.apply_rotary",
               "attnbook.torch.apply_rotary_complex", "attnbook.torch.rotate_half",
               "attnbook.torch.rotary.RotaryTables.forward"),
)
