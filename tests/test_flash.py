"""The online softmax and tiled attention against the package's plain softmax and attention, and twins."""

import numpy as np
import pytest
import torch

import attnbook.numpy as an
import attnbook.torch as at
from attnbook.numpy.flash import online_normalizer, online_softmax, tile_schedule, tiled_attention


@pytest.mark.parametrize("block_size", [1, 3, 7, 64])
def test_online_softmax_equals_softmax(block_size):
    rng = np.random.default_rng(block_size)
    x = rng.normal(size=(5, 4, 23)) * 30  # large spread: the running max changes often
    np.testing.assert_allclose(online_softmax(x, block_size), an.softmax(x), rtol=1e-13, atol=1e-15)


def test_online_softmax_extreme_values_and_masked_rows():
    x = np.array([[1000.0, -1000.0, 999.0, 1001.0],
                  [-np.inf, -np.inf, -np.inf, -np.inf],
                  [-np.inf, -np.inf, 3.0, -np.inf],
                  [-1e300, 1e300, 0.0, -np.inf]])
    for block_size in (1, 2, 3):
        got = online_softmax(x, block_size)
        assert np.all(np.isfinite(got))
        np.testing.assert_allclose(got, an.softmax(x), rtol=1e-13, atol=1e-300)


def test_online_normalizer_matches_max_and_sum_and_its_history():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3, 17)) * 5
    m, ell = online_normalizer(x, 4)
    np.testing.assert_array_equal(m, x.max(axis=-1))
    np.testing.assert_allclose(ell, np.exp(x - x.max(axis=-1, keepdims=True)).sum(axis=-1), rtol=1e-13)
    ms, ls = online_normalizer(x, 4, history=True)
    assert ms.shape == ls.shape == (5, 3)
    for i, end in enumerate((4, 8, 12, 16, 17)):  # after block i the stats are those of the first `end` entries
        top = x[:, :end].max(axis=-1)
        np.testing.assert_array_equal(ms[i], top)
        np.testing.assert_allclose(ls[i], np.exp(x[:, :end] - top[:, None]).sum(axis=-1), rtol=1e-13)


def test_online_softmax_torch_twin():
    x = np.random.default_rng(1).normal(size=(4, 19)) * 10
    x[1, :5] = -np.inf
    x[2] = -np.inf
    np.testing.assert_allclose(at.online_softmax(torch.from_numpy(x), 4).numpy(), online_softmax(x, 4),
                               rtol=1e-13, atol=1e-300)
    for a, b in zip(at.online_normalizer(torch.from_numpy(x), 5, history=True), online_normalizer(x, 5, history=True),
                    strict=True):
        np.testing.assert_allclose(a.numpy(), b, rtol=1e-13)


def _random_case(seed):
    rng = np.random.default_rng(seed)
    batch = tuple(rng.integers(1, 3, size=rng.integers(0, 3)))
    T_q, T_k = int(rng.integers(1, 40)), int(rng.integers(1, 40))
    d_k, d_v = int(rng.integers(1, 9)), int(rng.integers(1, 9))
    Q, K, V = (rng.normal(size=batch + s) for s in ((T_q, d_k), (T_k, d_k), (T_k, d_v)))
    mask = rng.random(batch + (T_q, T_k)) < 0.7
    block_q, block_k = int(rng.integers(1, 20)), int(rng.integers(1, 20))
    return Q, K, V, mask, block_q, block_k


@pytest.mark.parametrize("seed", range(12))
def test_tiled_equals_plain_with_masks_and_causal(seed):
    Q, K, V, mask, bq, bk = _random_case(seed)
    T_q, T_k = Q.shape[-2], K.shape[-2]
    causal = an.causal_mask(T_q, T_k)
    for kwargs, ref_mask in (({}, None), ({"mask": mask}, mask), ({"causal": True}, causal),
                             ({"mask": mask, "causal": True}, mask & causal)):
        want = an.scaled_dot_product_attention(Q, K, V, mask=ref_mask)[0]
        got = tiled_attention(Q, K, V, block_q=bq, block_k=bk, **kwargs)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_tiled_torch_twin_and_broadcast_mask():
    rng = np.random.default_rng(5)
    Q, K, V = rng.normal(size=(2, 3, 30, 4)), rng.normal(size=(2, 3, 41, 4)), rng.normal(size=(2, 3, 41, 6))
    mask = rng.random((2, 1, 1, 41)) < 0.8  # a padding-style mask that broadcasts over heads and queries
    want = an.scaled_dot_product_attention(Q, K, V, mask=mask & an.causal_mask(30, 41))[0]
    got_np = tiled_attention(Q, K, V, mask=mask, causal=True, block_q=7, block_k=9)
    got_torch = at.tiled_attention(*(torch.from_numpy(a) for a in (Q, K, V)), mask=torch.from_numpy(mask),
                                   causal=True, block_q=7, block_k=9)
    np.testing.assert_allclose(got_np, want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got_torch.numpy(), want, rtol=1e-12, atol=1e-12)


def test_tiled_torch_matches_pytorch_sdpa():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 4, 50, 8, generator=g, dtype=torch.float64) for _ in range(3))
    want = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(at.tiled_attention(q, k, v, causal=True, block_q=16, block_k=8), want)


def test_fully_masked_query_gives_zero_output():
    rng = np.random.default_rng(2)
    Q, K, V = rng.normal(size=(6, 3)), rng.normal(size=(8, 3)), rng.normal(size=(8, 2))
    mask = np.ones((6, 8), dtype=bool)
    mask[2] = False
    got = tiled_attention(Q, K, V, mask=mask, block_q=4, block_k=3)
    np.testing.assert_array_equal(got[2], 0.0)
    np.testing.assert_allclose(got, an.scaled_dot_product_attention(Q, K, V, mask=mask)[0], atol=1e-14)


def test_tile_schedule_skips_exactly_the_fully_masked_tiles():
    for T_q, T_k, bq, bk in ((16, 16, 4, 4), (10, 23, 3, 5), (7, 7, 7, 1), (12, 12, 5, 3)):
        schedule = tile_schedule(T_q, T_k, bq, bk, causal=True)
        causal = an.causal_mask(T_q, T_k)
        for i, q0 in enumerate(range(0, T_q, bq)):
            for j, k0 in enumerate(range(0, T_k, bk)):
                assert schedule[i, j] == causal[q0:q0 + bq, k0:k0 + bk].any()
        assert tile_schedule(T_q, T_k, bq, bk).all()


@pytest.mark.parametrize("bad", [0, -1, 2.5, True])
def test_bad_block_sizes_are_rejected(bad):
    Q = np.zeros((4, 2))
    with pytest.raises(ValueError, match="block_q must be a positive integer"):
        tiled_attention(Q, Q, Q, block_q=bad)
    with pytest.raises(ValueError, match="block_size must be a positive integer"):
        online_softmax(np.zeros(3), block_size=bad)


def test_bad_shapes_and_masks_are_rejected():
    Q = np.zeros((4, 2))
    with pytest.raises(ValueError, match="same last dimension"):
        tiled_attention(Q, np.zeros((4, 3)), np.zeros((4, 3)))
    with pytest.raises(ValueError, match="does not fit"):
        tiled_attention(Q, Q, Q, mask=np.ones((3, 4), dtype=bool))
    with pytest.raises(ValueError, match="boolean"):
        tiled_attention(Q, Q, Q, mask=np.ones((4, 4)))
