"""Chapter 28's token-level circuits, each against an oracle: the model's own modules run on a residual stream
built by hand (the layer's projections and rotation for the K-circuit, the final LayerNorm and unembedding for the
OV circuit), explicit eigenvalues of matrices with a known spectrum, and argmax counts by loop."""

import copy

import numpy as np
import pytest
import torch

from attnbook.torch.attn_only import AttnOnlyConfig, AttnOnlyTransformer
from attnbook.torch.circuits import diagonal_top_share, eigenvalue_signs, full_ov_circuit, k_circuit, ov_matrix


def model(positions="rotary", n_layers=2, bias=False, seed=0):
    torch.manual_seed(seed)
    m = AttnOnlyTransformer(AttnOnlyConfig(vocab_size=11, block_size=24, n_layers=n_layers, n_heads=2, d_model=8,
                                           positions=positions, bias=bias))
    with torch.no_grad():
        for p in m.parameters():
            p.normal_(0, 0.5)
    return m.eval()


@pytest.mark.parametrize("positions", ["rotary", "learned"])
@pytest.mark.parametrize("offset", [1, 3, 7])
def test_k_circuit_is_the_later_heads_score_on_a_stream_built_by_hand(positions, offset):
    m = model(positions)
    first, second = m.layers[0], m.layers[1]
    for earlier, later in (((0, 0), (1, 1)), ((0, 1), (1, 0))):
        got = k_circuit(m, earlier, later, offset)
        assert got.shape == (11, 11)
        for a, b in ((0, 0), (3, 5), (10, 2)):
            x = torch.zeros(1, offset + 1, 8)  # the key at position 0, the query at position offset
            with torch.no_grad():
                x[0, 0] = m.tok.E[b] @ ov_matrix(first, earlier[1])  # all the key's position holds
                x[0, offset] = m.tok.E[a]  # and the query's position its token alone
                q, k, _ = second._project(x, None, None)  # (1, h, T, d_head): projected and rotated by the layer
            want = q[0, later[1], offset] @ k[0, later[1], 0] / 2  # sqrt(d_head) = 2
            torch.testing.assert_close(got[a, b], want, rtol=1e-4, atol=1e-5)


def test_k_circuit_refuses_heads_in_the_wrong_order_and_a_negative_offset():
    m = model()
    with pytest.raises(ValueError, match="earlier layer"):
        k_circuit(m, (1, 0), (1, 1), 2)
    with pytest.raises(ValueError, match="offset"):
        k_circuit(m, (0, 0), (1, 1), -1)


@pytest.mark.parametrize("bias", [False, True])
def test_full_ov_circuit_is_the_final_norm_and_unembedding_up_to_their_scale_and_shift(bias):
    m = model(bias=bias)
    for layer, head in ((0, 1), (1, 0)):
        got = full_ov_circuit(m, layer, head)
        with torch.no_grad():
            written = m.tok.E @ ov_matrix(m.layers[layer], head)  # (V, d_model)
            logits = m.unembed(m.norm(written))  # the model's own final norm and unembedding
            shift = m.unembed(torch.zeros(1, 8) + m.norm.beta) if m.norm.beta is not None else 0
            scale = torch.sqrt(written.var(-1, unbiased=False, keepdim=True) + m.norm.eps)
        torch.testing.assert_close(got, (logits - shift) * scale, rtol=1e-4, atol=1e-4)


def test_full_ov_circuit_of_a_model_without_a_final_norm_is_e_ov_wu():
    torch.manual_seed(1)
    m = AttnOnlyTransformer(AttnOnlyConfig(vocab_size=7, n_layers=1, n_heads=2, d_model=8, final_norm=False))
    with torch.no_grad():
        want = m.unembed(m.tok.E @ m.layers[0].W_v[:, 4:] @ m.layers[0].W_o[4:])
    torch.testing.assert_close(full_ov_circuit(m, 0, 1), want)


def test_diagonal_top_share_counts_rows_by_loop():
    g = torch.Generator().manual_seed(3)
    for _ in range(5):
        M = torch.randn(9, 9, generator=g) + 1.5 * torch.eye(9)
        want = sum(int(np.argmax(M[i].numpy()) == i) for i in range(9)) / 9
        assert diagonal_top_share(M) == pytest.approx(want)
    assert diagonal_top_share(torch.eye(4)) == 1.0 and diagonal_top_share(-torch.eye(4)) == 0.0
    with pytest.raises(ValueError, match="square"):
        diagonal_top_share(torch.ones(2, 3))


def test_eigenvalue_signs_of_matrices_with_a_known_spectrum():
    g = torch.Generator().manual_seed(4)
    P = torch.randn(6, 6, generator=g, dtype=torch.float64)  # a change of basis: similar matrices share eigenvalues
    spectrum = torch.tensor([3.0, 2.0, 1.0, 0.5, -1.0, -0.5], dtype=torch.float64)
    M = P @ torch.diag(spectrum) @ torch.linalg.inv(P)
    share, score = eigenvalue_signs(M)
    assert share == pytest.approx(4 / 6) and score == pytest.approx(5.0 / 8.0)
    rotation = torch.tensor([[0.0, -1.0], [1.0, 0.0]])  # eigenvalues +i and -i: no real part
    assert eigenvalue_signs(rotation) == (0.0, pytest.approx(0.0))
    assert eigenvalue_signs(2 * torch.eye(3)) == (1.0, pytest.approx(1.0))


def test_head_outputs_sum_to_the_layer_output():
    m = model(bias=True)
    ids = torch.randint(11, (3, 10), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        x = m.tok.E[ids]
        out0 = m.layers[0](x, causal=True)[0]
        out1 = m.layers[1](x + out0, causal=True)[0]
    for layer, out in ((0, out0), (1, out1)):
        parts = m.head_outputs(ids, layer)
        assert parts.shape == (3, 2, 10, 8)
        torch.testing.assert_close(parts.sum(1) + m.layers[layer].b_o, out, rtol=1e-5, atol=1e-5)
        with m.ablate(layer, [0]):  # what is left without head 0 is head 1's part
            ablated = m.head_outputs(ids, layer)
        torch.testing.assert_close(ablated[:, 0], torch.zeros_like(ablated[:, 0]))


def test_mean_ablation_writes_the_replacement_in_place_of_the_heads():
    m = model()
    ids = torch.randint(11, (4, 10), generator=torch.Generator().manual_seed(6))
    mean = m.head_outputs(ids, 0)[:, 1].mean(0)  # (T, d_model)
    replaced = copy.deepcopy(m)
    written = {}

    def hook(module, args, output):  # the oracle: the layer's output with head 1's part swapped for its mean
        parts = m.head_outputs(ids, 0) if not written else written["parts"]
        written["parts"] = parts
        return (output[0] - parts[:, 1] + mean,) + tuple(output[1:])

    handle = replaced.layers[0].register_forward_hook(hook)
    want = replaced(ids)
    handle.remove()
    with m.ablate(0, [1], replacement=mean):
        got = m(ids)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    with m.ablate(0, [1]):
        zero = m(ids)
    assert not torch.allclose(got, zero)  # the mean is not nothing
    torch.testing.assert_close(m(ids), replaced(ids))  # both hooks are gone after their blocks
