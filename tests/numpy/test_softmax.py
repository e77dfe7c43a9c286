"""attnbook.numpy.softmax against torch.softmax, the naive formula, and its limits."""

import numpy as np
import pytest
import torch

from attnbook.numpy import softmax

rng = np.random.default_rng(1)


def naive(x, axis=-1):
    e = np.exp(x)
    return e / e.sum(axis=axis, keepdims=True)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_matches_torch_and_the_naive_formula(axis):
    x = rng.normal(size=(3, 4, 5))
    expected = torch.softmax(torch.tensor(x), dim=axis).numpy()
    np.testing.assert_allclose(softmax(x, axis=axis), expected, rtol=1e-12)
    np.testing.assert_allclose(softmax(x, axis=axis), naive(x, axis), rtol=1e-12)


def test_large_scores_do_not_overflow():
    x = np.array([1000.0, 1001.0, 1002.0])
    with np.errstate(over="ignore", invalid="ignore"):
        assert np.isnan(naive(x)).all()  # the problem the max-subtraction solves
    np.testing.assert_allclose(softmax(x), softmax(x - 1000.0), rtol=1e-15)
    np.testing.assert_allclose(softmax(x), torch.softmax(torch.tensor(x), 0).numpy(), rtol=1e-12)
    assert softmax(np.array([-1000.0, -1001.0])).sum() == pytest.approx(1.0)


def test_temperature_matches_dividing_the_scores_and_has_the_right_limits():
    x = np.array([1.0, 3.0, 2.0, 3.0 - 1e-3])
    np.testing.assert_allclose(softmax(x, temperature=0.5), softmax(x / 0.5), rtol=1e-12)
    cold = softmax(x, temperature=1e-6)
    np.testing.assert_allclose(cold, [0.0, 1.0, 0.0, 0.0], atol=1e-12)  # argmax
    hot = softmax(x, temperature=1e6)
    np.testing.assert_allclose(hot, np.full(4, 0.25), atol=1e-5)  # uniform


def test_shift_invariance_and_single_element():
    x = rng.normal(size=7)
    np.testing.assert_allclose(softmax(x), softmax(x + 123.4), rtol=1e-12)
    assert softmax(np.array([5.0])).tolist() == [1.0]


def test_minus_infinity_means_ruled_out():
    x = np.array([[0.0, -np.inf, 1.0], [-np.inf, -np.inf, -np.inf]])
    out = softmax(x)
    np.testing.assert_allclose(out[0], torch.softmax(torch.tensor(x[0]), 0).numpy(), rtol=1e-12)
    assert out[0, 1] == 0.0
    assert out[1].tolist() == [0.0, 0.0, 0.0]  # defined as zeros, not NaN


def test_bad_input():
    with pytest.raises(ValueError, match="temperature must be positive; got 0"):
        softmax(np.ones(3), temperature=0)
    with pytest.raises(ValueError, match=r"axis 2 is out of range for x of shape \(3, 4\)"):
        softmax(np.ones((3, 4)), axis=2)
    with pytest.raises(ValueError, match="got a scalar"):
        softmax(3.0)
    with pytest.raises(ValueError, match="must hold numbers; got dtype bool"):
        softmax(np.array([True, False]))


def test_softmax_jacobian_matches_autograd():
    s = torch.tensor(rng.normal(size=6), dtype=torch.float64)
    expected = torch.autograd.functional.jacobian(lambda x: torch.softmax(x, 0), s).numpy()
    from attnbook.numpy import softmax_jacobian

    np.testing.assert_allclose(softmax_jacobian(softmax(s.numpy())), expected, rtol=1e-10, atol=1e-14)
    one_hot = softmax_jacobian(np.array([0.0, 1.0, 0.0]))
    assert np.all(one_hot == 0)  # a saturated softmax passes no gradient
    with pytest.raises(ValueError, match=r"one probability vector, shape \(n,\); got shape \(2, 2\)"):
        softmax_jacobian(np.ones((2, 2)) / 2)
