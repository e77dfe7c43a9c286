"""Interactive figures. They use only what ipywidgets 7 and 8 share, since Colab ships 7."""

from __future__ import annotations

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np

from attnbook.plotting import draw_vectors


def _slider(description: str, value: float, low: float, high: float, step: float) -> widgets.FloatSlider:
    return widgets.FloatSlider(
        value=value, min=low, max=high, step=step, description=description,
        continuous_update=False, style={"description_width": "initial"},
    )


def dot_vs_cosine() -> widgets.VBox:
    """Two vectors in the plane, with sliders for their angle and the length of ``v`` (chapter 1).

    Moving the length changes the dot product but never the cosine; moving the angle changes both.
    """
    angle = _slider("angle between u and v (degrees)", 60.0, 0.0, 180.0, 5.0)
    length = _slider("length of v", 1.5, 0.25, 3.0, 0.25)

    def draw(angle_deg: float, length_v: float) -> None:
        u = np.array([1.0, 0.0])
        theta = np.radians(angle_deg)
        v = length_v * np.array([np.cos(theta), np.sin(theta)])
        dot = float(u @ v)
        cos = dot / (np.linalg.norm(u) * np.linalg.norm(v))
        fig, ax = plt.subplots(figsize=(4.5, 4.5))
        draw_vectors(ax, [u, v], ["u", "v"], limit=3.3)
        ax.set_title(f"u · v = {dot:.2f}    cos(u, v) = {cos:.2f}")
        plt.show()

    out = widgets.interactive_output(draw, {"angle_deg": angle, "length_v": length})
    return widgets.VBox([angle, length, out])
