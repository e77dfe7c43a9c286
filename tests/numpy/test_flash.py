"""The online softmax and tiled attention against the package's plain softmax and attention, and twins."""

import numpy as np
import pytest
import torch

import attnbook.numpy as an
import attnbook.torch as at
from attnbook.numpy.flash import (
    flash_attention_backward,
    online_normalizer,
    online_softmax,
    tile_schedule,
    tiled_attention,
)


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


def _masks(rng, batch, T_q, T_k):
    """No mask, a random mask with one fully masked query, a padding mask, the causal mask."""
    random = rng.random(batch + (T_q, T_k)) < 0.7
    random[(0,) * len(batch) + (T_q // 2,)] = False  # one query that may attend nowhere
    lengths = rng.integers(1, T_k + 1, size=batch)
    padding = (np.arange(T_k) < lengths[..., None])[..., None, :]  # (..., 1, T_k): keys past each length hidden
    return ((None, False), (random, False), (padding, False), (None, True), (padding, True))


@pytest.mark.parametrize("seed", range(8))
def test_flash_backward_equals_chapter_19_and_autograd(seed):
    from attnbook.numpy.backprop.attention import attention_backward, attention_forward

    Q, K, V, _, bq, bk = _random_case(100 + seed)
    rng = np.random.default_rng(seed)
    batch, T_q, T_k = Q.shape[:-2], Q.shape[-2], K.shape[-2]
    dO = rng.normal(size=batch + (T_q, V.shape[-1]))
    for mask, causal in _masks(rng, batch, T_q, T_k):
        full = an.combine_masks(mask, an.causal_mask(T_q, T_k)) if causal and mask is not None else (
            an.causal_mask(T_q, T_k) if causal else mask)
        out, lse = tiled_attention(Q, K, V, mask=mask, causal=causal, block_q=bq, block_k=bk, return_lse=True)
        got = flash_attention_backward(Q, K, V, out, dO, lse, mask=mask, causal=causal, block_q=bq, block_k=bk)
        O19, cache = attention_forward(Q, K, V, mask=full)
        np.testing.assert_allclose(out, O19, rtol=1e-12, atol=1e-12)
        for g, want in zip(got, attention_backward(dO, cache), strict=True):
            np.testing.assert_allclose(g, want, rtol=1e-11, atol=1e-12)
        # autograd through PyTorch's own attention (rows with no allowed key excluded: its softmax gives NaN there)
        q, k, v = (torch.from_numpy(a).requires_grad_() for a in (Q, K, V))
        m = None if full is None else torch.from_numpy(np.broadcast_to(full, batch + (T_q, T_k)).copy())
        live = np.ones(batch + (T_q,), dtype=bool) if m is None else m.numpy().any(-1)
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=m)
        (out.nan_to_num() * torch.from_numpy(dO * live[..., None])).sum().backward()
        for g, t in zip(got, (q, k, v), strict=True):
            np.testing.assert_allclose(g, t.grad.numpy(), rtol=1e-10, atol=1e-11)


def test_flash_backward_lse_and_torch_twin():
    rng = np.random.default_rng(3)
    Q, K, V = rng.normal(size=(2, 20, 4)), rng.normal(size=(2, 27, 4)), rng.normal(size=(2, 27, 3))
    mask = rng.random((2, 20, 27)) < 0.5
    mask[1, 4] = False
    out, lse = tiled_attention(Q, K, V, mask=mask, causal=True, block_q=6, block_k=5, return_lse=True)
    scores = torch.from_numpy(Q @ K.transpose(0, 2, 1) / 2.0).masked_fill(
        ~torch.from_numpy(mask & an.causal_mask(20, 27)), float("-inf"))
    np.testing.assert_allclose(lse, torch.logsumexp(scores, -1).numpy(), rtol=1e-13)
    assert np.isneginf(lse[1, 4])
    dO = rng.normal(size=out.shape)
    args = (Q, K, V, out, dO, lse)
    want = flash_attention_backward(*args, mask=mask, causal=True, block_q=6, block_k=5)
    O_t, lse_t = at.tiled_attention(*(torch.from_numpy(a) for a in (Q, K, V)), mask=torch.from_numpy(mask),
                                    causal=True, block_q=6, block_k=5, return_lse=True)
    np.testing.assert_allclose(O_t.numpy(), out, rtol=1e-13, atol=1e-15)
    np.testing.assert_array_equal(np.isneginf(lse_t.numpy()), np.isneginf(lse))
    got = at.flash_attention_backward(*(torch.from_numpy(a) for a in args), mask=torch.from_numpy(mask), causal=True,
                                      block_q=6, block_k=5)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g.numpy(), w, rtol=1e-12, atol=1e-13)
    np.testing.assert_array_equal(want[0][1, 4], 0.0)  # a query that attends nowhere gets no gradient


def _peak_bytes(fn, *args, **kwargs):
    import tracemalloc

    tracemalloc.start()
    try:
        fn(*args, **kwargs)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_flash_backward_memory_is_linear_in_T():
    from attnbook.numpy.backprop.attention import attention_backward, attention_forward

    rng = np.random.default_rng(4)
    peaks, plain = [], []
    for T in (256, 1024):
        Q, K, V, dO = rng.normal(size=(4, T, 16))
        out, lse = tiled_attention(Q, K, V, block_q=64, block_k=64, return_lse=True)
        peaks.append(_peak_bytes(flash_attention_backward, Q, K, V, out, dO, lse, block_q=64, block_k=64))
        plain.append(_peak_bytes(lambda Q=Q, K=K, V=V, dO=dO: attention_backward(dO, attention_forward(Q, K, V)[1])))
    assert peaks[1] / peaks[0] < 4.5  # four times the length: at most four times the memory, plus noise
    assert plain[1] / plain[0] > 12  # the plain pair keeps P: close to sixteen times
    assert peaks[1] < 8 * 1024 * 16 * 3 + 1.5 * 2**20  # the three gradients and a workspace of tiles


def test_flash_backward_rejects_bad_shapes():
    Q = np.zeros((4, 2))
    with pytest.raises(ValueError, match="lse must have shape"):
        flash_attention_backward(Q, Q, Q, Q, Q, np.zeros(3))
    with pytest.raises(ValueError, match="dO must have the shape of the output"):
        flash_attention_backward(Q, Q, Q, Q, np.zeros((4, 3)), np.zeros(4))
    with pytest.raises(ValueError, match="lse must have shape"):
        at.flash_attention_backward(*(torch.zeros(4, 2) for _ in range(5)), torch.zeros(5))
