"""Chapter 28's widget: the bars it draws are the query's row of the map, coloured by what they stand for, and
its controls redraw the head and query chosen."""

import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.colors import to_rgba

from attnbook.widgets import controls, induction_explorer, plot_head_query
from attnbook.widgets.part5 import OTHER, PREVIOUS, TARGET


def causal_map(T, seed):
    rng = np.random.default_rng(seed)
    w = np.tril(rng.random((T, T)))
    return w / w.sum(1, keepdims=True)


def test_the_bars_are_the_query_row_with_the_two_keys_coloured():
    w = causal_map(8, 0)
    fig, (ax_map, ax_row) = plt.subplots(1, 2)
    previous, on_target = plot_head_query(ax_map, ax_row, w, list("abcdabcd"), 6, 3, "a head")
    heights = [b.get_height() for b in ax_row.patches]
    np.testing.assert_allclose(heights, w[6])
    assert (previous, on_target) == (pytest.approx(w[6, 5]), pytest.approx(w[6, 3]))
    colours = [b.get_facecolor() for b in ax_row.patches]
    assert colours[5] == to_rgba(PREVIOUS) and colours[3] == to_rgba(TARGET) and colours[0] == to_rgba(OTHER)
    for ax in (ax_map, ax_row):
        assert ax.get_xlabel() and ax.get_ylabel()
    plt.close(fig)


def test_a_query_without_a_target_colours_only_the_previous_key():
    w = causal_map(5, 1)
    fig, (ax_map, ax_row) = plt.subplots(1, 2)
    previous, on_target = plot_head_query(ax_map, ax_row, w, list("abcde"), 2, -1, "a head")
    assert on_target == 0.0 and previous == pytest.approx(w[2, 1])
    colours = [b.get_facecolor() for b in ax_row.patches]
    assert colours.count(to_rgba(TARGET)) == 0 and colours.count(to_rgba(PREVIOUS)) == 1
    with pytest.raises(ValueError):
        plot_head_query(ax_map, ax_row, w, list("abcde"), 2, 3, "a target in the future")
    plt.close(fig)


def test_the_explorer_offers_every_head_and_query_and_redraws():
    maps = {"layer 1, head 0": causal_map(6, 2), "layer 2, head 1": causal_map(6, 3)}
    box = induction_explorer(maps, list("xyzxyz"), [-1, -1, -1, 1, 2, 3])
    assert controls(box) == {"head": (("layer 1, head 0", "layer 2, head 1"), "layer 1, head 0"),
                             "query position": (1, 5, 5)}
    head, query = box.children[0].children
    head.value, query.value = "layer 2, head 1", 4
    ax_map, ax_row = plt.gcf().axes[:2]
    np.testing.assert_allclose([b.get_height() for b in ax_row.patches], maps["layer 2, head 1"][4])
    assert ax_map.get_title() == "layer 2, head 1"
