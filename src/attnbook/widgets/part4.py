"""Part IV's interactive figures (chapters 19 to 25): finite differences, tiles, rotary positions, norms, BPE,
masked language modelling, Newton-Schulz."""

from __future__ import annotations

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np

from attnbook.widgets._common import _slider, _slider_layout


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


# The iterations newton_schulz_figure offers, by name: (a, b, c) of a s + b s^3 + c s^5 (chapter 25). The
# same numbers as attnbook.training.muon's QUINTIC and CUBIC, which tests/widgets/test_widgets_ch25.py checks;
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
