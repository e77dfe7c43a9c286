"""The Newton-Schulz widget of chapter 25 draws what the iteration does to a matrix's singular values."""

import matplotlib.pyplot as plt
import numpy as np
import torch

from attnbook.training.muon import CUBIC, QUINTIC, newton_schulz
from attnbook.widgets import NS_ITERATIONS, controls, newton_schulz_explorer, newton_schulz_figure


def test_the_widget_offers_muons_coefficients():
    assert NS_ITERATIONS == {"quintic (Muon)": QUINTIC, "cubic (classic)": CUBIC}


def test_figure_shows_the_singular_values_of_the_matrix_iteration():
    # the figure iterates a scalar polynomial; the matrix iteration's singular values must be the same numbers
    G = torch.randn(12, 30, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    s = torch.linalg.svdvals(G / torch.linalg.norm(G)).numpy()
    for name, coefficients in NS_ITERATIONS.items():
        fig = newton_schulz_figure(s, 3, name)
        ax_map, ax_sv = fig.axes
        after = ax_sv.lines[1].get_ydata()
        want = torch.linalg.svdvals(newton_schulz(G, 3, coefficients)).numpy()
        np.testing.assert_allclose(np.sort(after)[::-1], want, rtol=1e-9)
        np.testing.assert_array_equal(ax_sv.lines[0].get_ydata(), s)
        for ax in (ax_map, ax_sv):
            assert ax.get_xlabel() and ax.get_ylabel() and ax.get_title()
        plt.close(fig)


def test_zero_steps_leave_the_values_and_the_map_is_the_identity():
    s = np.array([0.9, 0.3, 0.01])
    fig = newton_schulz_figure(s, 0)
    ax_map, ax_sv = fig.axes
    grid, mapped = ax_map.lines[0].get_data()
    np.testing.assert_array_equal(grid, mapped)
    np.testing.assert_array_equal(ax_sv.lines[1].get_ydata(), s)
    plt.close(fig)


def test_explorer_controls_and_redraw():
    box = newton_schulz_explorer(np.array([0.8, 0.4, 0.05]))
    iterations = ("quintic (Muon)", "cubic (classic)")
    assert controls(box) == {"steps": (0, 12, 5), "iteration": (iterations, "quintic (Muon)")}
    steps, iteration = box.children[0].children
    steps.value, iteration.value = 7, "cubic (classic)"
    ax_map, ax_sv = plt.gcf().axes
    assert ax_map.get_title().startswith("cubic (classic)") and "after 7 steps" in ax_sv.get_title()
