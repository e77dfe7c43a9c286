"""The normalisation widget of chapter 22 draws LayerNorm and RMSNorm of the shifted, scaled input."""

import matplotlib.pyplot as plt
import numpy as np
import torch

from attnbook.plotting import plot_norm_outputs
from attnbook.widgets import controls, norm_shift_scale

X = np.array([0.5, -1.0, 2.0, 0.0, -0.5, 1.5])


def test_plot_norm_outputs_matches_torch_nn_layernorm_and_rmsnorm():
    for shift, scale in ((0.0, 1.0), (2.5, 0.5), (-3.0, 4.0)):
        fig, axes = plt.subplots(1, 3)
        layer, rms = plot_norm_outputs(axes, X, shift, scale)
        z = torch.tensor(scale * X + shift)
        ln = torch.nn.LayerNorm(6, dtype=torch.float64)
        rn = torch.nn.RMSNorm(6, eps=1e-5, dtype=torch.float64)
        with torch.no_grad():
            np.testing.assert_allclose(layer, ln(z).numpy(), rtol=1e-10, atol=1e-12)
            np.testing.assert_allclose(rms, rn(z).numpy(), rtol=1e-10, atol=1e-12)
        heights = [[p.get_height() for p in ax.patches] for ax in axes]
        np.testing.assert_allclose(heights[0], z.numpy())
        np.testing.assert_allclose(heights[2], rms)
        assert all(ax.get_xlabel() and ax.get_ylabel() for ax in axes)


def test_norm_shift_scale_redraws_at_its_settings():
    box = norm_shift_scale(X)
    assert controls(box) == {"shift b (added to every component)": (-4.0, 4.0, 0.0), "scale s": (0.25, 4.0, 1.0)}
    shift, scale = box.children[0], box.children[1]
    shift.value, scale.value = 3.0, 2.0
    fig = plt.gcf()
    rms_bars = [p.get_height() for p in fig.axes[2].patches]
    z = 2.0 * X + 3.0
    np.testing.assert_allclose(rms_bars, z / np.sqrt(np.mean(z * z) + 1e-5))
