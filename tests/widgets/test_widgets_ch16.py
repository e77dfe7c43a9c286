"""The chapter 16 explorer shows a model's greedy output and the cross-attention that produced it."""

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch

from attnbook.data.tasks import BOS, DIGIT0, EOS, PLUS, VOCAB_SIZE
from attnbook.torch import EncoderDecoderTransformer, TransformerConfig, greedy_decode, record_attention
from attnbook.torch.inspect import decode_with_cross_attention
from attnbook.widgets import controls, seq2seq_explorer


def small_model(seed: int = 0) -> EncoderDecoderTransformer:
    torch.manual_seed(seed)
    config = TransformerConfig(src_vocab_size=VOCAB_SIZE, tgt_vocab_size=VOCAB_SIZE, d_model=16, n_heads=2,
                               n_encoder_layers=1, n_decoder_layers=3, max_len=32, pad_id=0)
    return EncoderDecoderTransformer(config).eval()


def tokens(text: str) -> list[int]:
    return [PLUS if c == "+" else DIGIT0 + int(c) for c in text]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_output_is_greedy_decoding_and_rows_are_the_weights_of_each_step(seed):
    model = small_model(seed)
    src = tokens("40172")
    out, w = decode_with_cross_attention(model, src, BOS, EOS, max_len=9)
    # the output is what greedy decoding produces, cut after the first end token
    full = greedy_decode(model, torch.tensor([src]), BOS, EOS, max_len=9)[0, 1:].tolist()
    assert out == (full[: full.index(EOS) + 1] if EOS in full else full)
    assert w.shape == (3, 2, len(out), len(src))
    np.testing.assert_allclose(w.sum(-1), 1.0, atol=1e-6)
    # oracle: run the decoder step by step, as decoding does, and record the attention of the last position
    memory, src_mask = model.encode(torch.tensor([src]))
    prefix = [BOS]
    for t in range(len(out)):
        with record_attention(model) as rec, torch.no_grad():
            logits = model.decode(torch.tensor([prefix]), memory, src_mask)
        assert int(logits[0, -1].argmax()) == out[t]
        for layer in range(3):
            np.testing.assert_allclose(w[layer, :, t], rec[f"decoder.layers.{layer}.cross_attn"][0, :, -1].numpy(),
                                       atol=1e-6)
        prefix.append(out[t])


def test_decode_with_cross_attention_rejects_an_empty_source_and_keeps_the_training_flag():
    model = small_model().train()
    with pytest.raises(ValueError, match="at least one token"):
        decode_with_cross_attention(model, [], BOS, EOS, 5)
    decode_with_cross_attention(model, tokens("12"), BOS, EOS, 5)
    assert model.training


def test_explorer_draws_the_chosen_source_layer_and_head():
    model = small_model()
    examples = {"first": "3141", "second": "27182"}
    box = seq2seq_explorer(model, examples, lambda s: s[::-1], BOS, EOS, should_read=lambda t, S: S - 1 - t)
    assert controls(box) == {"example": (("first", "second"), "first"), "source": ("3141",),
                             "layer": (0, 2, 2), "head": (0, 1, 0)}
    (pick, text), (layer, head) = box.children[0].children, box.children[1].children
    pick.value = "second"  # picking an example writes it into the text box
    assert text.value == "27182"
    text.value = "905"
    layer.value, head.value = 1, 1
    out, w = decode_with_cross_attention(model, tokens("905"), BOS, EOS, max_len=len("509") + 3)
    ax = plt.gcf().axes[0]
    np.testing.assert_allclose(ax.images[0].get_array(), w[1, 1])
    assert [t.get_text() for t in ax.get_xticklabels()] == ["9", "0", "5"]
    assert ax.get_xlabel() and ax.get_ylabel()
    assert "layer 1, head 1" in ax.get_title()
    # the title says right or wrong against the reference, and names the expected answer when wrong
    right = out == tokens("509") + [EOS]
    assert ("wrong, expected 509" in ax.get_title()) != right
    # outlines mark the mirrored source position of each output row inside the source
    outlined = sorted((int(p.get_x() + 0.5), int(p.get_y() + 0.5)) for p in ax.patches)
    assert outlined == sorted((3 - 1 - t, t) for t in range(min(3, len(out))))


def test_explorer_refuses_text_it_cannot_encode(capsys):
    box = seq2seq_explorer(small_model(), {"a": "12"}, lambda s: s[::-1], BOS, EOS, max_chars=6)
    text = box.children[0].children[1]
    n_figures = len(plt.get_fignums())
    for bad in ("12a4", "", "1234567"):
        text.value = bad
        assert len(plt.get_fignums()) == n_figures  # nothing new drawn
    with pytest.raises(ValueError, match="at least one"):
        seq2seq_explorer(small_model(), {}, lambda s: s[::-1], BOS, EOS)
