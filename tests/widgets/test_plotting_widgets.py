"""Figures are labelled and show what they claim; the widget recomputes when a slider moves."""

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
import pytest

from attnbook.plotting import draw_vectors, plot_dot_vs_cosine, plot_matrix, plot_points
from attnbook.widgets import dot_vs_cosine


def assert_labelled(ax):
    assert ax.get_xlabel() and ax.get_ylabel(), "every axis needs a label"


def test_static_plots_are_labelled():
    fig, axes = plt.subplots(2, 3)
    draw_vectors(axes[0, 0], [np.array([1.0, 0.0]), np.array([0.0, 2.0])], ["u", "v"])
    plot_points(axes[0, 1], np.array([[0.0, 1.0], [1.0, 0.0]]), ["a", "b"], "x feature", "y feature")
    plot_dot_vs_cosine(axes[1, 0], axes[1, 1])
    for ax in (axes[0, 0], axes[0, 1], axes[1, 0], axes[1, 1]):
        assert_labelled(ax)
    plot_matrix(axes[0, 2], np.eye(2), ["r1", "r2"], ["c1", "c2"], "identity", "value")
    assert [t.get_text() for t in axes[0, 2].get_xticklabels()] == ["c1", "c2"]
    assert fig.axes[-1].get_ylabel() == "value"  # the colour bar


def test_dot_vs_cosine_curves_show_length_in_dot_but_not_in_cosine():
    fig, (ax_dot, ax_cos) = plt.subplots(1, 2)
    plot_dot_vs_cosine(ax_dot, ax_cos, lengths=(0.5, 2.0))
    dot_curves = [line.get_ydata() for line in ax_dot.get_lines() if len(line.get_ydata()) > 2]
    cos_curves = [line.get_ydata() for line in ax_cos.get_lines() if len(line.get_ydata()) > 2]
    assert [round(float(c[0]), 6) for c in dot_curves] == [0.5, 2.0]  # at angle 0, dot = |v|
    np.testing.assert_allclose(cos_curves[0], cos_curves[1])
    assert cos_curves[0][0] == pytest.approx(1.0) and cos_curves[0][-1] == pytest.approx(-1.0)


def test_dot_vs_cosine_widget_recomputes_on_slider_change():
    box = dot_vs_cosine()
    angle, length, out = box.children
    assert isinstance(angle, widgets.FloatSlider) and isinstance(length, widgets.FloatSlider)
    assert isinstance(out, widgets.Output)
    assert (angle.min, angle.max) == (0.0, 180.0) and length.min > 0
    angle.value = 90.0
    assert plt.gcf().axes[0].get_title() == "u · v = 0.00    cos(u, v) = 0.00"
    angle.value = 0.0
    length.value = 2.0
    assert plt.gcf().axes[0].get_title() == "u · v = 2.00    cos(u, v) = 1.00"


def test_next_char_widget_follows_the_temperature():
    import torch

    from attnbook.data import CharTokenizer
    from attnbook.torch import GPT, GPTConfig
    from attnbook.widgets import next_char_temperature

    torch.manual_seed(0)
    tok = CharTokenizer("abc\n ")
    model = GPT(GPTConfig(vocab_size=5, block_size=8, n_layers=1, n_heads=1, d_model=8))
    slider, out = next_char_temperature(model, tok, "abc ab").children
    slider.value = 0.1
    ax = plt.gcf().axes[0]
    assert ax.get_title() == "after 'abc ab', temperature 0.10" and ax.get_ylabel() == "probability"
    heights = [p.get_height() for p in ax.patches]
    assert heights == sorted(heights, reverse=True) and sum(heights) == pytest.approx(1.0)


def test_attention_browser_switches_layer_and_head():
    from attnbook.widgets import attention_browser

    maps = {"layer 0": np.stack([np.eye(4), np.tril(np.ones((4, 4))) / np.arange(1, 5)[:, None]]),
            "layer 1": np.stack([np.eye(4)] * 3)}
    layer, head = attention_browser(maps, "ab c").children[0].children
    head.value = 1
    ax = plt.gcf().axes[0]
    assert ax.get_title() == "layer 0, head 1" and ax.get_xlabel() == "key (attended to)"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["a", "b", "␣", "c"]
    np.testing.assert_allclose(ax.images[0].get_array(), maps["layer 0"][1])
    layer.value = "layer 1"
    assert plt.gcf().axes[0].get_title() == "layer 1, head 1"


def test_controls_lists_every_control_with_its_range():
    from attnbook.widgets import attention_browser, controls, mask_explorer, softmax_temperature

    assert controls(softmax_temperature()) == {"temperature": (0.03162, 31.62, 1.0)}
    assert controls(mask_explorer(5)) == {"length of sequence 0": (0, 5, 5), "length of sequence 1": (0, 5, 3),
                                          "causal": (True,)}
    maps = {"layer 0": np.zeros((3, 4, 4)), "layer 1": np.zeros((3, 4, 4))}
    assert controls(attention_browser(maps, "abcd")) == {"attention": (("layer 0", "layer 1"), "layer 0"),
                                                         "head": (0, 2, 0)}
