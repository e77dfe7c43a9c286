"""The interactive figure of chapter 26: where a vision Transformer's head looks from one patch of a digit.

It uses only what ipywidgets 7 and 8 share, since Colab ships 7.
"""

from __future__ import annotations

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Rectangle


def draw_patch_attention(ax, image: np.ndarray, weights: np.ndarray, patch_size: int, query: int,
                         title: str = "", vmax: float | None = None):
    """Draw ``image`` ``(H, W)`` in grey and over it the attention ``weights`` ``(N,)`` of patch ``query`` on
    the ``N`` patches (numbered row by row), each patch coloured by its weight; the query patch is outlined.
    Returns the image of the weights (for a colour bar). Chapter 26."""
    image, weights = np.asarray(image, dtype=float), np.asarray(weights, dtype=float)
    H, W = image.shape
    p = patch_size
    gh, gw = H // p, W // p
    if weights.shape != (gh * gw,):
        raise ValueError(f"weights must have shape ({gh * gw},), one per patch of a {gh} x {gw} grid; got "
                         f"{weights.shape}")
    if not 0 <= query < gh * gw:
        raise ValueError(f"query must be a patch from 0 to {gh * gw - 1}; got {query}")
    heat = np.kron(weights.reshape(gh, gw), np.ones((p, p)))  # (H, W): each patch's weight on its pixels
    ax.imshow(image, cmap="gray_r", vmin=0, vmax=1)
    top = vmax if vmax is not None else max(float(weights.max()), 1e-9)
    shown = ax.imshow(heat, cmap="Reds", alpha=0.65, vmin=0, vmax=top)  # white (no weight) lets the ink show
    qi, qj = divmod(query, gw)
    ax.add_patch(Rectangle((qj * p - 0.5, qi * p - 0.5), p, p, fill=False, edgecolor="C0", lw=2.5))
    for k in range(1, gh):
        ax.axhline(k * p - 0.5, color="0.7", lw=0.5)
    for k in range(1, gw):
        ax.axvline(k * p - 0.5, color="0.7", lw=0.5)
    ax.set_xticks(range(0, W, p))
    ax.set_yticks(range(0, H, p))
    ax.set_xlabel("pixel column")
    ax.set_ylabel("pixel row")
    if title:
        ax.set_title(title, fontsize=9)
    return shown


def patch_attention_grid(image: np.ndarray, maps: np.ndarray, patch_size: int, query: int, label: str = ""):
    """A grid of panels, one per layer (rows) and head (columns): the attention of patch ``query`` of
    ``image`` ``(H, W)`` in each head, from ``maps`` ``(L, h, N, N)``, all on one colour scale. Returns the
    figure. Chapter 26."""
    maps = np.asarray(maps, dtype=float)
    L, h = maps.shape[:2]
    fig, axes = plt.subplots(L, h, figsize=(2.6 * h, 2.5 * L), squeeze=False)
    vmax = float(maps[:, :, query].max())
    for layer in range(L):
        for head in range(h):
            ax = axes[layer, head]
            shown = draw_patch_attention(ax, image, maps[layer, head, query], patch_size, query,
                                         f"layer {layer}, head {head}", vmax=vmax)
            if layer < L - 1:
                ax.set_xlabel("")
            if head:
                ax.set_ylabel("")
    fig.colorbar(shown, ax=axes, shrink=0.6, label="attention weight")
    fig.suptitle(f"attention from patch {query} (outlined){label}")
    return fig


def _int_slider(description: str, value: int, high: int) -> widgets.IntSlider:
    return widgets.IntSlider(value=value, min=0, max=high, description=description, continuous_update=False,
                             style={"description_width": "initial"},
                             layout=widgets.Layout(width="420px", max_width="100%"))


def patch_attention_explorer(images: np.ndarray, maps: np.ndarray, labels: np.ndarray, patch_size: int,
                             query: int = 5) -> widgets.VBox:
    """Sliders for a test digit, a layer, a head and a query patch; the figure shows where that head of that
    layer looks from that patch of that digit (chapter 26).

    ``images`` ``(n, H, W)``; ``maps`` ``(L, n, h, N, N)`` the attention weights of every layer on every image;
    ``labels`` ``(n,)`` the true digits.
    """
    images, maps = np.asarray(images, dtype=float), np.asarray(maps, dtype=float)
    L, n, h, N, _ = maps.shape
    digit = _int_slider("test digit", 0, n - 1)
    layer = _int_slider("layer", 0, L - 1)
    head = _int_slider("head", 0, h - 1)
    patch = _int_slider("query patch", query, N - 1)

    def draw(i: int, lay: int, hd: int, q: int) -> None:
        fig, ax = plt.subplots(figsize=(4.6, 4.2))
        shown = draw_patch_attention(ax, images[i], maps[lay, i, hd, q], patch_size, q,
                                     f"digit {int(labels[i])} (test image {i}): layer {lay}, head {hd}, "
                                     f"query patch {q}")
        fig.colorbar(shown, ax=ax, label="attention weight")
        fig.tight_layout()
        plt.show()

    out = widgets.interactive_output(draw, {"i": digit, "lay": layer, "hd": head, "q": patch})
    return widgets.VBox([widgets.HBox([digit, layer]), widgets.HBox([head, patch]), out])
