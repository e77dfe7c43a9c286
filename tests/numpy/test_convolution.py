"""A convolution rebuilt as multi-head attention equals np.convolve and torch.nn.functional.conv1d."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from attnbook.numpy import conv1d_as_attention, offset_attention_weights

rng = np.random.default_rng(6)


@pytest.mark.parametrize("T, C_in, C_out, k", [(10, 1, 1, 3), (12, 3, 4, 5), (4, 2, 2, 7)])
def test_matches_torch_conv1d(T, C_in, C_out, k):
    x, kernel = rng.normal(size=(T, C_in)), rng.normal(size=(C_out, C_in, k))
    expected = F.conv1d(torch.tensor(x.T[None]), torch.tensor(kernel), padding=k // 2)[0].numpy().T
    np.testing.assert_allclose(conv1d_as_attention(x, kernel), expected, rtol=1e-12, atol=1e-12)


def test_matches_np_convolve():
    x, w = rng.normal(size=15), rng.normal(size=3)
    # np.convolve flips the kernel (a true convolution); conv1d and attention do not (cross-correlation).
    expected = np.convolve(x, w, mode="same")
    got = conv1d_as_attention(x[:, None], w[::-1][None, None, :])[:, 0]
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)


def test_weights_are_one_hot_rows_or_zero_at_the_edges():
    A = offset_attention_weights(5, [-1, 0, 1])
    assert A.shape == (3, 5, 5)
    assert A[0, 0].sum() == 0 and A[2, 4].sum() == 0  # no key left of 0 or right of 4
    assert np.all(A[:, 1:4].sum(axis=-1) == 1)


def test_errors():
    with pytest.raises(ValueError, match=r"kernel must have shape \(C_out, C_in=2, k\) with k odd; got \(1, 2, 4\)"):
        conv1d_as_attention(np.ones((5, 2)), np.ones((1, 2, 4)))
