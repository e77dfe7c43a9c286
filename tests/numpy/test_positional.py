"""Sinusoidal encodings against their definition and against the relative-position identity."""

import math

import numpy as np
import pytest

from attnbook.numpy import relative_position_map, sinusoidal_encoding, sinusoidal_frequencies


def test_matches_the_formula_entry_by_entry():
    T, d = 7, 6
    pe = sinusoidal_encoding(T, d)
    for pos in range(T):
        for i in range(d // 2):
            angle = pos / 10000 ** (2 * i / d)
            assert pe[pos, 2 * i] == pytest.approx(math.sin(angle), abs=1e-15)
            assert pe[pos, 2 * i + 1] == pytest.approx(math.cos(angle), abs=1e-15)
    assert pe[0].tolist() == [0.0, 1.0] * 3  # position 0: sin 0 = 0, cos 0 = 1


@pytest.mark.parametrize("k", [1, 5, 37])
def test_shift_is_a_fixed_linear_map(k):
    pe = sinusoidal_encoding(100, 16)
    M = relative_position_map(k, 16)
    np.testing.assert_allclose(pe[:-k] @ M, pe[k:], atol=1e-12)
    np.testing.assert_allclose(M @ M.T, np.eye(16), atol=1e-12)  # a rotation: lengths are kept


def test_dot_products_depend_only_on_the_distance():
    pe = sinusoidal_encoding(60, 32)
    g = pe @ pe.T
    for k in (0, 3, 10):
        diag = np.diagonal(g, offset=k)
        np.testing.assert_allclose(diag, diag[0], atol=1e-10)
    omegas = sinusoidal_frequencies(32)
    np.testing.assert_allclose(g[0, 10], np.sum(np.cos(10 * omegas)), atol=1e-12)


def test_errors():
    with pytest.raises(ValueError, match="d_model must be even and at least 2.*got 5"):
        sinusoidal_encoding(3, 5)
    with pytest.raises(ValueError, match="T must be at least 1; got 0"):
        sinusoidal_encoding(0, 4)
