"""What the interactive figures share: slider layouts, and ``controls``, which lists a widget's controls
(for the chapters' assertions). They use only what ipywidgets 7 and 8 share, since Colab ships 7."""

from __future__ import annotations

import ipywidgets as widgets


def _slider_layout() -> widgets.Layout:
    """Room for a long description and the slider's track: at the default width (300 px) a description such
    as "angle between u and v (degrees)" takes the whole row and JupyterLab draws the slider without a track."""
    return widgets.Layout(width="560px", max_width="100%")


def _slider(description: str, value: float, low: float, high: float, step: float) -> widgets.FloatSlider:
    return widgets.FloatSlider(
        value=value, min=low, max=high, step=step, description=description,
        continuous_update=False, style={"description_width": "initial"}, layout=_slider_layout(),
    )


def _int_slider(description: str, value: int, high: int, low: int = 0) -> widgets.IntSlider:
    return widgets.IntSlider(
        value=value, min=low, max=high, description=description,
        continuous_update=False, style={"description_width": "initial"}, layout=_slider_layout(),
    )


def _log_slider(description: str, value: float, low_exp: float, high_exp: float) -> widgets.FloatLogSlider:
    return widgets.FloatLogSlider(
        value=value, base=10, min=low_exp, max=high_exp, step=0.05, description=description,
        continuous_update=False, style={"description_width": "initial"}, layout=_slider_layout(),
    )


def controls(widget: widgets.Widget) -> dict[str, tuple]:
    """The controls of an interactive figure, by description, so a chapter can state them in an assertion.

    A slider gives ``(lowest, highest, value)`` (a logarithmic slider in its own units, not exponents,
    rounded to 4 significant digits), a drop-down ``(options, value)``, a checkbox or a text box ``(value,)``.
    """
    found: dict[str, tuple] = {}

    def visit(w: widgets.Widget) -> None:
        if isinstance(w, widgets.FloatLogSlider):
            found[w.description] = tuple(float(f"{x:.4g}") for x in (w.base**w.min, w.base**w.max, w.value))
        elif isinstance(w, (widgets.FloatSlider, widgets.IntSlider)):
            found[w.description] = (w.min, w.max, w.value)
        elif isinstance(w, widgets.Dropdown):
            found[w.description] = (tuple(w.options), w.value)
        elif isinstance(w, widgets.Checkbox):
            found[w.description] = (w.value,)
        elif isinstance(w, widgets.Text):
            found[w.description] = (w.value,)
        for child in getattr(w, "children", ()):
            visit(child)

    visit(widget)
    return found
