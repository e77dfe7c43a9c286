"""Chapter 19's figure and widget: labelled, with guide lines fitted to the ends they describe."""

import matplotlib.pyplot as plt
import numpy as np

from attnbook.plotting import plot_finite_difference_errors
from attnbook.widgets import finite_difference_step


def test_finite_difference_plot_fits_both_error_laws():
    steps = np.logspace(-12, -1, 45)
    u = 1.1e-16
    errors = 3.0 * steps**2 + 2.0 * u / steps  # the model of the two errors, exactly
    fig, ax = plt.subplots()
    plot_finite_difference_errors(ax, steps, errors, u, chosen=1e-6)
    assert ax.get_xlabel() and ax.get_ylabel()
    lines = {line.get_label(): line for line in ax.get_lines()}
    trunc = next(v for k, v in lines.items() if k.startswith("truncation")).get_ydata()
    rounding = next(v for k, v in lines.items() if k.startswith("rounding")).get_ydata()
    np.testing.assert_allclose(trunc[-1], errors[-1], rtol=1e-6)  # truncation dominates at large steps
    np.testing.assert_allclose(rounding[0], errors[0], rtol=1e-6)  # rounding at small ones
    assert "eps = 1e-06" in lines


def test_widget_slider_spans_the_steps():
    steps = np.logspace(-13, -1, 49)
    widget = finite_difference_step(steps, steps**2 + 1e-16 / steps, 1.1e-16)
    slider = widget.children[0]
    assert (slider.min, slider.max, slider.value) == (-13, -1, 1e-6)
    slider.value = 1e-3  # moving the slider redraws without error
