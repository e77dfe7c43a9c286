"""The rotary widget of chapter 21 draws the rotated pair and the score it states."""

import matplotlib.pyplot as plt
import numpy as np

from attnbook.numpy import apply_rotary, rotary_frequencies
from attnbook.widgets import controls, rotary_explorer, rotary_figure


def test_rotary_figure_draws_the_score_against_the_offset():
    rng = np.random.default_rng(0)
    q, k = rng.normal(size=8), rng.normal(size=8)
    fig = rotary_figure(q, k, 9, 4, 1, max_offset=10)
    ax_pair, ax_score = fig.axes
    curve, marker = ax_score.lines
    offsets, scores = curve.get_data()
    np.testing.assert_array_equal(offsets, np.arange(-10, 11))
    # the score at each offset, by explicit rotation matrices at other absolute positions
    for o, s in zip(offsets, scores, strict=True):
        a = 30 + o
        want = apply_rotary(q[None], [a])[0] @ apply_rotary(k[None], [30])[0]
        np.testing.assert_allclose(s, want, rtol=1e-10)
    assert marker.get_data()[0][0] == 5
    np.testing.assert_allclose(marker.get_data()[1][0], apply_rotary(q[None], [9])[0] @ apply_rotary(k[None], [4])[0])
    assert f"{rotary_frequencies(8)[1]:.3g}" in ax_pair.get_title()
    for ax in (ax_pair, ax_score):
        assert ax.get_xlabel() and ax.get_ylabel()


def test_rotary_explorer_controls_and_redraw():
    rng = np.random.default_rng(1)
    q, k = rng.normal(size=16), rng.normal(size=16)
    box = rotary_explorer(q, k, max_position=32)
    assert controls(box) == {"query position m": (0, 32, 5), "key position n": (0, 32, 2), "pair i": (0, 7, 0)}
    m, n, pair = box.children[0].children
    m.value, n.value, pair.value = 20, 17, 3
    ax_pair, ax_score = plt.gcf().axes
    assert "m = 20, n = 17" in ax_score.get_title() and ax_pair.get_xlabel() == "dimension 3"
