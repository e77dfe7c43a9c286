"""Causal, padding and combined masks, and what attention does with them."""

import numpy as np
import pytest

from attnbook.numpy import causal_mask, combine_masks, padding_mask, scaled_dot_product_attention

rng = np.random.default_rng(3)


def test_causal_mask_against_definition():
    m = causal_mask(4)
    assert m.dtype == bool and m.shape == (4, 4)
    assert all(m[i, j] == (j <= i) for i in range(4) for j in range(4))
    # Queries as the last T_q of T_k positions (generation with a cache of earlier keys).
    m2 = causal_mask(2, 5)
    assert m2.tolist() == [[True, True, True, True, False], [True, True, True, True, True]]
    with pytest.raises(ValueError, match="T_q >= 1 and T_k >= 1; got T_q=0"):
        causal_mask(0)


def test_padding_mask_against_definition():
    m = padding_mask(np.array([3, 1, 0]), T=4)
    assert m.shape == (3, 1, 4)
    assert m[:, 0].tolist() == [[True, True, True, False], [True, False, False, False], [False] * 4]
    with pytest.raises(ValueError, match=r"every length must lie in \[0, T=4\]; got \[5\]"):
        padding_mask(np.array([5]), T=4)
    with pytest.raises(ValueError, match="1-D array of integers"):
        padding_mask(np.array([1.5]), T=4)


def test_combined_mask_is_the_logical_and():
    combined = combine_masks(causal_mask(4), padding_mask(np.array([4, 2]), 4))
    assert combined.shape == (2, 4, 4)
    assert np.array_equal(combined[0], causal_mask(4))
    assert combined[1].tolist() == [[True, False, False, False], [True, True, False, False],
                                    [True, True, False, False], [True, True, False, False]]
    with pytest.raises(ValueError, match=r"masks of shapes \(3, 3\), \(2, 1, 4\) do not broadcast"):
        combine_masks(causal_mask(3), padding_mask(np.array([1, 2]), 4))
    with pytest.raises(ValueError, match="got dtype int64"):
        combine_masks(np.ones((2, 2), dtype=np.int64))


def test_padded_keys_change_nothing_and_fully_masked_rows_give_zeros():
    B, T, d = 2, 5, 4
    X = rng.normal(size=(B, T, d))
    lengths = np.array([5, 3])
    mask = combine_masks(causal_mask(T), padding_mask(lengths, T))
    out, weights = scaled_dot_product_attention(X, X, X, mask=mask)
    # Sequence 1 padded to 5 gives the same first 3 outputs as the unpadded sequence of length 3.
    short, _ = scaled_dot_product_attention(X[1, :3], X[1, :3], X[1, :3], mask=causal_mask(3))
    np.testing.assert_allclose(out[1, :3], short, rtol=1e-12)
    # Changing the padding's contents changes no output of a real position.
    X2 = X.copy()
    X2[1, 3:] = 1e6
    out2, _ = scaled_dot_product_attention(X2, X2, X2, mask=mask)
    np.testing.assert_allclose(out2[1, :3], out[1, :3], rtol=1e-12)
    # A row with no allowed key: zero weights, zero output, no NaN.
    empty = padding_mask(np.array([0]), T)
    out3, w3 = scaled_dot_product_attention(X[:1], X[:1], X[:1], mask=empty)
    assert not np.isnan(out3).any() and np.all(out3 == 0) and np.all(w3 == 0)
