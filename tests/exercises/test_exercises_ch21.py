"""Chapter 21's checkers accept answers computed another way and reject the typical mistakes by name."""

import numpy as np

from attnbook.exercises import check_rebase_rotary, check_ring_cache_mask
from attnbook.numpy import apply_rotary, sliding_window_mask


def ring_by_simulation(query_positions, window):
    # write the positions into a ring one by one, then ask sliding-window attention about each slot
    ring = [None] * window
    for p in range(max(query_positions) + 1):
        ring[p % window] = p
    return np.array([[held is not None and q - window < held <= q for held in ring] for q in query_positions])


def rebase_by_matrices(x, positions, base, old_base=None):
    # undo the old rotation with the transposed block matrix, then rotate with the new base
    d = x.shape[-1]
    out = np.empty_like(x)
    for t, p in enumerate(positions):
        R_old, R_new = np.eye(d), np.eye(d)
        for i in range(d // 2):
            pair = np.ix_([i, i + d // 2], [i, i + d // 2])
            for R, b in ((R_old, old_base), (R_new, base)):
                if b is not None:
                    a = p * b ** (-2 * i / d)
                    R[pair] = [[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]]
        out[t] = R_new @ (R_old.T @ x[t])
    return out


def test_answers_computed_another_way_pass():
    assert check_ring_cache_mask(ring_by_simulation)
    assert check_rebase_rotary(rebase_by_matrices)


def test_the_listed_mistakes_are_named():
    def slot_is_position(query_positions, window):
        q = np.asarray(query_positions)[:, None]
        s = np.arange(window)[None, :]
        return (s <= q) & (q - s < window)

    verdict = check_ring_cache_mask(slot_is_position)
    assert not verdict and "slot s holds the latest position" in verdict.message, verdict.message

    def added(x, positions, base, old_base=None):  # rotated with the new base on top of the old rotation
        return rebase_by_matrices(x, positions, base)

    verdict = check_rebase_rotary(added)
    assert not verdict and "adds the new angles" in verdict.message, verdict.message

    def bases_divided(x, positions, base, old_base=None):  # (new / old) ** (-2i/d) for the difference
        return rebase_by_matrices(x, positions, base / (1.0 if old_base is None else old_base))

    verdict = check_rebase_rotary(bases_divided)
    assert not verdict and "the bases do not divide" in verdict.message, verdict.message


def test_a_delegating_answer_is_refused_by_name():
    def undo_and_redo(x, positions, base, old_base=None):
        raw = x if old_base is None else apply_rotary(x, -np.asarray(positions, dtype=float), old_base)
        return apply_rotary(raw, positions, base)

    verdict = check_rebase_rotary(undo_and_redo)
    assert not verdict and "apply_rotary" in verdict.message, verdict.message


def test_plausible_wrong_answers_fail():
    # a transposed mask (keys after the query), and positions counted from 1
    assert not check_ring_cache_mask(lambda q, w: ring_by_simulation(q, w)[:, ::-1])

    def positions_from_one(x, positions, base, old_base=None):  # both angles taken one position late
        return rebase_by_matrices(x, np.asarray(positions) + 1, base, old_base)

    verdict = check_rebase_rotary(positions_from_one)
    assert not verdict and verdict.attempted

    def mask_of_positions(query_positions, window):  # the whole (T_q, newest + 1) sliding mask, not the ring's
        return sliding_window_mask(max(query_positions) + 1, window=window)[query_positions]

    assert not check_ring_cache_mask(mask_of_positions)


def test_unattempted_exercises_say_so():
    def todo(*args):
        raise NotImplementedError

    assert not check_rebase_rotary(todo).attempted and not check_ring_cache_mask(todo).attempted
