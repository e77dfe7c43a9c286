"""The widget and figure of chapter 26 draw each patch's attention weight over the pixels of that patch."""

import matplotlib.pyplot as plt
import numpy as np
import pytest

from attnbook.widgets import controls, draw_patch_attention, patch_attention_explorer, patch_attention_grid


def maps(L=2, n=3, h=2, N=16, seed=0):
    rng = np.random.default_rng(seed)
    e = np.exp(rng.normal(size=(L, n, h, N, N)))
    return e / e.sum(-1, keepdims=True)


def test_each_pixel_shows_the_weight_of_its_patch():
    rng = np.random.default_rng(1)
    image, weights = rng.random((8, 8)), rng.random(16)
    fig, ax = plt.subplots()
    draw_patch_attention(ax, image, weights, 2, query=5, title="t")
    heat = ax.images[1].get_array()
    for r in range(8):
        for c in range(8):
            assert heat[r, c] == weights[(r // 2) * 4 + c // 2]
    np.testing.assert_array_equal(ax.images[0].get_array(), image)
    outline = ax.patches[0]
    assert outline.get_xy() == (1.5, 1.5) and outline.get_width() == 2  # patch 5: grid row 1, column 1
    assert ax.get_xlabel() and ax.get_ylabel() and ax.get_title() == "t"
    plt.close(fig)
    with pytest.raises(ValueError, match=r"weights must have shape \(16,\)"):
        draw_patch_attention(plt.subplots()[1], image, weights[:15], 2, 0)
    with pytest.raises(ValueError, match="query must be a patch from 0 to 15"):
        draw_patch_attention(plt.subplots()[1], image, weights, 2, 16)
    plt.close("all")


def test_grid_has_a_panel_per_layer_and_head_on_one_scale():
    m = maps()[:, 0]  # (L, h, N, N)
    fig = patch_attention_grid(np.zeros((8, 8)), m, 2, query=9)
    panels = [ax for ax in fig.axes if ax.images]
    assert len(panels) == 4
    assert {ax.images[1].get_clim()[1] for ax in panels} == {m[:, :, 9].max()}
    plt.close(fig)


def test_explorer_controls_and_redraw():
    m = maps()
    box = patch_attention_explorer(np.zeros((3, 8, 8)), m, np.array([4, 7, 1]), 2)
    assert controls(box) == {"test digit": (0, 2, 0), "layer": (0, 1, 0), "head": (0, 1, 0),
                             "query patch": (0, 15, 5)}
    (digit, layer), (head, patch) = box.children[0].children, box.children[1].children
    digit.value, layer.value, head.value, patch.value = 2, 1, 1, 3
    ax = plt.gcf().axes[0]
    assert ax.get_title().startswith("digit 1 (test image 2): layer 1, head 1, query patch 3")
    np.testing.assert_allclose(ax.images[1].get_array()[::2, ::2].reshape(-1), m[1, 2, 1, 3])
    plt.close("all")
