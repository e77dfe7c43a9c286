"""Figures the chapters share. Every function draws on a Matplotlib ``Axes`` and labels it fully."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes


def draw_vectors(
    ax: Axes,
    vectors: Sequence[np.ndarray],
    labels: Sequence[str],
    colors: Sequence[str] | None = None,
    limit: float | None = None,
) -> Axes:
    """Draw 2-D vectors as arrows from the origin, each labelled at its tip (chapter 1)."""
    colors = colors or [f"C{i}" for i in range(len(vectors))]
    for vec, label, color in zip(vectors, labels, colors, strict=True):
        ax.annotate(
            "", xy=(vec[0], vec[1]), xytext=(0, 0),
            arrowprops={"arrowstyle": "-|>", "color": color, "lw": 2},
        )
        # Labels sit just beyond the tip, on the side away from the origin, so they do not cover arrows.
        ax.annotate(label, (vec[0], vec[1]), textcoords="offset points", color=color, fontsize=12,
                    xytext=(6 if vec[0] >= 0 else -6, 6 if vec[1] >= 0 else -14),
                    ha="left" if vec[0] >= 0 else "right")
    lim = limit or 1.6 * max(float(np.abs(v).max()) for v in vectors)
    ax.set_xlim(-lim, lim)
    ax.set_ylim(-lim, lim)
    ax.set_aspect("equal")
    ax.axhline(0, color="0.8", lw=0.8, zorder=0)
    ax.axvline(0, color="0.8", lw=0.8, zorder=0)
    ax.set_xlabel("first coordinate")
    ax.set_ylabel("second coordinate")
    return ax


def plot_points(ax: Axes, points: np.ndarray, labels: Sequence[str], xlabel: str, ylabel: str) -> Axes:
    """Scatter labelled 2-D points, shape ``(n, 2)``: embeddings seen as points (chapter 1)."""
    ax.scatter(points[:, 0], points[:, 1], color="C0")
    for (x, y), label in zip(points, labels, strict=True):
        ax.annotate(label, (x, y), textcoords="offset points", xytext=(5, -12), fontsize=10)
    ax.margins(0.15)  # room for the labels of the outermost points
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    return ax


def plot_matrix(
    ax: Axes,
    M: np.ndarray,
    row_labels: Sequence[str],
    col_labels: Sequence[str],
    title: str,
    colorbar_label: str,
    cmap: str = "RdBu_r",
    vmin: float | None = -1.0,
    vmax: float | None = 1.0,
    annotate: bool = True,
) -> Axes:
    """Heatmap of a matrix, shape ``(n, m)``, with labelled rows, columns and colour bar."""
    im = ax.imshow(M, cmap=cmap, vmin=vmin, vmax=vmax)
    ax.set_xticks(range(M.shape[1]), col_labels, rotation=45, ha="right")
    ax.set_yticks(range(M.shape[0]), row_labels)
    if annotate:
        # White text on dark cells, black on light ones, judged by the colour actually drawn.
        for i in range(M.shape[0]):
            for j in range(M.shape[1]):
                r, g, b, _ = im.cmap(im.norm(M[i, j]))
                dark = 0.299 * r + 0.587 * g + 0.114 * b < 0.5
                ax.text(j, i, f"{M[i, j]:.2f}", ha="center", va="center", fontsize=8,
                        color="white" if dark else "black")
    ax.set_title(title)
    plt.colorbar(im, ax=ax, label=colorbar_label, fraction=0.046, pad=0.04)
    return ax


def plot_dot_vs_cosine(ax_dot: Axes, ax_cos: Axes, lengths: Sequence[float] = (0.5, 1.0, 2.0)) -> None:
    """Dot product and cosine similarity of a unit vector u and a vector v, against their angle.

    One curve per length of v: the dot product scales with the length, the cosine does not
    (chapter 1; the static companion of ``attnbook.widgets.dot_vs_cosine``).
    """
    angles = np.linspace(0, 180, 181)
    for length in lengths:
        ax_dot.plot(angles, length * np.cos(np.radians(angles)), label=f"|v| = {length:g}")
        ax_cos.plot(angles, np.cos(np.radians(angles)), label=f"|v| = {length:g}",
                    lw=6 - 2 * lengths.index(length), alpha=0.6)
    for ax, name in ((ax_dot, "dot product u · v"), (ax_cos, "cosine similarity")):
        ax.axhline(0, color="0.7", lw=0.8)
        ax.set_xlabel("angle between u and v (degrees)")
        ax.set_ylabel(name)
        ax.set_xticks(range(0, 181, 45))
        ax.grid(alpha=0.3)
        ax.legend()
    ax_dot.set_title("dot product: grows with |v|")
    ax_cos.set_title("cosine: depends on the angle only")


def plot_weights(ax: Axes, weights: np.ndarray, labels: Sequence[str], title: str) -> Axes:
    """Bar chart of one distribution, shape ``(n,)``, such as a softmax output (chapter 2)."""
    ax.bar(range(len(weights)), weights, color="C0")
    for i, w in enumerate(weights):
        ax.text(i, w + 0.02, f"{w:.2f}", ha="center", fontsize=9)
    ax.set_xticks(range(len(weights)), labels)
    ax.set_ylim(0, 1.1)
    ax.set_xlabel("option")
    ax.set_ylabel("weight")
    ax.set_title(title)
    return ax


def plot_temperatures(ax: Axes, scores: np.ndarray, temperatures: Sequence[float]) -> Axes:
    """Grouped bars: the softmax of ``scores`` at several temperatures (chapter 2)."""
    from attnbook.numpy import softmax

    n, k = len(scores), len(temperatures)
    width = 0.8 / k
    for j, t in enumerate(temperatures):
        ax.bar(np.arange(n) + (j - (k - 1) / 2) * width, softmax(scores, temperature=t), width,
               label=f"temperature {t:g}")
    ax.set_xticks(range(n), [f"score {s:g}" for s in scores])
    ax.set_xlabel("option (with its score)")
    ax.set_ylabel("softmax weight")
    ax.set_ylim(0, 1.05)
    ax.legend()
    return ax


def plot_soft_lookup(
    ax: Axes, keys: np.ndarray, values: np.ndarray, sharpnesses: Sequence[float],
    xlabel: str = "query (key axis)", ylabel: str = "value",
) -> Axes:
    """The data as points and the soft lookup's answer for every query, one curve per sharpness."""
    from attnbook.numpy import soft_lookup

    grid = np.linspace(keys.min() - 0.2, keys.max() + 0.2, 300)
    ax.scatter(keys, values, color="black", zorder=3, label="stored (key, value) pairs")
    for s in sharpnesses:
        answers, _ = soft_lookup(grid, keys, values, sharpness=s)
        ax.plot(grid, answers, label=f"sharpness {s:g}")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend()
    return ax


def plot_three_spaces(
    axes: Sequence[Axes], e: np.ndarray, Z: np.ndarray, q: np.ndarray, K: np.ndarray,
    V: np.ndarray, output: np.ndarray, alpha: np.ndarray,
) -> None:
    """Single-query attention in its three 2-D spaces (chapter 5).

    ``axes``: three Axes. Input space: the token ``e`` and the context rows of ``Z``. Attention space:
    ``q`` and the keys ``K``, each key labelled with its weight ``alpha``. Output space: the values
    ``V`` and the output, their ``alpha``-weighted sum. All vectors are 2-D.
    """
    T = len(Z)
    colors = [f"C{t + 1}" for t in range(T)]
    draw_vectors(axes[0], [e, *Z], ["e", *[f"z{t + 1}" for t in range(T)]], ["C0", *colors])
    axes[0].set_title("input space: e and its context z_t")
    draw_vectors(axes[1], [q, *K], ["q", *[f"k{t + 1} (α={a:.2f})" for t, a in enumerate(alpha)]],
                 ["C0", *colors])
    axes[1].set_title("attention space: q · k_t decides α_t")
    draw_vectors(axes[2], [*V, output], [*[f"v{t + 1}" for t in range(T)], "output"], [*colors, "black"])
    axes[2].set_title("output space: output = Σ α_t v_t")


def plot_scaled_vs_unscaled(ax_raw: Axes, ax_scaled: Axes, d: int, n_keys: int = 12, seed: int = 0) -> None:
    """Softmax weights of one random query over random keys in dimension ``d`` (chapter 6).

    Entries are standard normal. Left: scores ``q . k``; right: ``q . k / sqrt(d)``. Without the
    scaling the weights collapse onto one key as ``d`` grows; with it they keep the same spread.
    """
    from attnbook.numpy import softmax

    rng = np.random.default_rng(seed)
    q, K = rng.normal(size=d), rng.normal(size=(n_keys, d))
    for ax, scores, name in ((ax_raw, K @ q, "q · k"), (ax_scaled, K @ q / np.sqrt(d), "q · k / √d")):
        ax.bar(range(n_keys), softmax(scores), color="C0" if ax is ax_raw else "C1")
        ax.set_ylim(0, 1.05)
        ax.set_xlabel("key")
        ax.set_ylabel("softmax weight")
        ax.set_title(f"d = {d}, scores {name}")


def plot_mask(ax: Axes, mask: np.ndarray, title: str) -> Axes:
    """A boolean mask, shape ``(T_q, T_k)``: filled where attention is allowed (chapter 8)."""
    ax.imshow(mask, cmap="Greens", vmin=0, vmax=1.4)
    T_q, T_k = mask.shape
    for i in range(T_q):
        for j in range(T_k):
            ax.text(j, i, "✓" if mask[i, j] else "·", ha="center", va="center", fontsize=9)
    ax.set_xticks(range(T_k))
    ax.set_yticks(range(T_q))
    ax.set_xlabel("key position j")
    ax.set_ylabel("query position i")
    ax.set_title(title)
    return ax


def plot_influence(ax: Axes, influence: np.ndarray, title: str, xlabel: str = "input position s") -> Axes:
    """How much output position t depends on input position s, shape ``(T_out, T_in)`` (chapter 14).

    Entries are Jacobian norms ``|d out_t / d in_s|`` on a log colour scale; exact zeros are drawn white
    so that a causal pattern is plain to see.
    """
    from matplotlib.colors import LogNorm

    shown = np.ma.masked_where(influence == 0, influence)
    # A log scale: the residual path makes the diagonal far larger than the rest, which must stay visible.
    im = ax.imshow(shown, cmap="viridis", norm=LogNorm(vmin=shown.min(), vmax=shown.max()))
    ax.set_facecolor("white")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("output position t")
    ax.set_title(title)
    plt.colorbar(im, ax=ax, label="|d out_t / d in_s|", fraction=0.046, pad=0.04)
    return ax


def char_label(c: str) -> str:
    """A character as a readable tick label: newline as '⏎', space as '␣'."""
    return {"\n": "⏎", " ": "␣"}.get(c, c)


def plot_next_char(ax: Axes, probs: np.ndarray, chars: str, title: str, top: int = 15) -> Axes:
    """Bars of the ``top`` likeliest next characters, from ``probs`` of shape ``(V,)`` (chapter 17)."""
    order = np.argsort(-probs, kind="stable")[:top]
    ax.bar(range(len(order)), probs[order], color="C0")
    ax.set_xticks(range(len(order)), [char_label(chars[i]) for i in order])
    ax.set_ylim(0, 1)
    ax.set_xlabel(f"next character (the {len(order)} likeliest)")
    ax.set_ylabel("probability")
    ax.set_title(title)
    return ax


def plot_attention(ax: Axes, weights: np.ndarray, labels: Sequence[str], title: str, colorbar: bool = True) -> Axes:
    """One head's attention map ``(T_q, T_k)``: rows are queries, columns keys, with token tick labels."""
    im = ax.imshow(weights, cmap="viridis", vmin=0.0, vmax=1.0)
    T_q, T_k = weights.shape
    ax.set_xticks(range(T_k), [char_label(c) for c in labels[:T_k]], fontsize=7)
    ax.set_yticks(range(T_q), [char_label(c) for c in labels[:T_q]], fontsize=7)
    ax.set_xlabel("key (attended to)")
    ax.set_ylabel("query (attending)")
    ax.set_title(title)
    if colorbar:
        plt.colorbar(im, ax=ax, label="attention weight", fraction=0.046, pad=0.04)
    return ax


def plot_finite_difference_errors(ax: Axes, steps: np.ndarray, errors: np.ndarray, unit_roundoff: float,
                                  chosen: float | None = None) -> Axes:
    """Error of a central difference against the step ``eps``, log-log (chapter 19).

    Two guide lines show the two causes: truncation, falling as ``eps^2``, and rounding, growing as
    ``u / eps``; ``chosen`` marks one step on the curve.
    """
    ax.loglog(steps, errors, "o-", ms=3, color="C0", label="|central difference - backprop|")
    # Each guide is fitted to the end of the curve where its cause dominates (a fifth of the points).
    k = max(1, len(steps) // 5)
    trunc = np.median(errors[-k:] / steps[-k:] ** 2)
    rounding = np.median(errors[:k] * steps[:k])
    ax.loglog(steps, trunc * steps**2, "--", color="C1", lw=1, label=r"truncation $\propto \epsilon^2$")
    ax.loglog(steps, rounding / steps, ":", color="C2", lw=1.5, label=r"rounding $\propto u / \epsilon$")
    ax.axvline(unit_roundoff ** (1 / 3), color="gray", lw=0.8, label=r"$u^{1/3}$")
    if chosen is not None:
        i = int(np.argmin(np.abs(np.log(steps) - np.log(chosen))))
        ax.loglog([steps[i]], [errors[i]], "s", ms=9, color="C3", label=f"eps = {steps[i]:.0e}")
    ax.set_ylim(errors.min() / 10, errors.max() * 10)
    ax.set_xlabel(r"finite-difference step $\epsilon$")
    ax.set_ylabel("absolute error of the gradient")
    ax.legend(fontsize=8)
def plot_tile_schedule(ax: Axes, T: int, block: int, causal: bool = True) -> Axes:
    """The ``(T, T)`` scores cut into ``block x block`` tiles: computed tiles shaded, skipped ones blank,
    the causal diagonal drawn (chapter 20)."""
    from attnbook.numpy.flash import tile_schedule

    schedule = tile_schedule(T, T, block, block, causal)
    for i, q0 in enumerate(range(0, T, block)):
        for j, k0 in enumerate(range(0, T, block)):
            h, w = min(block, T - q0), min(block, T - k0)
            partial = causal and k0 + w - 1 > q0  # a tile on the diagonal: computed, then masked inside
            color = ("C1" if partial else "C0") if schedule[i, j] else "white"
            ax.add_patch(plt.Rectangle((k0, q0), w, h, facecolor=color, edgecolor="0.3", lw=0.8,
                                       alpha=0.55 if schedule[i, j] else 1.0))
    if causal:
        ax.plot([0, T], [0, T], color="k", lw=1)
    ax.set_xlim(0, T)
    ax.set_ylim(T, 0)
    ax.set_aspect("equal")
    ax.set_xlabel("key position j")
    ax.set_ylabel("query position i")
    n = int(schedule.sum())
    ax.set_title(f"T = {T}, tiles of {block}: {n} of {schedule.size} computed", fontsize=10)
    return ax


def plot_token_split(ax: Axes, pieces: Sequence[bytes], title: str, fontsize: float = 11) -> Axes:
    """A text cut into tokens (chapter 23): each token a coloured box, as many characters to a line as fit
    in the axes at ``fontsize``; spaces show as '␣', newlines as '⏎', and a token that is not whole UTF-8
    as its bytes."""
    # Boxes are placed in points from the left edge (a monospaced character is 0.6 em wide), so they sit
    # side by side whatever the figure's layout does to the axes afterwards.
    char_points = 0.6 * fontsize
    width = max(8, int(ax.get_position().width * ax.figure.get_figwidth() * 72 / char_points) - 2)
    x, y = 0.0, 0
    for i, piece in enumerate(pieces):
        try:
            label = "".join(char_label(c) for c in piece.decode("utf-8"))
        except UnicodeDecodeError:
            label = piece.hex(" ")
        if x and x + len(label) > width:
            x, y = 0.0, y + 1
        ax.annotate(label, xy=(0, -y), xycoords=("axes fraction", "data"), xytext=((x + 0.5) * char_points, 0),
                    textcoords="offset points", family="monospace", fontsize=fontsize, va="center", ha="left",
                    bbox={"boxstyle": "square,pad=0.15", "facecolor": plt.cm.tab20(i % 20), "alpha": 0.55,
                          "edgecolor": "none"})
        x += len(label) + 0.6
    ax.set_ylim(-y - 0.8, 0.8)
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_xlabel("one box per token")
    ax.set_title(title)
    return ax


def rotation(angle_deg: float) -> np.ndarray:
    """The 2-D rotation by ``angle_deg`` degrees, as a ``(2, 2)`` matrix acting on row vectors from the right."""
    t = np.radians(angle_deg)
    return np.array([[np.cos(t), np.sin(t)], [-np.sin(t), np.cos(t)]])


def plot_query_map(
    ax_space: Axes, ax_weights: Axes, e: np.ndarray, Z: np.ndarray, W_q: np.ndarray, W_k: np.ndarray,
    angle_deg: float, scale: float,
) -> np.ndarray:
    """One 2-D query against its keys after rotating ``W_q`` by ``angle_deg`` and scaling it by ``scale``
    (chapter 5). Left, the attention space; right, the weights. Returns the weights, shape ``(T,)``.

    The query is ``q = e (scale W_q R)`` with ``R`` the rotation; the keys ``Z W_k`` do not move.
    """
    from attnbook.numpy import softmax

    q = e @ (scale * W_q @ rotation(angle_deg))
    K = Z @ W_k
    alpha = softmax(K @ q / np.sqrt(len(q)))
    T = len(K)
    colors = [f"C{t + 1}" for t in range(T)]
    draw_vectors(ax_space, [q, *K], ["q", *[f"k{t + 1}" for t in range(T)]], ["C0", *colors], limit=3.0)
    ax_space.set_title(f"attention space: W_q rotated {angle_deg:g}°, scaled {scale:g}")
    ax_weights.bar(range(T), alpha, color=colors)
    for t, a in enumerate(alpha):
        ax_weights.text(t, a + 0.02, f"{a:.2f}", ha="center", fontsize=9)
    ax_weights.set_xticks(range(T), [f"k{t + 1}\nq·k={s:.2f}" for t, s in enumerate(K @ q)])
    ax_weights.set_ylim(0, 1.1)
    ax_weights.set_xlabel("key (with its raw score)")
    ax_weights.set_ylabel("attention weight α")
    ax_weights.set_title("α = softmax(q · k / √2)")
    return alpha


def plot_score_landscape(ax: Axes, scorer, q: np.ndarray, title: str, limit: float = 2.0, n: int = 81) -> np.ndarray:
    """The score ``s(q, k)`` of one 2-D query for every key ``k`` of a square grid (chapter 7).

    ``scorer`` maps queries ``(1, 2)`` and keys ``(m, 2)`` to scores ``(1, m)``. Returns the scores on the
    grid, shape ``(n, n)``: row ``i`` holds the keys with second coordinate ``grid[i]``.
    """
    grid = np.linspace(-limit, limit, n)
    k1, k2 = np.meshgrid(grid, grid)
    keys = np.stack([k1.ravel(), k2.ravel()], axis=1)  # (n * n, 2)
    S = np.asarray(scorer(q[None, :], keys)).reshape(n, n)
    bound = float(np.abs(S).max()) or 1.0
    image = ax.imshow(S, origin="lower", extent=(-limit, limit, -limit, limit), cmap="RdBu_r",
                      vmin=-bound, vmax=bound)
    ax.contour(grid, grid, S, levels=9, colors="0.3", linewidths=0.5)
    ax.annotate("", xy=(q[0], q[1]), xytext=(0, 0), arrowprops={"arrowstyle": "-|>", "color": "black", "lw": 2})
    ax.annotate("q", (q[0], q[1]), textcoords="offset points", xytext=(5, 5), fontsize=12)
    ax.set_xlim(-limit, limit)
    ax.set_ylim(-limit, limit)
    ax.set_xlabel("key, first coordinate")
    ax.set_ylabel("key, second coordinate")
    ax.set_title(title)
    plt.colorbar(image, ax=ax, label="score s(q, k)", fraction=0.046)
    return S


def plot_convolution_heads(ax: Axes, T: int, k: int, query: int | None = None) -> np.ndarray:
    """Which head of the convolution-as-attention construction reads which key (chapter 10).

    Cell ``(i, j)`` shows the offset ``o = j - i`` of the one-hot head that gives query ``i`` weight 1 on
    key ``j``; blank cells get weight 0 from every head. A kernel of odd size ``k`` has heads for offsets
    ``-(k // 2) .. k // 2``. The chosen query's row is outlined. Returns the ``(T, T)`` matrix drawn
    (offsets, NaN where no head looks).
    """
    from attnbook.numpy.convolution import offset_attention_weights

    offsets = list(range(-(k // 2), k // 2 + 1))
    heads = offset_attention_weights(T, offsets)  # (k, T, T), one-hot rows
    drawn = np.full((T, T), np.nan)
    for o, A in zip(offsets, heads, strict=True):
        drawn[A == 1.0] = o
    half = max(k // 2, 1)
    im = ax.imshow(np.ma.masked_invalid(drawn), cmap="coolwarm", vmin=-half - 0.5, vmax=half + 0.5)
    for i, j in zip(*np.nonzero(~np.isnan(drawn)), strict=True):
        ax.text(j, i, f"{int(drawn[i, j]):+d}", ha="center", va="center", fontsize=8)
    if query is not None:
        ax.add_patch(plt.Rectangle((-0.5, query - 0.5), T, 1, fill=False, edgecolor="k", lw=2))
    ax.set_xticks(range(T))
    ax.set_yticks(range(T))
    ax.set_xlabel("key position j")
    ax.set_ylabel("query position i")
    ax.set_title(f"kernel size {k}: {k} one-hot heads", fontsize=10)
    bar = plt.colorbar(im, ax=ax, label="offset o of the head (j = i + o)", fraction=0.046, pad=0.04)
    bar.set_ticks(range(-half, half + 1))
    return drawn


def plot_decoder_dependence(ax_self: Axes, ax_mem: Axes, self_influence: np.ndarray,
                            memory_influence: np.ndarray, t: int) -> tuple[np.ndarray, np.ndarray]:
    """What decoder output ``t`` depends on: its target inputs and the memory, as bars (chapter 14).

    ``self_influence`` is ``(T, T)`` and ``memory_influence`` ``(T, S)``, Jacobian norms ``|d out_t / d in_s|``
    as ``plot_influence`` draws them. Bars are on a log scale; an exact zero is a red cross on the floor.
    Returns the two rows drawn.
    """
    rows = (self_influence[t], memory_influence[t])
    nonzero = np.concatenate([r[r > 0] for r in (self_influence, memory_influence)])
    floor, top = nonzero.min() / 4, nonzero.max() * 2
    labels = ("target input position s", "memory (source) position s")
    for ax, row, xlabel in zip((ax_self, ax_mem), rows, labels, strict=True):
        s = np.arange(len(row))
        ax.bar(s[row > 0], row[row > 0], color="C0", label="depends")
        if (row == 0).any():  # no legend entry for a marker the panel does not draw
            ax.plot(s[row == 0], np.full(int((row == 0).sum()), floor * 1.5), "x", color="C3", ms=9, mew=2,
                    label="exactly 0")
        ax.set_yscale("log")
        ax.set_ylim(floor, top)
        ax.set_xticks(s)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(f"|d out_{t} / d in_s|")
        ax.legend(loc="upper right", fontsize=8)
    n_self, n_mem = int((rows[0] > 0).sum()), int((rows[1] > 0).sum())
    ax_self.set_title(f"output {t} on the target: {n_self} of {len(rows[0])} positions", fontsize=10)
    ax_mem.set_title(f"output {t} on the memory: {n_mem} of {len(rows[1])} positions", fontsize=10)
    return rows


def plot_norm_placement(ax_rms: Axes, ax_grad: Axes, post: tuple[Sequence[float], Sequence[float]],
                        pre: tuple[Sequence[float], Sequence[float]]) -> None:
    """Post-norm against pre-norm in one stack, block by block (chapter 13).

    ``post`` and ``pre`` are ``(sizes, grads)``: the RMS of the vectors leaving each block and the norm of
    the gradient reaching each block's first feed-forward weight, one entry per block.
    """
    blocks = np.arange(1, len(post[0]) + 1)
    for (sizes, grads), style, label in ((post, "o-", "post-norm"), (pre, "s--", "pre-norm")):
        ax_rms.plot(blocks, sizes, style, label=label, ms=4)
        ax_grad.semilogy(blocks, grads, style, label=label, ms=4)
    ax_rms.set_xlabel("block")
    ax_rms.set_ylabel("RMS of the vectors leaving the block")
    ax_grad.set_xlabel("block")
    ax_grad.set_ylabel("norm of the gradient of fc1.W")
    n = len(blocks)
    ax_rms.set_title(f"{n} blocks: RMS after the last, post {post[0][-1]:.2f}, pre {pre[0][-1]:.2f}", fontsize=10)
    ax_grad.set_title(f"{n} blocks: gradient last/first, post {post[1][-1] / post[1][0]:.2f}, "
                      f"pre {pre[1][-1] / pre[1][0]:.2f}", fontsize=10)
    for ax in (ax_rms, ax_grad):
        ax.grid(alpha=0.3, which="both")
        ax.legend()


def plot_lookup_weights(ax: Axes, weights: np.ndarray, correct: int, title: str) -> Axes:
    """One query's attention weights over its context vectors, the correct one highlighted (chapter 12)."""
    colors = ["C1" if j == correct else "C0" for j in range(len(weights))]
    ax.bar(np.arange(len(weights)), weights, color=colors)
    ax.axhline(1 / len(weights), color="k", ls=":", lw=1, label=f"uniform, 1/{len(weights)}")
    ax.set_ylim(0, 1)
    ax.set_xticks(range(len(weights)))
    ax.set_xlabel(f"context vector (orange: the one the query copies, {correct})")
    ax.set_ylabel("attention weight")
    ax.set_title(title, fontsize=10)
    ax.legend(loc="upper right", fontsize=8)
    return ax


def plot_norm_outputs(axes: Sequence[Axes], x: np.ndarray, shift: float, scale: float,
                      eps: float = 1e-5) -> tuple[np.ndarray, np.ndarray]:
    """Bars of ``scale * x + shift`` and of its LayerNorm and RMSNorm (unit gain, no bias) on three axes
    (chapter 22). Returns the two normalised vectors ``(layer, rms)``, each of the shape of ``x``."""
    import torch

    from attnbook.numpy import rms_norm
    from attnbook.torch import layer_norm

    z = scale * np.asarray(x, dtype=float) + shift
    d = z.shape[-1]
    layer = layer_norm(torch.from_numpy(z), torch.ones(d, dtype=torch.float64), torch.zeros(d, dtype=torch.float64),
                       eps).numpy()
    rms = rms_norm(z, np.ones(d), eps)
    i = np.arange(d)
    for ax, values, title, colour in zip(
            axes, (z, layer, rms),
            (f"input {scale:g} x + {shift:g}", "LayerNorm (mean 0, variance 1)", "RMSNorm (mean square 1)"),
            ("tab:gray", "tab:blue", "tab:orange"), strict=True):
        ax.bar(i, values, color=colour)
        ax.axhline(0.0, color="black", lw=0.8)
        ax.set_xlabel("component $i$")
        ax.set_ylabel("value")
        ax.set_title(title, fontsize=10)
    for ax in axes[1:]:
        ax.set_ylim(-3.2, 3.2)
    return layer, rms


def plot_length_generalisation(ax: Axes, lengths: Sequence[int], accuracy: Sequence[float],
                               trained: tuple[int, int], title: str) -> Axes:
    """Exact match (a share in [0, 1], drawn in %) against the source length, the trained lengths shaded
    (chapter 16)."""
    if len(lengths) != len(accuracy):
        raise ValueError(f"lengths and accuracy must have the same length; got {len(lengths)} and {len(accuracy)}")
    ax.axvspan(trained[0] - 0.5, trained[1] + 0.5, color="C2", alpha=0.15,
               label=f"lengths seen in training ({trained[0]} to {trained[1]})")
    ax.plot(list(lengths), np.asarray(accuracy, dtype=float) * 100, "o-", color="C0", label="exact match")
    ax.set_xlabel("source length (digits)")
    ax.set_ylabel("exact match, %")
    ax.set_ylim(-3, 103)
    ax.set_xticks(range(min(trained[0], min(lengths)), max(trained[1], max(lengths)) + 1))
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(loc="center right", fontsize=8)
    return ax


def plot_cross_attention(ax: Axes, weights: np.ndarray, source: str, output: Sequence[str], title: str,
                         expected: Sequence[int] | None = None) -> Axes:
    """One head's cross-attention ``(T_out, S)`` (chapter 16): a row per output token, a column per source
    token, with the weights written in the cells when there are few of them.

    ``output`` labels the rows (one string per output token, e.g. "end" for the end token);
    ``expected[t]``, if given, is the source position output ``t`` should read, outlined in red (rows
    past the source, such as the end token's, pass -1 to outline nothing).
    """
    weights = np.asarray(weights)
    if weights.shape != (len(output), len(source)):
        raise ValueError(f"weights must have shape (len(output), len(source)) = ({len(output)}, {len(source)}); "
                         f"got {weights.shape}")
    if expected is not None and len(expected) != len(output):
        raise ValueError(f"expected must name one source position per output row ({len(output)}); got {len(expected)}")
    plot_matrix(ax, weights, list(output), list(source), title, "attention weight", cmap="viridis",
                vmin=0.0, vmax=1.0, annotate=weights.size <= 100)
    ax.set_xticks(range(len(source)), list(source), rotation=0, ha="center")
    ax.set_xlabel("source token (read)")
    ax.set_ylabel("output token (being produced)")
    for t, s in enumerate(expected if expected is not None else []):
        if 0 <= s < len(source):
            ax.add_patch(plt.Rectangle((s - 0.5, t - 0.5), 1, 1, fill=False, edgecolor="red", lw=1.5))
    return ax
