"""Interactive figures. They use only what ipywidgets 7 and 8 share, since Colab ships 7."""

from __future__ import annotations

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np

from attnbook.plotting import draw_vectors


def _slider_layout() -> widgets.Layout:
    """Room for a long description and the slider's track: at the default width (300 px) a description such
    as "angle between u and v (degrees)" takes the whole row and JupyterLab draws the slider without a track."""
    return widgets.Layout(width="560px", max_width="100%")


def _slider(description: str, value: float, low: float, high: float, step: float) -> widgets.FloatSlider:
    return widgets.FloatSlider(
        value=value, min=low, max=high, step=step, description=description,
        continuous_update=False, style={"description_width": "initial"}, layout=_slider_layout(),
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


def _log_slider(description: str, value: float, low_exp: float, high_exp: float) -> widgets.FloatLogSlider:
    return widgets.FloatLogSlider(
        value=value, base=10, min=low_exp, max=high_exp, step=0.05, description=description,
        continuous_update=False, style={"description_width": "initial"}, layout=_slider_layout(),
    )


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


def next_char_temperature(model, tokenizer, prompt: str) -> widgets.VBox:
    """A temperature slider over a trained model's next-character distribution after ``prompt`` (chapter 17)."""
    import torch

    from attnbook.plotting import plot_next_char

    with torch.no_grad():
        logits = model.eval()(tokenizer.encode(prompt)[None, -model.config.block_size:])[0, -1].double()
    temperature = _log_slider("temperature", 1.0, -1.0, 0.7)

    def draw(t: float) -> None:
        probs = torch.softmax(logits / t, dim=-1).numpy()
        fig, ax = plt.subplots(figsize=(8, 3.5))
        plot_next_char(ax, probs, tokenizer.chars, f"after {prompt[-24:]!r}, temperature {t:.2f}")
        fig.tight_layout()
        plt.show()

    out = widgets.interactive_output(draw, {"t": temperature})
    return widgets.VBox([temperature, out])


def attention_browser(maps: dict[str, np.ndarray], labels: str) -> widgets.VBox:
    """Browse attention maps: ``maps`` takes a layer's name to its weights ``(h, T_q, T_k)`` (chapter 18).

    ``labels`` holds the characters (or tokens) of the queries and keys.
    """
    from attnbook.plotting import plot_attention

    names = list(maps)
    layer = widgets.Dropdown(options=names, value=names[0], description="attention")
    head = widgets.IntSlider(value=0, min=0, max=maps[names[0]].shape[0] - 1, description="head",
                             continuous_update=False)

    def draw(name: str, h: int) -> None:
        fig, ax = plt.subplots(figsize=(6.5, 5.5))
        plot_attention(ax, np.asarray(maps[name][h]), labels, f"{name}, head {h}")
        fig.tight_layout()
        plt.show()

    out = widgets.interactive_output(draw, {"name": layer, "h": head})
    return widgets.VBox([widgets.HBox([layer, head]), out])


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


def finite_difference_step(steps: np.ndarray, errors: np.ndarray, unit_roundoff: float) -> widgets.VBox:
    """A slider for the step of a central difference, over its measured errors (chapter 19).

    Large steps are wrong by truncation (the error falls as ``eps^2``), small ones by rounding (it grows as
    ``u / eps``); the best step sits between, near ``u^(1/3)``.
    """
    from attnbook.plotting import plot_finite_difference_errors

    step = widgets.FloatLogSlider(value=1e-6, base=10, min=float(np.log10(steps.min())),
                                  max=float(np.log10(steps.max())), step=0.25, description="step eps",
                                  continuous_update=False, readout_format=".0e",
                                  style={"description_width": "initial"}, layout=_slider_layout())

    def draw(eps: float) -> None:
        i = int(np.argmin(np.abs(np.log(steps) - np.log(eps))))
        fig, ax = plt.subplots(figsize=(6.5, 4))
        plot_finite_difference_errors(ax, steps, errors, unit_roundoff, chosen=eps)
        ax.set_title(f"step {steps[i]:.0e}: error {errors[i]:.1e}")
        fig.tight_layout()
        plt.show()

    out = widgets.interactive_output(draw, {"eps": step})
    return widgets.VBox([step, out])
def tile_explorer(T: int = 64) -> widgets.VBox:
    """Sliders for the length and the tile size, a box for causality: which tiles tiled attention computes,
    and what share of the score matrix's work that is (chapter 20)."""
    from attnbook.numpy.flash import tile_schedule
    from attnbook.plotting import plot_tile_schedule

    length = widgets.IntSlider(value=T, min=8, max=256, step=8, description="T", continuous_update=False)
    block = widgets.IntSlider(value=16, min=4, max=64, step=4, description="tile size", continuous_update=False,
                              style={"description_width": "initial"}, layout=_slider_layout())
    causal = widgets.Checkbox(value=True, description="causal")

    def draw(t: int, b: int, c: bool) -> None:
        schedule = tile_schedule(t, t, b, b, c)
        pairs = t * (t + 1) // 2 if c else t * t
        computed = sum(min(b, t - q0) * min(b, t - k0) for i, q0 in enumerate(range(0, t, b))
                       for j, k0 in enumerate(range(0, t, b)) if schedule[i, j])
        fig, ax = plt.subplots(figsize=(4.8, 4.8))
        plot_tile_schedule(ax, t, b, c)
        ax.set_title(f"{int(schedule.sum())} of {schedule.size} tiles; scores computed {computed:,}, "
                     f"needed {pairs:,} ({computed / pairs:.2f}x)", fontsize=9)
        fig.tight_layout()
        plt.show()

    out = widgets.interactive_output(draw, {"t": length, "b": block, "c": causal})
    return widgets.VBox([widgets.HBox([length, block, causal]), out])


def bpe_split_explorer(tokenizer, text: str) -> widgets.VBox:
    """A slider over the number of merges of a trained ``BPETokenizer``: ``text`` cut into tokens by the
    first k merges, one coloured box per token (chapter 23)."""
    from attnbook.data.bpe import BPETokenizer
    from attnbook.plotting import plot_token_split

    n = widgets.IntSlider(value=min(50, len(tokenizer.merges)), min=0, max=len(tokenizer.merges),
                          description="merges", continuous_update=False)

    def draw(k: int) -> None:
        pieces = BPETokenizer(tokenizer.merges[:k], tokenizer.pattern).pieces(text)
        fig, ax = plt.subplots(figsize=(9, 2.2))
        plot_token_split(ax, pieces, f"first {k} merges: {len(pieces)} tokens for {len(text)} characters")
        fig.tight_layout()
        plt.show()

    out = widgets.interactive_output(draw, {"k": n})
    return widgets.VBox([n, out])


def fill_in_blank(model, tokenizer, line: str) -> widgets.VBox:
    """A slider that hides one character of ``line`` and shows what a masked language model guesses
    there (chapter 24). ``tokenizer`` is a ``MaskedCharTokenizer``; ``model`` maps ``(1, T)`` ids to
    ``(1, T, vocab_size)`` logits."""
    import torch

    from attnbook.plotting import plot_next_char

    ids = tokenizer.encode(line)
    masked = ids.repeat(len(line), 1)  # row t hides position t
    masked[torch.arange(len(line)), torch.arange(len(line))] = tokenizer.mask_id
    with torch.no_grad():
        logits = model.eval()(masked)[torch.arange(len(line)), torch.arange(len(line))].double()  # (T, V)
    probs = torch.softmax(logits, dim=-1).numpy()
    labels = tokenizer.chars + tokenizer.mask_symbol
    position = widgets.IntSlider(value=min(5, len(line) - 1), min=0, max=len(line) - 1,
                                 description="hidden position", continuous_update=False,
                                 style={"description_width": "initial"}, layout=_slider_layout())

    def draw(t: int) -> None:
        fig, ax = plt.subplots(figsize=(8, 3.5))
        shown = line[:t] + tokenizer.mask_symbol + line[t + 1:]
        plot_next_char(ax, probs[t], labels, f"{shown!r}: the hidden character is {line[t]!r}", top=12)
        ax.set_xlabel("guess for the hidden character (the 12 likeliest)")
        fig.tight_layout()
        plt.show()

    out = widgets.interactive_output(draw, {"t": position})
    box = widgets.VBox([position, out])
    box.probs = probs  # (T, V): the distribution at each hidden position, for checks
    return box


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


def decoder_dependence(self_influence: np.ndarray, memory_influence: np.ndarray) -> widgets.VBox:
    """A slider for the target position ``t``: what decoder output ``t`` depends on (chapter 14).

    Masked self-attention lets output ``t`` read target inputs ``0 .. t`` only; cross-attention lets it read
    every real source position, whatever ``t`` is. The matrices are Jacobian norms, ``(T, T)`` and ``(T, S)``.
    """
    from attnbook.plotting import plot_decoder_dependence

    position = widgets.IntSlider(value=0, min=0, max=self_influence.shape[0] - 1,
                                 description="target position t", continuous_update=False,
                                 style={"description_width": "initial"}, layout=_slider_layout())

    def draw(t: int) -> None:
        fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.6))
        plot_decoder_dependence(a, b, self_influence, memory_influence, t)
        fig.tight_layout()
        plt.show()

    out = widgets.interactive_output(draw, {"t": position})
    return widgets.VBox([position, out])


def norm_placement_depth(runs: dict[int, dict[str, tuple[list[float], list[float]]]]) -> widgets.VBox:
    """A drop-down for the depth of a stack: post-norm against pre-norm, block by block (chapter 13).

    ``runs[n]["post"]`` and ``runs[n]["pre"]`` are ``(sizes, grads)`` measured on an ``n``-block stack: the
    RMS leaving each block and the gradient norm reaching it. The deeper the stack, the more post-norm's
    gradients shrink towards the input and the more pre-norm's residual stream grows.
    """
    from attnbook.plotting import plot_norm_placement

    depths = sorted(runs)
    depth = widgets.Dropdown(options=depths, value=12 if 12 in runs else depths[0],
                             description="number of blocks", style={"description_width": "initial"})

    def draw(n: int) -> None:
        fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
        plot_norm_placement(a, b, runs[n]["post"], runs[n]["pre"])
        fig.tight_layout()
        plt.show()

    out = widgets.interactive_output(draw, {"n": depth})
    return widgets.VBox([depth, out])


def lookup_batch(layer, noise: float, n: int = 256, T: int = 8, d: int = 16,
                 seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Attention weights of the chapter's lookup layer on fresh examples at a chosen query noise (chapter 12).

    Contexts of ``T`` random unit vectors, queries ``context[pick] + noise * N(0, I) / sqrt(d)``, drawn from
    a generator of their own (the same draws at every noise level). Returns ``(weights (n, T), pick (n,))``.
    """
    import torch
    import torch.nn.functional as F

    g = torch.Generator().manual_seed(seed)
    context = F.normalize(torch.randn(n, T, d, generator=g), dim=-1)
    pick = torch.randint(0, T, (n,), generator=g)
    query = context[torch.arange(n), pick] + noise * torch.randn(n, d, generator=g) / d**0.5
    with torch.no_grad():
        _, w = layer(query[:, None, :], context, need_weights=True)
    return w[:, 0, 0].numpy(), pick.numpy()


def lookup_noise(layer, T: int = 8, d: int = 16) -> widgets.VBox:
    """Sliders for the query's noise and an example: where the trained lookup layer puts its weight (chapter 12).

    The layer was trained with noise 0.3; the more noise, the less of its weight lands on the right vector.
    """
    from attnbook.plotting import plot_lookup_weights

    noise = _slider("query noise", 0.3, 0.0, 2.0, 0.1)
    example = widgets.IntSlider(value=0, min=0, max=15, description="example",
                                continuous_update=False, style={"description_width": "initial"},
                                layout=_slider_layout())

    def draw(s: float, i: int) -> None:
        weights, pick = lookup_batch(layer, s, T=T, d=d)
        mean = weights[np.arange(len(pick)), pick].mean()
        fig, ax = plt.subplots(figsize=(6.5, 3.8))
        plot_lookup_weights(ax, weights[i], int(pick[i]),
                            f"noise {s:.1f}: weight on the right vector {weights[i, pick[i]]:.2f} "
                            f"(average over {len(pick)} examples {mean:.2f})")
        fig.tight_layout()
        plt.show()

    out = widgets.interactive_output(draw, {"s": noise, "i": example})
    return widgets.VBox([widgets.HBox([noise, example]), out])


def next_token_distribution(logits, temperature: float, top_k: int | None):
    """The distribution sampling draws from: ``softmax(top_k_filter(logits / temperature, top_k))`` (chapter 15).

    Shapes: ``logits`` ``(V,)`` to ``(V,)``; ``top_k`` None keeps every token.
    """
    import torch

    from attnbook.torch.decoding import top_k_filter

    scaled = torch.as_tensor(logits, dtype=torch.float64) / temperature
    if top_k is not None:
        scaled = top_k_filter(scaled, top_k)
    return torch.softmax(scaled, dim=-1)


def decoding_explorer(model, prompt: list[int], vocab: list[str]) -> widgets.VBox:
    """Sliders for the temperature and top-k over a trained GPT's next-token distribution (chapter 15).

    ``prompt`` holds token ids, ``vocab`` the word of each id. Low temperatures and small ``k`` pile the
    probability on the likeliest tokens; high temperatures spread it over wrong ones too.
    """
    import torch

    with torch.no_grad():
        logits = model.eval()(torch.tensor([prompt]))[0, -1]
    temperature = _log_slider("temperature", 1.0, -1.0, 1.0)
    k = widgets.IntSlider(value=len(vocab), min=1, max=len(vocab), description="top-k (k = V keeps all)",
                          continuous_update=False, style={"description_width": "initial"}, layout=_slider_layout())

    def draw(t: float, top: int) -> None:
        probs = next_token_distribution(logits, t, top).numpy()
        fig, ax = plt.subplots(figsize=(8, 3.5))
        ax.bar(range(len(vocab)), probs, color="C0")
        ax.set_xticks(range(len(vocab)), vocab, rotation=45, ha="right")
        ax.set_ylim(0, 1.05)
        ax.set_xlabel("next token")
        ax.set_ylabel("probability")
        context = " ".join(vocab[i] for i in prompt[-6:])
        ax.set_title(f"after '{context}': temperature {t:.2f}, top-k {top}; largest {probs.max():.2f}")
        fig.tight_layout()
        plt.show()

    out = widgets.interactive_output(draw, {"t": temperature, "top": k})
    return widgets.VBox([widgets.HBox([temperature, k]), out])


def rotary_figure(q: np.ndarray, k: np.ndarray, m: int, n: int, pair: int, max_offset: int = 64):
    """Rotary positions (chapter 21) for a query ``q`` at position ``m`` and a key ``k`` at position ``n``.

    Left: pair ``pair`` of each, ``(x_i, x_{i + d/2})``, before (faint) and after its rotation by
    ``position * theta_i``. Right: the score of the rotated vectors against the offset ``m - n``, with the
    current offset marked. Returns the figure.
    """
    from attnbook.numpy.rotary import apply_rotary, rotary_frequencies

    d = len(q)
    half = d // 2
    theta = rotary_frequencies(d)[pair]
    qr, kr = apply_rotary(q[None], [m])[0], apply_rotary(k[None], [n])[0]
    fig, (ax_pair, ax_score) = plt.subplots(1, 2, figsize=(10, 4.2))
    limit = 1.15 * max(np.hypot(q[pair], q[pair + half]), np.hypot(k[pair], k[pair + half]))
    for vec, rot, name, color in ((q, qr, "q", "C0"), (k, kr, "k", "C1")):
        ax_pair.annotate("", xy=(vec[pair], vec[pair + half]), xytext=(0, 0),
                         arrowprops={"arrowstyle": "->", "color": color, "alpha": 0.3})
        ax_pair.annotate("", xy=(rot[pair], rot[pair + half]), xytext=(0, 0),
                         arrowprops={"arrowstyle": "->", "color": color, "lw": 2})
        ax_pair.text(rot[pair], rot[pair + half], f" {name} rotated", color=color)
    ax_pair.set_xlim(-limit, limit)
    ax_pair.set_ylim(-limit, limit)
    ax_pair.set_aspect("equal")
    ax_pair.axhline(0, color="0.85", lw=0.8)
    ax_pair.axvline(0, color="0.85", lw=0.8)
    ax_pair.set_xlabel(f"dimension {pair}")
    ax_pair.set_ylabel(f"dimension {pair + half}")
    gap = float(np.degrees((m - n) * theta)) % 360
    ax_pair.set_title(f"pair {pair} (faint: before rotation): theta = {theta:.3g} rad per position\n"
                      f"angle between them changed by (m - n) theta = {gap:.0f} degrees", fontsize=9)
    offsets = np.arange(-max_offset, max_offset + 1)
    scores = [float(apply_rotary(q[None], [max_offset + o])[0] @ apply_rotary(k[None], [max_offset])[0])
              for o in offsets]
    ax_score.plot(offsets, scores, color="0.4")
    ax_score.plot([m - n], [float(qr @ kr)], "o", color="C3")
    ax_score.set_xlabel("offset m - n (query position minus key position)")
    ax_score.set_ylabel("score: rotated q · rotated k")
    ax_score.set_title(f"m = {m}, n = {n}: score {float(qr @ kr):.3f} (it depends on m - n only)", fontsize=9)
    fig.tight_layout()
    return fig


def rotary_explorer(q: np.ndarray, k: np.ndarray, max_position: int = 64) -> widgets.VBox:
    """Sliders for the query's position, the key's position and the pair shown (chapter 21).

    Moving both positions by the same amount leaves every pair's angle, and the score, as they were;
    the fast pairs (small index) turn by a radian per position, the slow ones hardly at all.
    """
    q, k = np.asarray(q, dtype=float), np.asarray(k, dtype=float)

    def slider(description: str, value: int, high: int) -> widgets.IntSlider:
        return widgets.IntSlider(value=value, min=0, max=high, description=description, continuous_update=False,
                                 style={"description_width": "initial"}, layout=_slider_layout())

    m = slider("query position m", 5, max_position)
    n = slider("key position n", 2, max_position)
    pair = slider("pair i", 0, len(q) // 2 - 1)

    def draw(m_: int, n_: int, i: int) -> None:
        rotary_figure(q, k, m_, n_, i, max_offset=max_position)
        plt.show()

    out = widgets.interactive_output(draw, {"m_": m, "n_": n, "i": pair})
    return widgets.VBox([widgets.HBox([m, n, pair]), out])
def norm_shift_scale(x: np.ndarray) -> widgets.VBox:
    """Sliders that shift and scale a vector ``x``, beside its LayerNorm and its RMSNorm (chapter 22).

    Scaling changes neither output; shifting changes RMSNorm's, which tends to all ones as the shift grows,
    and never LayerNorm's, which subtracts the mean first.
    """
    from attnbook.plotting import plot_norm_outputs

    shift = _slider("shift b (added to every component)", 0.0, -4.0, 4.0, 0.25)
    scale = _slider("scale s", 1.0, 0.25, 4.0, 0.25)

    def draw(b: float, s: float) -> None:
        fig, axes = plt.subplots(1, 3, figsize=(11, 3.2))
        plot_norm_outputs(axes, x, b, s)
        fig.tight_layout()
        plt.show()

    out = widgets.interactive_output(draw, {"b": shift, "s": scale})
    return widgets.VBox([shift, scale, out])


def decode_with_cross_attention(model, src: list[int], bos_id: int, eos_id: int,
                                max_len: int) -> tuple[list[int], np.ndarray]:
    """Greedy output of an encoder-decoder for one source, and its cross-attention while producing it
    (chapter 16).

    ``src`` holds the source's token ids, unpadded. Returns the output ids (without the begin token, up to
    and including the end token if it came within ``max_len - 1`` steps) and the cross-attention weights
    ``(layers, heads, T_out, S)``: row ``t`` is the decoder position that produced output ``t``.
    """
    import torch

    from attnbook.torch import record_attention
    from attnbook.torch.decoding import greedy_decode
    from attnbook.torch.modes import eval_mode

    if len(src) == 0:
        raise ValueError("src must hold at least one token; got an empty list")
    s = torch.tensor([list(src)])
    with torch.no_grad():
        out = greedy_decode(model, s, bos_id, eos_id, max_len=max_len)[0, 1:].tolist()
    if eos_id in out:
        out = out[: out.index(eos_id) + 1]
    # Greedy decoding feeds each output back in, so one teacher-forced pass on [begin] + output gives
    # the attention of every decoding step at once (the decoder is causal).
    dec_in = torch.tensor([[bos_id] + out[:-1]])
    with eval_mode(model), record_attention(model) as rec, torch.no_grad():
        model(s, dec_in)
    names = sorted((n for n in rec if n.endswith("cross_attn")), key=lambda n: [int(p) for p in n.split(".")
                                                                                 if p.isdigit()])
    return out, np.stack([rec[n][0].numpy() for n in names])


def seq2seq_explorer(model, examples: dict[str, str], reference, bos_id: int, eos_id: int,
                     should_read=None, max_chars: int = 20) -> widgets.VBox:
    """Type a source (or pick one of ``examples``), a layer and a head: the trained encoder-decoder's greedy
    output and that head's cross-attention while it produced it (chapter 16).

    ``examples`` maps a label to a source written as text (digits and "+"); ``reference(text)`` gives the
    right answer as text, so the title can say whether the output is right; ``should_read(t, S)``, if
    given, is the source position output ``t`` of a source of length ``S`` ought to read, outlined in red.
    """
    from attnbook.plotting import plot_cross_attention
    from attnbook.tasks import decode_tokens

    if not examples:
        raise ValueError("examples must hold at least one labelled source; got none")
    labels = list(examples)
    first = examples[labels[0]]
    _, w0 = decode_with_cross_attention(model, _encode_text(first), bos_id, eos_id, len(first) + 3)
    n_layers, n_heads = w0.shape[:2]
    pick = widgets.Dropdown(options=labels, value=labels[0], description="example")
    text = widgets.Text(value=first, description="source", continuous_update=False)
    layer = widgets.IntSlider(value=n_layers - 1, min=0, max=n_layers - 1, description="layer",
                              continuous_update=False)
    head = widgets.IntSlider(value=0, min=0, max=n_heads - 1, description="head", continuous_update=False)
    pick.observe(lambda change: setattr(text, "value", examples[change["new"]]), names="value")

    def draw(source: str, lay: int, h: int) -> None:
        source = source.strip()
        if not 0 < len(source) <= max_chars or any(c not in "0123456789+" for c in source):
            print(f"type 1 to {max_chars} digits (or '+'); got {source!r}")
            return
        want = reference(source)
        out, w = decode_with_cross_attention(model, _encode_text(source), bos_id, eos_id, len(want) + 3)
        got = decode_tokens(out)
        right = out == _encode_text(want) + [eos_id]
        rows = [decode_tokens([t]) or "end" for t in out]
        expected = None
        if should_read is not None:
            expected = [should_read(t, len(source)) if t < len(source) else -1 for t in range(len(out))]
        fig, ax = plt.subplots(figsize=(max(5.0, 0.45 * len(source) + 3), max(4.0, 0.4 * len(out) + 2)))
        plot_cross_attention(ax, w[lay, h], source, rows,
                             f"{source} -> {got} ({'right' if right else f'wrong, expected {want}'})\n"
                             f"layer {lay}, head {h}", expected)
        fig.tight_layout()
        plt.show()

    out = widgets.interactive_output(draw, {"source": text, "lay": layer, "h": head})
    return widgets.VBox([widgets.HBox([pick, text]), widgets.HBox([layer, head]), out])


def _encode_text(text: str) -> list[int]:
    from attnbook.tasks import DIGIT0, PLUS

    return [PLUS if c == "+" else DIGIT0 + int(c) for c in text]


# The iterations newton_schulz_figure offers, by name: (a, b, c) of a s + b s^3 + c s^5 (chapter 25). The
# same numbers as attnbook.training.muon's QUINTIC and CUBIC, which tests/test_widgets_ch25.py checks;
# repeated here so that this module does not import torch.
NS_ITERATIONS = {"quintic (Muon)": (3.4445, -4.7750, 2.0315), "cubic (classic)": (1.5, -0.5, 0.0)}


def newton_schulz_figure(singular_values: np.ndarray, steps: int, iteration: str = "quintic (Muon)"):
    """What ``steps`` Newton-Schulz steps do to singular values (chapter 25). Returns the figure.

    Left: the polynomial ``p(s) = a s + b s^3 + c s^5`` applied ``steps`` times, for ``s`` in ``[1e-4, 1]``,
    against the target 1. Right: ``singular_values`` (those of a matrix divided by its Frobenius norm,
    largest first) before and after the steps; the iteration acts on each singular value alone.
    """
    a, b, c = NS_ITERATIONS[iteration]

    def iterate(s: np.ndarray) -> np.ndarray:
        for _ in range(steps):
            s = a * s + b * s**3 + c * s**5
        return s

    s = np.asarray(singular_values, dtype=float)
    grid = np.logspace(-4, 0, 400)
    fig, (ax_map, ax_sv) = plt.subplots(1, 2, figsize=(11, 3.8))
    ax_map.semilogx(grid, iterate(grid), color="C0", label=f"after {steps} steps")
    ax_map.semilogx(grid, grid, ":", color="0.5", label="before (the identity)")
    ax_map.axhline(1.0, color="C3", lw=0.8, label="target: 1")
    ax_map.set_xlabel("singular value s before (log scale)")
    ax_map.set_ylabel("singular value after")
    ax_map.set_ylim(0, 1.4)
    ax_map.legend(loc="upper left", fontsize=8)
    ax_map.set_title(f"{iteration}: a = {a}, b = {b}, c = {c}", fontsize=9)
    after = iterate(s)
    index = np.arange(1, len(s) + 1)
    ax_sv.semilogy(index, s, "o", ms=3, color="0.5", label="before")
    ax_sv.semilogy(index, after, "o", ms=3, color="C0", label=f"after {steps} steps")
    ax_sv.axhline(1.0, color="C3", lw=0.8)
    ax_sv.set_xlabel("index of the singular value (largest first)")
    ax_sv.set_ylabel("singular value (log scale)")
    ax_sv.legend(fontsize=8)
    ax_sv.set_title(f"after {steps} steps: smallest {after.min():.3g}, largest {after.max():.3g}", fontsize=9)
    fig.tight_layout()
    return fig


def newton_schulz_explorer(singular_values: np.ndarray) -> widgets.VBox:
    """A slider for the number of Newton-Schulz steps and a choice of iteration (chapter 25).

    The quintic lifts the smallest singular values within five steps but leaves them scattered around 1;
    the cubic lands on 1 exactly, but a small singular value needs many more steps to get there.
    """
    steps = widgets.IntSlider(value=5, min=0, max=12, description="steps", continuous_update=False,
                              style={"description_width": "initial"}, layout=_slider_layout())
    iteration = widgets.Dropdown(options=list(NS_ITERATIONS), value="quintic (Muon)", description="iteration",
                                 style={"description_width": "initial"})

    def draw(k: int, name: str) -> None:
        newton_schulz_figure(singular_values, k, name)
        plt.show()

    out = widgets.interactive_output(draw, {"k": steps, "name": iteration})
    return widgets.VBox([widgets.HBox([steps, iteration]), out])
