"""Chapter 18's ablation statistics: per-window losses against a loop over windows, the paired bootstrap
against a loop over resamples and against the normal approximation."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import attnbook.torch as at
from attnbook.torch.transformer import GPT
from attnbook.training.bootstrap import Interval, paired_bootstrap
from attnbook.training.lm import evaluate_loss, per_window_losses, preset


def small_gpt(seed: int = 0) -> GPT:
    torch.manual_seed(seed)
    return GPT(preset("tiny").model_config(vocab_size=30))


def test_per_window_losses_match_a_loop_over_windows():
    model, data, T = small_gpt(), torch.randint(30, (500,), generator=torch.Generator().manual_seed(1)), 16
    got = per_window_losses(model, data, T, batch_size=7)
    n = (len(data) - 1) // T
    assert got.shape == (n,)
    with torch.no_grad():
        for i in range(n):
            window = data[i * T:i * T + T + 1]
            expected = F.cross_entropy(model(window[None, :-1])[0], window[1:])
            torch.testing.assert_close(got[i], expected)
    # the windows of evaluate_loss, one loss each: equal lengths, so their mean is its loss
    assert float(got.mean()) == pytest.approx(evaluate_loss(model, data, T, batch_size=7), rel=1e-6)
    torch.testing.assert_close(per_window_losses(model, data, T, batch_size=64), got)  # batching changes nothing
    assert len(per_window_losses(model, data, T, batch_size=7, max_batches=2)) == 14
    assert model.training  # left in the mode it came in (evaluated in eval mode; dropout is 0 here)


def test_per_window_losses_see_an_ablation():
    model, data = small_gpt(), torch.randint(30, (400,), generator=torch.Generator().manual_seed(2))
    base = per_window_losses(model, data, 16)
    with at.ablate_heads(model.blocks[0].self_attn, [0, 1]):
        ablated = per_window_losses(model, data, 16)
    assert not torch.equal(base, ablated)
    torch.testing.assert_close(per_window_losses(model, data, 16), base)  # the hook is gone after the block


def test_paired_bootstrap_matches_a_loop_over_resamples():
    g = torch.Generator().manual_seed(3)
    a, b = torch.randn(50, generator=g), torch.randn(50, generator=g)
    got = paired_bootstrap(a, b, n_resamples=300, level=0.9, seed=7)
    diff = (a.double() - b.double()).numpy()
    picks = torch.randint(50, (300, 50), generator=torch.Generator().manual_seed(7)).numpy()  # the same draws
    means = [diff[row].mean() for row in picks]
    assert got.mean == pytest.approx(diff.mean(), abs=1e-12)
    assert got.low == pytest.approx(np.quantile(means, 0.05), abs=1e-12)
    assert got.high == pytest.approx(np.quantile(means, 0.95), abs=1e-12)
    assert paired_bootstrap(a, b, n_resamples=300, level=0.9, seed=7) == got  # seeded: repeats exactly


def test_paired_bootstrap_agrees_with_the_normal_approximation():
    # for a large sample the bootstrap distribution of the mean is close to normal, with standard error s / sqrt(n)
    g = torch.Generator().manual_seed(4)
    n = 4000
    b = torch.randn(n, generator=g, dtype=torch.float64)
    a = b + 0.05 + 0.5 * torch.randn(n, generator=g, dtype=torch.float64)
    got = paired_bootstrap(a, b, n_resamples=4000)
    diff = a - b
    half = 1.959964 * float(diff.std()) / math.sqrt(n)
    assert got.low == pytest.approx(float(diff.mean()) - half, abs=0.1 * half)
    assert got.high == pytest.approx(float(diff.mean()) + half, abs=0.1 * half)
    assert got.excludes_zero and got.low > 0
    # paired: what the two measurements share cancels, so the interval is far narrower than the spread of b
    assert got.high - got.low < 0.2 * float(b.std())


def test_paired_bootstrap_edge_cases():
    a = torch.arange(10.0)
    constant = paired_bootstrap(a + 0.25, a)  # the same difference on every item: no spread at all
    assert constant == Interval(0.25, 0.25, 0.25) and constant.excludes_zero
    swapped, straight = paired_bootstrap(a, a.flip(0)), paired_bootstrap(a.flip(0), a)
    assert swapped.mean == pytest.approx(-straight.mean, abs=1e-12) and not swapped.excludes_zero
    assert Interval(-0.2, -0.3, -0.1).excludes_zero and not Interval(0.1, -0.1, 0.3).excludes_zero
    with pytest.raises(ValueError, match="same shape"):
        paired_bootstrap(a, a[:5])
    with pytest.raises(ValueError, match="1 dimension"):
        paired_bootstrap(a[None], a[None])
    with pytest.raises(ValueError, match="at least 2 items"):
        paired_bootstrap(a[:1], a[:1])
    with pytest.raises(ValueError, match="level"):
        paired_bootstrap(a, a, level=1.0)
    with pytest.raises(ValueError, match="n_resamples"):
        paired_bootstrap(a, a, n_resamples=0)
