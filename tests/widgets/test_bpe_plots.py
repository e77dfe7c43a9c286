"""Chapter 23's token-split figure draws one box per token, spelling the text; its widget offers the merges."""

import matplotlib.pyplot as plt

from attnbook.data.bpe import BPETokenizer
from attnbook.plotting import plot_token_split
from attnbook.widgets import bpe_split_explorer, controls

TEXT = "the cat sat on the mat; the rat sat on the hat.\nThe end!" * 3


def test_token_split_draws_every_token_in_order():
    tok = BPETokenizer.from_text(TEXT, n_merges=20)
    pieces = tok.pieces(TEXT)
    fig, ax = plt.subplots(figsize=(9, 3))
    plot_token_split(ax, pieces, "a title")
    labels = [t.get_text() for t in ax.texts]
    assert len(labels) == len(pieces) < len(TEXT.encode())
    # Reading the boxes back gives the text, with its spaces and newlines shown as symbols.
    assert "".join(labels) == TEXT.replace(" ", "␣").replace("\n", "⏎")
    assert ax.get_title() == "a title" and ax.get_xlabel()


def test_a_token_cut_inside_a_character_shows_its_bytes():
    fig, ax = plt.subplots()
    plot_token_split(ax, [b"a", b"\xc3", b"\xa9"], "bytes")
    assert [t.get_text() for t in ax.texts] == ["a", "c3", "a9"]


def test_explorer_slider_spans_the_merges():
    tok = BPETokenizer.from_text(TEXT, n_merges=12)
    assert len(tok.merges) == 12
    assert controls(bpe_split_explorer(tok, "the cat")) == {"merges": (0, 12, 12)}
