"""The chapter 16 figures draw exactly the numbers they are given."""

import matplotlib.pyplot as plt
import numpy as np
import pytest

from attnbook.plotting import plot_cross_attention, plot_length_generalisation


def test_length_generalisation_draws_the_accuracies_in_percent_and_shades_the_trained_lengths():
    lengths = list(range(3, 12))
    acc = np.linspace(1.0, 0.0, len(lengths))
    fig, ax = plt.subplots()
    plot_length_generalisation(ax, lengths, acc, (2, 8), "t")
    (line,) = ax.get_lines()
    np.testing.assert_array_equal(line.get_xdata(), lengths)
    np.testing.assert_allclose(line.get_ydata(), acc * 100)
    (span,) = ax.patches
    x = span.get_patch_transform().transform(span.get_path().vertices)[:, 0]  # a Rectangle or a Polygon
    np.testing.assert_allclose([x.min(), x.max()], [1.5, 8.5])
    assert ax.get_xlabel() and ax.get_ylabel() and ax.get_title() == "t"
    with pytest.raises(ValueError, match="same length"):
        plot_length_generalisation(ax, lengths, acc[:-1], (2, 8), "t")


def test_cross_attention_draws_the_weights_with_token_labels_and_outlines():
    rng = np.random.default_rng(0)
    w = rng.dirichlet(np.ones(4), size=5)  # 5 output rows over 4 source tokens
    fig, ax = plt.subplots()
    plot_cross_attention(ax, w, "1234", ["4", "3", "2", "1", "end"], "title", expected=[3, 2, 1, 0, -1])
    np.testing.assert_array_equal(ax.images[0].get_array(), w)
    assert [t.get_text() for t in ax.get_xticklabels()] == list("1234")
    assert [t.get_text() for t in ax.get_yticklabels()] == ["4", "3", "2", "1", "end"]
    outlined = sorted((int(p.get_x() + 0.5), int(p.get_y() + 0.5)) for p in ax.patches)
    assert outlined == [(0, 3), (1, 2), (2, 1), (3, 0)]
    # every cell written in, with its weight to two decimals
    assert sorted(t.get_text() for t in ax.texts) == sorted(f"{v:.2f}" for v in w.ravel())
    assert ax.get_xlabel() and ax.get_ylabel()
    with pytest.raises(ValueError, match="shape"):
        plot_cross_attention(ax, w.T, "1234", ["4", "3", "2", "1", "end"], "title")
    with pytest.raises(ValueError, match="one source position per output row"):
        plot_cross_attention(ax, w, "1234", ["4", "3", "2", "1", "end"], "title", expected=[0])
