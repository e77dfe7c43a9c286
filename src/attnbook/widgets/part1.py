"""Part I's interactive figures (chapters 1 to 11): similarity, softmax, lookups, scaling, masks, positions,
queries and keys, scores, heads, convolutions."""

from __future__ import annotations

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np

from attnbook.plotting import draw_vectors
from attnbook.widgets._common import _log_slider, _slider, _slider_layout


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


def softmax_temperature(scores: np.ndarray | None = None) -> widgets.VBox:
    """A slider for the temperature of a softmax over fixed scores (chapter 2).

    Low temperatures pile all weight on the largest score (argmax); high ones spread it evenly.
    """
    from attnbook.numpy import softmax
    from attnbook.plotting import plot_weights

    scores = np.array([2.0, 1.0, 0.5, -1.0, 3.0]) if scores is None else np.asarray(scores, dtype=float)
    temperature = _log_slider("temperature", 1.0, -1.5, 1.5)

    def draw(t: float) -> None:
        fig, ax = plt.subplots(figsize=(6, 3.5))
        plot_weights(ax, softmax(scores, temperature=t), [f"{s:g}" for s in scores],
                     title=f"softmax(scores / {t:.2f})")
        ax.set_xlabel("option, labelled by its score")
        plt.show()

    out = widgets.interactive_output(draw, {"t": temperature})
    return widgets.VBox([temperature, out])


def soft_lookup_sharpness(keys: np.ndarray, values: np.ndarray, xlabel: str, ylabel: str) -> widgets.VBox:
    """A slider for the sharpness of a soft lookup, and a query to look up (chapter 3).

    The curve is the lookup's answer for every query; the bars under it are the weights the chosen
    query gives each stored pair.
    """
    from attnbook.numpy import soft_lookup
    from attnbook.plotting import plot_soft_lookup

    sharpness = _log_slider("sharpness", 10.0, -1.0, 3.0)
    query = _slider("query", float(np.round(np.median(keys), 1)), float(keys.min()), float(keys.max()), 0.05)

    def draw(s: float, q: float) -> None:
        fig, (ax, ax_w) = plt.subplots(2, 1, figsize=(6.5, 5.5), height_ratios=(2, 1), sharex=True)
        plot_soft_lookup(ax, keys, values, [s], xlabel="", ylabel=ylabel)
        answer, weights = soft_lookup(np.array([q]), keys, values, sharpness=s)
        ax.plot([q], answer, "o", color="C3", ms=9, label=f"answer for query {q:.2f}: {answer[0]:.1f}")
        ax.legend(loc="upper left")
        ax.set_title(f"soft lookup at sharpness {s:.3g}")
        ax_w.bar(keys, weights[0], width=0.04, color="C3")
        ax_w.set_xlabel(xlabel)
        ax_w.set_ylabel("weight")
        plt.show()

    out = widgets.interactive_output(draw, {"s": sharpness, "q": query})
    return widgets.VBox([sharpness, query, out])


def attention_map_scaled_token(X: np.ndarray, labels: list[str], token: int) -> widgets.VBox:
    """Parameter-free self-attention weights ``softmax(X X^T)``, with a slider that stretches one
    token's vector (chapter 4): a long enough vector draws every token's attention to itself.
    """
    from attnbook.numpy import scaled_dot_product_attention
    from attnbook.plotting import plot_matrix

    factor = _slider(f"length factor of '{labels[token]}'", 1.0, 0.5, 4.0, 0.25)

    def draw(f: float) -> None:
        Xs = X.copy()
        Xs[token] *= f
        _, weights = scaled_dot_product_attention(Xs, Xs, Xs, scale=1.0)
        fig, ax = plt.subplots(figsize=(5.5, 4.5))
        plot_matrix(ax, weights, labels, labels, title=f"'{labels[token]}' stretched by {f:g}",
                    colorbar_label="attention weight", cmap="viridis", vmin=0.0, vmax=1.0)
        ax.set_xlabel("key (attended to)")
        ax.set_ylabel("query (attending)")
        plt.show()

    out = widgets.interactive_output(draw, {"f": factor})
    return widgets.VBox([factor, out])


def query_map_explorer(e: np.ndarray, Z: np.ndarray, W_q: np.ndarray, W_k: np.ndarray) -> widgets.VBox:
    """Sliders that rotate and scale the query map ``W_q`` of a 2-D single-query example (chapter 5).

    The keys stay put; rotating ``W_q`` changes which key the query matches, scaling it only sharpens or
    flattens the same preference.
    """
    from attnbook.plotting import plot_query_map

    angle = _slider("rotate W_q (degrees)", 0.0, -180.0, 180.0, 15.0)
    scale = _slider("scale W_q", 1.0, 0.25, 3.0, 0.25)

    def draw(a: float, s: float) -> None:
        fig, (ax_space, ax_weights) = plt.subplots(1, 2, figsize=(11, 4.5))
        plot_query_map(ax_space, ax_weights, e, Z, W_q, W_k, a, s)
        fig.tight_layout()
        plt.show()

    out = widgets.interactive_output(draw, {"a": angle, "s": scale})
    return widgets.VBox([widgets.HBox([angle, scale]), out])


def scaling_by_dimension() -> widgets.VBox:
    """A slider for the dimension ``d``: softmax weights with and without dividing by sqrt(d) (chapter 6)."""
    from attnbook.plotting import plot_scaled_vs_unscaled

    exponent = widgets.IntSlider(value=2, min=0, max=10, description="log2 of the dimension d",
                                 continuous_update=False, style={"description_width": "initial"},
                                 layout=_slider_layout())

    def draw(k: int) -> None:
        fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.3))
        plot_scaled_vs_unscaled(a, b, 2**k)
        fig.tight_layout()
        plt.show()

    out = widgets.interactive_output(draw, {"k": exponent})
    return widgets.VBox([exponent, out])


def score_landscape_explorer(scorers: dict, length: float = 1.0) -> widgets.VBox:
    """A drop-down for the scoring function and sliders for a 2-D query's direction and length; the
    figure shows the score of every key in a square of the key plane (chapter 7).

    ``scorers`` takes a name to a scorer on 2-D queries and keys, such as ``attnbook.numpy.DotScore()``.
    """
    from attnbook.plotting import plot_score_landscape

    names = list(scorers)
    which = widgets.Dropdown(options=names, value=names[0], description="score")
    angle = _slider("query direction (degrees)", 30.0, 0.0, 345.0, 15.0)
    size = _slider("query length", length, 0.25, 3.0, 0.25)

    def draw(name: str, a: float, r: float) -> None:
        t = np.radians(a)
        q = r * np.array([np.cos(t), np.sin(t)])
        fig, ax = plt.subplots(figsize=(5.5, 4.6))
        plot_score_landscape(ax, scorers[name], q, f"{name} score, q = ({q[0]:.2f}, {q[1]:.2f})")
        fig.tight_layout()
        plt.show()

    out = widgets.interactive_output(draw, {"name": which, "a": angle, "r": size})
    return widgets.VBox([which, widgets.HBox([angle, size]), out])


def mask_explorer(T: int = 6) -> widgets.VBox:
    """Two padded sequences with their masks: sliders for the lengths, a box for causality (chapter 8)."""
    from attnbook.numpy import causal_mask, combine_masks, padding_mask
    from attnbook.plotting import plot_mask

    len_a = widgets.IntSlider(value=T, min=0, max=T, description="length of sequence 0",
                              continuous_update=False, style={"description_width": "initial"}, layout=_slider_layout())
    len_b = widgets.IntSlider(value=3, min=0, max=T, description="length of sequence 1",
                              continuous_update=False, style={"description_width": "initial"}, layout=_slider_layout())
    causal = widgets.Checkbox(value=True, description="causal")

    def draw(a: int, b: int, c: bool) -> None:
        masks = padding_mask(np.array([a, b]), T)
        mask = combine_masks(causal_mask(T), masks) if c else np.broadcast_to(masks, (2, T, T))
        fig, axes = plt.subplots(1, 2, figsize=(9, 4))
        for k, ax in enumerate(axes):
            plot_mask(ax, mask[k], f"sequence {k}: length {(a, b)[k]}" + (", causal" if c else ""))
        fig.tight_layout()
        plt.show()

    out = widgets.interactive_output(draw, {"a": len_a, "b": len_b, "c": causal})
    return widgets.VBox([len_a, len_b, causal, out])


def head_explorer(X: np.ndarray, tokens: list[str], heads: dict[str, tuple[np.ndarray, np.ndarray]],
                  sharpness: float = 4.0) -> widgets.VBox:
    """Choose a head and a query token: the token's attention over the sentence (chapter 9).

    ``heads`` takes a head's name to its ``(W_q, W_k)``; the weights are
    ``softmax(s (x W_q)(X W_k)^T)`` with the sharpening factor ``s`` on a slider.
    """
    from attnbook.numpy import scaled_dot_product_attention
    from attnbook.plotting import plot_weights

    names = list(heads)
    labels = [f"{i}: {t}" for i, t in enumerate(tokens)]
    head = widgets.Dropdown(options=names, value=names[0], description="head")
    token = widgets.Dropdown(options=labels, value=labels[1], description="query token")
    factor = _slider("sharpening factor s", sharpness, 0.0, 8.0, 0.5)

    def draw(name: str, label: str, s: float) -> None:
        W_q, W_k = heads[name]
        _, w = scaled_dot_product_attention(X @ (s * W_q), X @ W_k, X, scale=1.0)
        i = labels.index(label)
        fig, ax = plt.subplots(figsize=(6.5, 3.8))
        plot_weights(ax, w[i], labels, title=f"{name}: where '{tokens[i]}' looks (s = {s:g})")
        ax.set_xlabel("key token (attended to)")
        ax.set_ylabel("attention weight")
        fig.tight_layout()
        plt.show()

    out = widgets.interactive_output(draw, {"name": head, "label": token, "s": factor})
    return widgets.VBox([widgets.HBox([head, token]), factor, out])


def convolution_heads(T: int = 8) -> widgets.VBox:
    """Sliders for the kernel size and a query position: which keys the convolution's heads read (chapter 10).

    A kernel of size ``k`` is ``k`` one-hot heads, one per offset; a query reads at most ``k`` keys, fewer
    at the edges, where the zero padding leaves a head without a key. Attention may read all ``T``.
    """
    from attnbook.plotting import plot_convolution_heads

    size = widgets.IntSlider(value=3, min=1, max=7, step=2, description="kernel size k",
                             continuous_update=False, style={"description_width": "initial"}, layout=_slider_layout())
    query = widgets.IntSlider(value=0, min=0, max=T - 1, description="query position i",
                              continuous_update=False, style={"description_width": "initial"}, layout=_slider_layout())

    def draw(k: int, i: int) -> None:
        fig, ax = plt.subplots(figsize=(5.5, 4.8))
        drawn = plot_convolution_heads(ax, T, k, query=i)
        keys = np.flatnonzero(~np.isnan(drawn[i]))
        ax.set_title(f"kernel size {k}: query {i} reads keys {keys.min()}..{keys.max()} "
                     f"({len(keys)} of {T}; attention could read all {T})", fontsize=9)
        fig.tight_layout()
        plt.show()

    out = widgets.interactive_output(draw, {"k": size, "i": query})
    return widgets.VBox([widgets.HBox([size, query]), out])


def positional_encoding_explorer(T: int = 64, d_model: int = 32) -> widgets.VBox:
    """A slider for the position: its sinusoidal encoding, and its dot product with every position (chapter 11)."""
    from attnbook.numpy import sinusoidal_encoding

    pe = sinusoidal_encoding(T, d_model)
    position = widgets.IntSlider(value=10, min=0, max=T - 1, description="position",
                                 continuous_update=False, style={"description_width": "initial"},
                                 layout=_slider_layout())

    def draw(pos: int) -> None:
        fig, (ax_vec, ax_dot) = plt.subplots(1, 2, figsize=(11, 3.5))
        ax_vec.bar(range(d_model), pe[pos], color=["C0" if i % 2 == 0 else "C1" for i in range(d_model)])
        ax_vec.set_xlabel("dimension (blue: sin, orange: cos)")
        ax_vec.set_ylabel("value")
        ax_vec.set_ylim(-1.1, 1.1)
        ax_vec.set_title(f"PE({pos})")
        ax_dot.plot(range(T), pe @ pe[pos])
        ax_dot.axvline(pos, color="0.6", lw=0.8)
        ax_dot.set_xlabel("other position")
        ax_dot.set_ylabel(f"PE({pos}) · PE(other)")
        ax_dot.set_title("similarity peaks at the position itself")
        fig.tight_layout()
        plt.show()

    out = widgets.interactive_output(draw, {"pos": position})
    return widgets.VBox([position, out])
