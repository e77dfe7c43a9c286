"""Measuring what attention heads do (chapter 18): scores against loops, ablation against a manual zeroing."""

import math

import pytest
import torch

import attnbook.torch as at


def causal_weights(h: int, T: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    scores = torch.randn(2, h, T, T, generator=g, dtype=torch.float64)
    scores = scores.masked_fill(~at.causal_mask(T), float("-inf"))
    return scores.softmax(dim=-1)  # (B, h, T, T)


def test_offset_score_matches_a_loop():
    w = causal_weights(3, 7)
    for offset in (-1, -3, 0):
        loop = torch.zeros(2, 3, dtype=torch.float64)
        queries = [t for t in range(7) if 0 <= t + offset < 7]
        for t in queries:
            loop += w[..., t, t + offset]
        torch.testing.assert_close(at.offset_score(w, offset), loop / len(queries))
    assert torch.allclose(at.offset_score(torch.eye(5).expand(2, 5, 5), 0), torch.ones(2))
    with pytest.raises(ValueError, match="T_q == T_k"):
        at.offset_score(torch.rand(1, 3, 4), -1)
    with pytest.raises(ValueError, match="offset must lie"):
        at.offset_score(w, 7)


def test_weight_on_picks_one_key_per_query():
    w = causal_weights(3, 6)  # (2, 3, 6, 6)
    keys = torch.tensor([0, 0, 1, 1, 2, 5])
    loop = sum(w[..., q, k] for q, k in enumerate(keys.tolist())) / 6
    torch.testing.assert_close(at.weight_on(w, keys), loop)
    torch.testing.assert_close(at.weight_on(w, torch.arange(6)), at.offset_score(w, 0))
    per_input = torch.tensor([[-1, 0, 0, 2, 2, 2], [0, 1, 2, 3, 4, -1]])  # -1: query left out
    expected = torch.stack([sum(w[0, :, q, k] for q, k in [(1, 0), (2, 0), (3, 2), (4, 2), (5, 2)]) / 5,
                            sum(w[1, :, q, q] for q in range(5)) / 5])
    torch.testing.assert_close(at.weight_on(w, per_input), expected)
    with pytest.raises(ValueError, match=r"shape \(6,\) or \(2, 6\)"):
        at.weight_on(w, torch.arange(5))
    with pytest.raises(ValueError, match=r"\[0, 5\]"):
        at.weight_on(w, torch.full((6,), 6))


def test_most_recent_matches_a_loop():
    ids = torch.tensor([[5, 1, 5, 2, 2, 7, 1], [1, 1, 3, 3, 3, 3, 3]])
    got = at.most_recent(ids, [1, 2])
    for b in range(2):
        for t in range(7):
            before = [s for s in range(t) if int(ids[b, s]) in (1, 2)]
            assert int(got[b, t]) == (before[-1] if before else -1)
    with pytest.raises(ValueError, match=r"\(B, T\)"):
        at.most_recent(ids[0], [1])


def test_attention_entropy_extremes_and_a_loop():
    T = 6
    assert torch.allclose(at.attention_entropy(torch.eye(T)[None]), torch.zeros(1))
    uniform = torch.full((1, T, T), 1 / T, dtype=torch.float64)
    assert at.attention_entropy(uniform).item() == pytest.approx(math.log(T))
    w = causal_weights(2, T)
    loop = torch.stack([torch.tensor([sum(-p * math.log(p) for p in w[b, h, t].tolist() if p > 0)
                                      for t in range(T)]).mean() for b in range(2) for h in range(2)])
    torch.testing.assert_close(at.attention_entropy(w).flatten(), loop.double())


def test_ablating_a_head_equals_zeroing_its_value_weights():
    torch.manual_seed(0)
    attn = at.MultiHeadAttention(16, 4)
    x = torch.randn(2, 5, 16)
    with at.ablate_heads(attn, [1, 3]):
        ablated = attn(x, causal=True)[0]
    manual = at.MultiHeadAttention(16, 4)
    manual.load_state_dict(attn.state_dict())
    with torch.no_grad():  # a head whose values are all zero contributes nothing
        for h in (1, 3):
            manual.v_proj.W[:, h * 4:(h + 1) * 4] = 0
            manual.v_proj.b[h * 4:(h + 1) * 4] = 0
    torch.testing.assert_close(ablated, manual(x, causal=True)[0])
    assert not torch.allclose(attn(x, causal=True)[0], ablated)  # the hook is gone after the block
    with pytest.raises(ValueError, match=r"\[0, 3\]"):
        with at.ablate_heads(attn, [4]):
            pass
