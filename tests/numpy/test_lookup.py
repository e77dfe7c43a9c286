"""attnbook.numpy.soft_lookup against an explicit loop, and its exact and uniform limits."""

import math

import numpy as np
import pytest

from attnbook.numpy import soft_lookup

keys = np.array([1.0, 2.0, 3.0, 4.0])
values = np.array([10.0, 20.0, 40.0, 80.0])


def loop_lookup(q, keys, values, sharpness):
    w = [math.exp(-sharpness * (q - k) ** 2) for k in keys]
    total = sum(w)
    return sum(wi / total * v for wi, v in zip(w, values, strict=True))


def test_matches_loop():
    queries = np.array([0.5, 1.0, 2.7, 3.9])
    answers, weights = soft_lookup(queries, keys, values, sharpness=2.0)
    assert answers.shape == (4,) and weights.shape == (4, 4)
    for q, a in zip(queries, answers, strict=True):
        assert a == pytest.approx(loop_lookup(q, keys, values, 2.0), rel=1e-12)
    np.testing.assert_allclose(weights.sum(axis=1), 1.0)


def test_limits_exact_and_mean():
    exact, _ = soft_lookup(np.array([2.0, 3.1]), keys, values, sharpness=1e6)
    np.testing.assert_allclose(exact, [20.0, 40.0])  # the nearest key's value
    mean, _ = soft_lookup(np.array([2.0, 3.1]), keys, values, sharpness=0.0)
    np.testing.assert_allclose(mean, [values.mean()] * 2)


def test_vector_values():
    vals = np.stack([values, -values], axis=1)  # (n, 2)
    answers, _ = soft_lookup(np.array([2.5]), keys, vals, sharpness=1.0)
    assert answers.shape == (1, 2)
    assert answers[0, 1] == pytest.approx(-answers[0, 0])


def test_bad_input():
    expected = r"values must have shape \(n,\) or \(n, d_v\) with n = 4 keys; got shape \(3,\)"
    with pytest.raises(ValueError, match=expected):
        soft_lookup(np.array([1.0]), keys, values[:3])
    with pytest.raises(ValueError, match=r"queries must have 1 dimension.*got shape \(1, 1\)"):
        soft_lookup(np.array([[1.0]]), keys, values)
    with pytest.raises(ValueError, match="sharpness must be 0 or more; got -1"):
        soft_lookup(np.array([1.0]), keys, values, sharpness=-1)
