"""A head's attention on a repeated sequence, one query at a time (chapter 28).

Uses only what ipywidgets 7 and 8 share, since Colab ships 7.
"""

from __future__ import annotations

from collections.abc import Sequence

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.patches import Rectangle

PREVIOUS, TARGET, OTHER = "C1", "C3", "0.65"  # bar colours: key t - 1, the induction target, every other key


def plot_head_query(ax_map: Axes, ax_row: Axes, weights: np.ndarray, labels: Sequence[str], query: int,
                    target: int, title: str) -> tuple[float, float]:
    """One head's map ``weights`` ``(T, T)`` with the row of ``query`` outlined (``ax_map``), and that row as
    bars over the keys (``ax_row``): key ``query - 1`` in orange, the induction ``target`` (-1 for none) in
    red. Returns the weights on those two keys (0 where a key does not exist). Chapter 28."""
    weights = np.asarray(weights, dtype=float)
    T = weights.shape[-1]
    if weights.shape != (T, T) or len(labels) != T:
        raise ValueError(f"weights must be (T, T) with T labels; got {weights.shape} and {len(labels)} labels")
    if not 0 <= query < T or not -1 <= target <= query:
        raise ValueError(f"need 0 <= query < {T} and -1 <= target <= query; got query {query}, target {target}")
    ax_map.imshow(weights, cmap="viridis", vmin=0.0, vmax=1.0)
    ax_map.add_patch(Rectangle((-0.5, query - 0.5), T, 1, fill=False, edgecolor="white", lw=1.5))
    ax_map.set_xlabel("key position")
    ax_map.set_ylabel("query position")
    ax_map.set_title(title, fontsize=9)
    row = weights[query]
    colors = [OTHER] * T
    if query >= 1:
        colors[query - 1] = PREVIOUS
    if target >= 0:
        colors[target] = TARGET
    ax_row.bar(range(T), row, color=colors)
    ax_row.set_xticks(range(T), list(labels), fontsize=7)
    ax_row.set_xlim(-0.5, T - 0.5)
    ax_row.set_ylim(0, 1)
    ax_row.set_xlabel("key (its token below); orange: the previous position, red: the induction target")
    ax_row.set_ylabel("attention weight")
    previous = float(row[query - 1]) if query >= 1 else 0.0
    on_target = float(row[target]) if target >= 0 else 0.0
    where = f"target {target}" if target >= 0 else "no target (first occurrence)"
    ax_row.set_title(f"query {query} (token {labels[query]}): {previous:.2f} on position {query - 1}, "
                     f"{on_target:.2f} on the {where}", fontsize=9)
    return previous, on_target


def induction_explorer(maps: dict[str, np.ndarray], labels: Sequence[str], targets: Sequence[int]) -> widgets.VBox:
    """A drop-down for the head (``maps`` takes a name such as ``"layer 1, head 2"`` to its ``(T, T)`` map)
    and a slider for the query position; ``targets[t]`` is query ``t``'s induction target, or -1.
    Chapter 28."""
    names = list(maps)
    T = len(labels)
    head = widgets.Dropdown(options=names, value=names[0], description="head")
    query = widgets.IntSlider(value=min(T - 1, T // 2 + 2), min=1, max=T - 1, description="query position",
                              continuous_update=False, style={"description_width": "initial"},
                              layout=widgets.Layout(width="460px", max_width="100%"))

    def draw(name: str, t: int) -> None:
        fig, (ax_map, ax_row) = plt.subplots(1, 2, figsize=(13, 4), gridspec_kw={"width_ratios": [1, 2.2]})
        plot_head_query(ax_map, ax_row, maps[name], labels, t, int(targets[t]), name)
        fig.tight_layout()
        plt.show()

    out = widgets.interactive_output(draw, {"name": head, "t": query})
    return widgets.VBox([widgets.HBox([head, query]), out])
