"""Part III's interactive figures (chapters 16 to 18): cross-attention while decoding, sampling temperature,
trained attention maps."""

from __future__ import annotations

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np

from attnbook.widgets._common import _log_slider


def _encode_text(text: str) -> list[int]:
    from attnbook.data.tasks import DIGIT0, PLUS

    return [PLUS if c == "+" else DIGIT0 + int(c) for c in text]


def seq2seq_explorer(model, examples: dict[str, str], reference, bos_id: int, eos_id: int,
                     should_read=None, max_chars: int = 20) -> widgets.VBox:
    """Type a source (or pick one of ``examples``), a layer and a head: the trained encoder-decoder's greedy
    output and that head's cross-attention while it produced it (chapter 16).

    ``examples`` maps a label to a source written as text (digits and "+"); ``reference(text)`` gives the
    right answer as text, so the title can say whether the output is right; ``should_read(t, S)``, if
    given, is the source position output ``t`` of a source of length ``S`` ought to read, outlined in red.
    """
    from attnbook.data.tasks import decode_tokens
    from attnbook.plotting import plot_cross_attention
    from attnbook.torch.inspect import decode_with_cross_attention

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
