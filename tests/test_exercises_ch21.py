"""Chapter 21's checkers accept answers computed another way and reject the typical mistakes by name."""

import numpy as np

from attnbook.exercises import check_ring_cache_mask, check_rotate_to
from attnbook.numpy import apply_rotary, sliding_window_mask


def ring_by_simulation(query_positions, window):
    # write the positions into a ring one by one, then ask sliding-window attention about each slot
    ring = [None] * window
    for p in range(max(query_positions) + 1):
        ring[p % window] = p
    allowed = sliding_window_mask(max(query_positions) + 1, window=window)
    return np.array([[held is not None and bool(allowed[q, held]) for held in ring] for q in query_positions])


def rotate_by_undo_and_redo(x, positions, base, rotated_at=None):
    # undo the first rotation with the transposed matrices, then rotate at the new position
    d = x.shape[-1]
    old = np.zeros(len(positions)) if rotated_at is None else np.asarray(rotated_at, dtype=float)
    out = np.empty_like(x)
    for t in range(len(positions)):
        R_old, R_new = np.eye(d), np.eye(d)
        for i in range(d // 2):
            pair = np.ix_([i, i + d // 2], [i, i + d // 2])
            for R, p in ((R_old, old[t]), (R_new, positions[t])):
                a = p * base ** (-2 * i / d)
                R[pair] = [[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]]
        out[t] = R_new @ (R_old.T @ x[t])
    return out


def test_answers_computed_another_way_pass():
    assert check_ring_cache_mask(ring_by_simulation)
    assert check_rotate_to(rotate_by_undo_and_redo)


def test_the_listed_mistakes_are_named():
    def slot_is_position(query_positions, window):
        q = np.asarray(query_positions)[:, None]
        s = np.arange(window)[None, :]
        return (s <= q) & (q - s < window)

    verdict = check_ring_cache_mask(slot_is_position)
    assert not verdict and "slot s holds the latest position" in verdict.message, verdict.message

    def added(x, positions, base, rotated_at=None):  # rotated again on top of the cached rotation
        return rotate_by_undo_and_redo(x, positions, base)

    verdict = check_rotate_to(added)
    assert not verdict and "adds the angles" in verdict.message, verdict.message


def test_a_delegating_answer_is_refused_by_name():
    verdict = check_rotate_to(lambda x, p, b, r=None: apply_rotary(x, np.asarray(p) - (0 if r is None else
                                                                                        np.asarray(r)), b))
    assert not verdict and "apply_rotary" in verdict.message, verdict.message


def test_plausible_wrong_answers_fail():
    # a transposed mask (keys after the query) and a rotation by twice the angle
    assert not check_ring_cache_mask(lambda q, w: ring_by_simulation(q, w)[:, ::-1])
    verdict = check_rotate_to(lambda x, p, b, r=None: rotate_by_undo_and_redo(x, 2 * np.asarray(p), b,
                                                                              None if r is None else 2 * np.asarray(r)))
    assert not verdict and verdict.attempted

    def mask_of_positions(query_positions, window):  # the whole (T_q, newest + 1) sliding mask, not the ring's
        return sliding_window_mask(max(query_positions) + 1, window=window)[query_positions]

    assert not check_ring_cache_mask(mask_of_positions)


def test_unattempted_exercises_say_so():
    def todo(*args):
        raise NotImplementedError

    assert not check_rotate_to(todo).attempted and not check_ring_cache_mask(todo).attempted
