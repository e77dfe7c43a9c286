"""The widgets of chapters 10, 12, 13 and 14: they build, state their controls, and draw what the math gives."""

import matplotlib.pyplot as plt
import numpy as np
import pytest

from attnbook.numpy import conv1d_as_attention, offset_attention_weights
from attnbook.plotting import (
    plot_convolution_heads,
    plot_decoder_dependence,
    plot_lookup_weights,
    plot_norm_placement,
)
from attnbook.torch.inspect import lookup_batch
from attnbook.widgets import (
    controls,
    convolution_heads,
    decoder_dependence,
    lookup_noise,
    norm_placement_depth,
)


def test_convolution_heads_widget_states_its_controls():
    explorer = convolution_heads(T=6)
    assert controls(explorer) == {"kernel size k": (1, 7, 3), "query position i": (0, 5, 0)}


@pytest.mark.parametrize("T, k", [(8, 1), (8, 3), (6, 5), (5, 7)])
def test_convolution_heads_draws_the_heads_of_the_kernel(T, k):
    fig, ax = plt.subplots()
    drawn = plot_convolution_heads(ax, T, k, query=0)
    offsets = list(range(-(k // 2), k // 2 + 1))
    heads = offset_attention_weights(T, offsets)
    # Each drawn cell is read by exactly one head, the one whose offset it shows.
    np.testing.assert_array_equal(~np.isnan(drawn), heads.sum(axis=0) == 1)
    for o, A in zip(offsets, heads, strict=True):
        np.testing.assert_array_equal(drawn == o, A == 1)
    np.testing.assert_array_equal(ax.images[0].get_array().mask, np.isnan(drawn))
    assert ax.get_xlabel() and ax.get_ylabel() and ax.get_title()


def test_convolution_heads_band_is_where_a_convolution_reads():
    # Output i of a convolution changes when input j changes exactly where the band is drawn.
    T, k = 7, 5
    fig, ax = plt.subplots()
    drawn = plot_convolution_heads(ax, T, k)
    kernel = np.ones((1, 1, k))
    influence = np.stack([conv1d_as_attention(np.eye(T)[:, [j]], kernel)[:, 0] for j in range(T)], axis=1)
    np.testing.assert_array_equal(influence != 0, ~np.isnan(drawn))


def _decoder_influence():
    import torch

    import attnbook.torch as at

    torch.manual_seed(1)
    T, S, d = 6, 5, 8
    dec = at.DecoderBlock(d, 2, 16).double()
    x = torch.randn(1, T, d, dtype=torch.float64)
    mem = torch.randn(1, S, d, dtype=torch.float64)
    mem_mask = torch.tensor([[[True] * 3 + [False] * 2]])

    def influence(f, inputs):
        J = torch.autograd.functional.jacobian(f, inputs)
        return J[0, :, :, 0].pow(2).sum(dim=(1, 3)).sqrt().numpy()

    return (influence(lambda inp: dec(inp, mem, memory_mask=mem_mask), x),
            influence(lambda m: dec(x, m, memory_mask=mem_mask), mem))


def test_decoder_dependence_widget_states_its_controls():
    self_inf, mem_inf = _decoder_influence()
    assert controls(decoder_dependence(self_inf, mem_inf)) == {"target position t": (0, 5, 0)}


@pytest.mark.parametrize("t", [0, 2, 5])
def test_decoder_dependence_draws_the_causal_row_and_the_real_source(t):
    self_inf, mem_inf = _decoder_influence()
    fig, (a, b) = plt.subplots(1, 2)
    row_self, row_mem = plot_decoder_dependence(a, b, self_inf, mem_inf, t)
    # What the causal mask and the source padding mask allow, computed from the masks themselves.
    causal = np.tril(np.ones((6, 6), dtype=bool))[t]
    real = np.array([True] * 3 + [False] * 2)
    np.testing.assert_array_equal(row_self > 0, causal)
    np.testing.assert_array_equal(row_mem > 0, real)
    heights = sorted(round(p.get_height(), 12) for p in a.patches)
    assert heights == sorted(round(float(v), 12) for v in self_inf[t][causal])
    assert len(b.patches) == real.sum()
    for ax in (a, b):
        assert ax.get_xlabel() and ax.get_ylabel() and ax.get_title()
    # The legend names the red cross only in a panel that draws one.
    for ax, row in ((a, row_self), (b, row_mem)):
        labels = [text.get_text() for text in ax.get_legend().get_texts()]
        assert ("exactly 0" in labels) == bool((row == 0).any())


def _measure(norm_first, n_layers, d=16, seed=0):
    # The chapter's measurement, smaller: RMS leaving each block, gradient norm reaching its fc1.W.
    import torch
    import torch.nn.functional as F

    import attnbook.torch as at

    gen = torch.Generator().manual_seed(seed)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        blocks = [at.EncoderBlock(d, 2, 2 * d, norm_first=norm_first) for _ in range(n_layers)]
    x = torch.randn(2, 5, d, generator=gen)
    sizes = []
    for block in blocks:
        x = block(x)
        sizes.append(x.pow(2).mean().sqrt().item())
    out = at.LayerNorm(d)(x) if norm_first else x
    F.cross_entropy(out.reshape(-1, d), torch.randint(0, d, (10,), generator=gen)).backward()
    return sizes, [block.ff.fc1.W.grad.norm().item() for block in blocks]


def test_norm_placement_widget_states_its_controls():
    runs = {n: {"post": _measure(False, n), "pre": _measure(True, n)} for n in (2, 3)}
    assert controls(norm_placement_depth(runs)) == {"number of blocks": ((2, 3), 2)}


def test_norm_placement_draws_the_measured_curves():
    post, pre = _measure(False, 4), _measure(True, 4)
    fig, (a, b) = plt.subplots(1, 2)
    plot_norm_placement(a, b, post, pre)
    for ax, k in ((a, 0), (b, 1)):
        lines = ax.get_lines()
        np.testing.assert_array_equal(lines[0].get_xdata(), [1, 2, 3, 4])
        np.testing.assert_array_equal(lines[0].get_ydata(), post[k])
        np.testing.assert_array_equal(lines[1].get_ydata(), pre[k])
        assert ax.get_xlabel() and ax.get_ylabel()
    # Post-norm ends every block in a layer norm with gamma = 1, beta = 0: RMS exactly 1 up to eps.
    np.testing.assert_allclose(post[0], 1.0, rtol=1e-4)
    assert f"post {post[1][-1] / post[1][0]:.2f}, pre {pre[1][-1] / pre[1][0]:.2f}" in b.get_title()


def test_lookup_widget_states_its_controls_and_draws_the_layers_weights():
    import torch

    import attnbook.torch as at

    torch.manual_seed(0)
    layer = at.MultiHeadAttention(16, 1)
    explorer = lookup_noise(layer)
    assert controls(explorer) == {"query noise": (0.0, 2.0, 0.3), "example": (0, 15, 0)}
    weights, pick = lookup_batch(layer, 0.3, n=5)
    # The same weights, computed directly from the layer's projections (one head, so no output mixing).
    g = torch.Generator().manual_seed(1)
    context = torch.nn.functional.normalize(torch.randn(5, 8, 16, generator=g), dim=-1)
    chosen = torch.randint(0, 8, (5,), generator=g)
    query = context[torch.arange(5), chosen] + 0.3 * torch.randn(5, 16, generator=g) / 4
    with torch.no_grad():
        q = query @ layer.W_q + layer.b_q  # (5, 16), the row convention
        k = context @ layer.W_k + layer.b_k  # (5, 8, 16)
        expected = torch.softmax((k @ q[:, :, None])[..., 0] / 16**0.5, dim=-1)
    np.testing.assert_array_equal(pick, chosen.numpy())
    np.testing.assert_allclose(weights, expected.numpy(), rtol=1e-5, atol=1e-6)
    fig, ax = plt.subplots()
    plot_lookup_weights(ax, weights[0], int(pick[0]), "one example")
    np.testing.assert_allclose([p.get_height() for p in ax.patches], weights[0])
    assert ax.get_xlabel() and ax.get_ylabel()
