"""Part II's interactive figures (chapters 12 to 15): the trained lookup, norm placement, the decoder's dependence,
decoding."""

from __future__ import annotations

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np

from attnbook.widgets._common import _log_slider, _slider, _slider_layout


def lookup_noise(layer, T: int = 8, d: int = 16) -> widgets.VBox:
    """Sliders for the query's noise and an example: where the trained lookup layer puts its weight (chapter 12).

    The layer was trained with noise 0.3; the more noise, the less of its weight lands on the right vector.
    """
    from attnbook.plotting import plot_lookup_weights
    from attnbook.torch.inspect import lookup_batch

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


def decoding_explorer(model, prompt: list[int], vocab: list[str]) -> widgets.VBox:
    """Sliders for the temperature and top-k over a trained GPT's next-token distribution (chapter 15).

    ``prompt`` holds token ids, ``vocab`` the word of each id. Low temperatures and small ``k`` pile the
    probability on the likeliest tokens; high temperatures spread it over wrong ones too.
    """
    import torch

    from attnbook.torch.decoding import next_token_distribution

    with torch.no_grad():
        logits = model.eval()(torch.tensor([prompt]))[0, -1].double()  # the figure's probabilities in float64
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
