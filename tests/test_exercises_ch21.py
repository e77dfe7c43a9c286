"""Chapter 21's checkers accept answers computed another way and reject the typical mistakes by name."""

import numpy as np

from attnbook.exercises import check_apply_rotary, check_window_mask


def window_by_loops(T, window):
    return np.array([[0 <= i - j < window for j in range(T)] for i in range(T)])


def rotary_by_complex_numbers(x, positions, base):
    d = x.shape[-1]
    z = x[:, : d // 2] + 1j * x[:, d // 2:]
    z = z * np.exp(1j * np.outer(positions, base ** (-np.arange(0, d, 2) / d)))
    return np.concatenate([z.real, z.imag], axis=-1)


def rotary_by_matrices(x, positions, base):
    d = x.shape[-1]
    out = np.empty_like(x)
    for t, p in enumerate(positions):
        R = np.eye(d)
        for i in range(d // 2):
            a = p * base ** (-2 * i / d)
            R[np.ix_([i, i + d // 2], [i, i + d // 2])] = [[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]]
        out[t] = R @ x[t]
    return out


def test_answers_computed_another_way_pass():
    assert check_window_mask(window_by_loops)
    assert check_apply_rotary(rotary_by_complex_numbers)
    assert check_apply_rotary(rotary_by_matrices)


def test_a_rotation_of_the_wrong_size_or_a_transposed_mask_fails():
    assert not check_apply_rotary(lambda x, positions, base: rotary_by_matrices(x, 2 * np.asarray(positions), base))
    assert not check_window_mask(lambda T, window: window_by_loops(T, window).T)  # looks ahead, not back


def test_unattempted_exercises_say_so():
    def todo(*args):
        raise NotImplementedError

    assert not check_apply_rotary(todo).attempted and not check_window_mask(todo).attempted
