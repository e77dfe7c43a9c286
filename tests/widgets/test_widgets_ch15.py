"""The decoding widget of chapter 15 shows the distribution that sampling draws from."""

import matplotlib.pyplot as plt
import numpy as np
import torch

from attnbook.torch import GPT, GPTConfig, sample_next
from attnbook.torch.decoding import next_token_distribution
from attnbook.widgets import controls, decoding_explorer


def test_next_token_distribution_is_the_renormalised_softmax_of_the_top_k():
    logits = torch.tensor([2.0, -1.0, 0.5, 3.0, 0.0])
    for t in (0.5, 1.0, 3.0):
        for k in (1, 2, 4, None):
            p = np.exp(logits.double().numpy() / t)
            keep = np.argsort(-logits.numpy())[: (k or len(p))]
            want = np.zeros_like(p)
            want[keep] = p[keep] / p[keep].sum()
            np.testing.assert_allclose(next_token_distribution(logits.double(), t, k).numpy(), want, rtol=1e-12)
    # sampling draws from that distribution: frequencies of many draws agree with it
    g = torch.Generator().manual_seed(0)
    draws = sample_next(logits.repeat(20_000, 1), temperature=2.0, top_k=3, generator=g)[:, 0]
    freq = np.bincount(draws.numpy(), minlength=5) / 20_000
    np.testing.assert_allclose(freq, next_token_distribution(logits, 2.0, 3).numpy(), atol=0.015)


def test_decoding_explorer_draws_the_distribution_at_its_settings():
    torch.manual_seed(0)
    vocab = [f"w{i}" for i in range(7)]
    model = GPT(GPTConfig(vocab_size=7, block_size=8, n_layers=1, n_heads=2, d_model=16)).eval()
    prompt = [1, 4, 2]
    box = decoding_explorer(model, prompt, vocab)
    assert controls(box) == {"temperature": (0.1, 10.0, 1.0), "top-k (k = V keeps all)": (1, 7, 7)}
    temperature, k = box.children[0].children
    temperature.value = 0.5
    k.value = 3
    with torch.no_grad():
        logits = model(torch.tensor([prompt]))[0, -1]
    want = next_token_distribution(logits.double(), 0.5, 3).numpy()  # the widget draws it in float64
    ax = plt.gcf().axes[0]
    np.testing.assert_allclose([b.get_height() for b in ax.patches], want)
    assert (want > 0).sum() == 3
    assert ax.get_xlabel() and ax.get_ylabel()
