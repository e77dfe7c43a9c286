"""Part V's interactive figures: where a vision Transformer's head looks from one patch (chapter 26), what
fine-tuning learns of a new text and forgets of the old one (chapter 27), and a head's attention on a repeated
sequence, one query at a time (chapter 28). They use only what ipywidgets 7 and 8 share, since Colab ships 7.

Chapter 27's figures take the recorded runs: a dict from a run's name (``"full"``, ``"rank 4"``, ...) to a dict
with ``trainable`` (the number of parameters trained), ``steps`` (the steps at which both losses were measured,
starting at 0) and ``new`` and ``old`` (the validation losses on the new text and on the old one at those steps).
"""

from __future__ import annotations

from collections.abc import Sequence

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.patches import Rectangle

from attnbook.widgets._common import _int_slider

# --- chapter 26: the vision Transformer --------------------------------------------------------------------


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


# --- chapter 27: fine-tuning and LoRA ---------------------------------------------------------------------

def _check_runs(runs: dict[str, dict]) -> None:
    if not runs:
        raise ValueError("runs is empty: give at least one recorded run")
    for name, run in runs.items():
        missing = [k for k in ("trainable", "steps", "new", "old") if k not in run]
        if missing:
            raise ValueError(f"run {name!r} lacks {missing}; each run needs 'trainable', 'steps', 'new' and 'old'")
        if not len(run["steps"]) == len(run["new"]) == len(run["old"]):
            raise ValueError(f"run {name!r}: steps, new and old must have one entry each per measurement; got "
                             f"{len(run['steps'])}, {len(run['new'])} and {len(run['old'])}")


def lora_curves_figure(runs: dict[str, dict], chosen: str, total: int, new_name: str = "new text",
                       old_name: str = "old text"):
    """Two panels, the loss on the new text and on the old one against the fine-tuning step, every run in
    grey and ``chosen`` in colour; the title gives its trainable parameters as a share of ``total``, the
    model's parameter count (chapter 27). Returns the figure."""
    _check_runs(runs)
    if chosen not in runs:
        raise ValueError(f"chosen must be one of {list(runs)}; got {chosen!r}")
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    for ax, key, what in zip(axes, ("new", "old"), (new_name, old_name), strict=True):
        for name, run in runs.items():
            if name != chosen:
                ax.plot(run["steps"], run[key], "o-", color="0.75", ms=3, lw=1)
        run = runs[chosen]
        ax.plot(run["steps"], run[key], "o-", color="C0" if key == "new" else "C3", lw=2, label=chosen)
        ax.set_xlabel("fine-tuning step")
        ax.set_ylabel(f"validation loss on {what} (nats)")
        ax.set_title(f"{what}: {run[key][0]:.2f} at the start, {run[key][-1]:.2f} at the end", fontsize=10)
        ax.legend(fontsize=8)
    trainable = runs[chosen]["trainable"]
    fig.suptitle(f"{chosen}: {trainable:,} trainable parameters, {trainable / total:.2%} of the model's {total:,} "
                 "(grey: the other runs)", fontsize=11)
    fig.tight_layout()
    return fig


def lora_explorer(runs: dict[str, dict], total: int, new_name: str = "new text",
                  old_name: str = "old text") -> widgets.VBox:
    """A drop-down over the recorded runs, drawing ``lora_curves_figure`` for the one chosen (chapter 27).

    Going down the ranks to full fine-tuning, the trainable parameters grow; the drawing shows what each run
    learned of the new text and lost of the old one, step by step."""
    _check_runs(runs)
    names = list(runs)
    run = widgets.Dropdown(options=names, value=names[0], description="fine-tuning",
                           style={"description_width": "initial"})

    def draw(name: str) -> None:
        lora_curves_figure(runs, name, total, new_name, old_name)
        plt.show()

    out = widgets.interactive_output(draw, {"name": run})
    return widgets.VBox([run, out])


def forgetting_figure(runs: dict[str, dict], new_name: str = "new text", old_name: str = "old text"):
    """The trade-off as training goes: each run's loss on the old text (x) against its loss on the new one (y)
    at every measurement, a line from where the base model starts (the runs' common first measurement) through
    each recorded step to a large dot where the run ends, labelled with its trainable parameters (chapter 27).
    Down is learning, right is forgetting; at one height, the run further left has forgotten less for the same
    learning. Returns the figure."""
    _check_runs(runs)
    first = next(iter(runs.values()))
    fig, ax = plt.subplots(figsize=(8, 4.5))
    ax.plot(first["old"][0], first["new"][0], "k*", ms=12, label="base model, before fine-tuning")
    for k, (name, run) in enumerate(runs.items()):
        ax.plot(run["old"], run["new"], ".-", color=f"C{k}", ms=5, lw=1, alpha=0.6)  # every measurement, in order
        ax.plot(run["old"][-1], run["new"][-1], "o", color=f"C{k}", ms=8,
                label=f"{name}: {run['trainable']:,} trainable")
    steps = ", ".join(str(s) for s in first["steps"])
    ax.set_xlabel(f"validation loss on {old_name} (nats; right: forgotten)")
    ax.set_ylabel(f"validation loss on {new_name} (nats; down: learned)")
    ax.set_title(f"what each way of fine-tuning learns and forgets, measured at steps {steps}", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


# --- chapter 28: induction heads ---------------------------------------------------------------------------

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
    query = _int_slider("query position", min(T - 1, T // 2 + 2), T - 1, low=1)

    def draw(name: str, t: int) -> None:
        fig, (ax_map, ax_row) = plt.subplots(1, 2, figsize=(13, 4), gridspec_kw={"width_ratios": [1, 2.2]})
        plot_head_query(ax_map, ax_row, maps[name], labels, t, int(targets[t]), name)
        fig.tight_layout()
        plt.show()

    out = widgets.interactive_output(draw, {"name": head, "t": query})
    return widgets.VBox([widgets.HBox([head, query]), out])
