"""Chapter 28's attention-only model, its data and its scores, each against an oracle: a hand computation with
the package's attention functions, zeroed weights, hand-built attention maps, and the column-convention
formulas of Elhage et al. (2021) computed from explicit matrices."""

import copy
import math

import numpy as np
import pytest
import torch

from attnbook.data.repeats import copy_masks, repeated_segments
from attnbook.torch import causal_mask, layer_norm, multi_head_attention
from attnbook.torch.attention import scaled_dot_product_attention
from attnbook.torch.attn_only import AttnOnlyConfig, AttnOnlyTransformer, token_losses
from attnbook.torch.circuits import (
    composition_score,
    composition_scores,
    induction_score,
    induction_targets,
    k_composition,
    ov_matrix,
    previous_token_score,
    q_composition,
    qk_matrix,
    random_composition,
    v_composition,
)
from attnbook.torch.multihead import MultiHeadAttention, merge_heads, split_heads
from attnbook.torch.rotary import apply_rotary
from attnbook.training.induction import InductionConfig, copy_losses, steepest_drop, train_induction


def model(positions="learned", n_layers=1, final_norm=True, seed=0, **sizes):
    torch.manual_seed(seed)
    m = AttnOnlyTransformer(AttnOnlyConfig(vocab_size=11, block_size=12, n_layers=n_layers, n_heads=2, d_model=8,
                                           positions=positions, final_norm=final_norm, **sizes))
    with torch.no_grad():  # make every parameter count: random biases and norm parameters too
        for p in m.parameters():
            p.normal_(0, 0.5)
    return m.eval()


def ids_batch(B=3, T=9, V=11, seed=1):
    return torch.randint(V, (B, T), generator=torch.Generator().manual_seed(seed))


def test_one_layer_equals_a_hand_computation_with_the_package_attention():
    m = model(bias=True)
    ids = ids_batch()
    x = m.tok.E[ids] + m.pos.P[: ids.shape[1]]  # (B, T, d_model)
    attn = m.layers[0]
    out, _ = multi_head_attention(x, x, attn, 2, mask=causal_mask(ids.shape[1]))
    x = x + out
    want = layer_norm(x, m.norm.gamma, m.norm.beta) @ m.unembed.W_u
    torch.testing.assert_close(m(ids), want, rtol=1e-5, atol=1e-5)


def test_one_rotary_layer_equals_rotated_queries_and_keys_by_hand():
    m = model("rotary", final_norm=False)
    assert m.pos is None
    ids = ids_batch()
    x = m.tok.E[ids]
    attn = m.layers[0]
    q, k, v = (split_heads(x @ W, 2) for W in (attn.W_q, attn.W_k, attn.W_v))  # (B, h, T, d_head)
    heads, _ = scaled_dot_product_attention(apply_rotary(q), apply_rotary(k), v, mask=causal_mask(ids.shape[1]))
    want = (x + merge_heads(heads) @ attn.W_o) @ m.unembed.W_u
    torch.testing.assert_close(m(ids), want, rtol=1e-5, atol=1e-5)


def test_two_layers_are_two_residual_additions():
    m = model(n_layers=2, final_norm=False)
    ids = ids_batch()
    T = ids.shape[1]
    x = m.tok.E[ids] + m.pos.P[:T]
    for attn in m.layers:
        x = x + multi_head_attention(x, x, attn, 2, mask=causal_mask(T))[0]
    torch.testing.assert_close(m(ids), x @ m.unembed.W_u, rtol=1e-5, atol=1e-5)


def test_the_future_cannot_change_the_past():
    m = model("rotary", n_layers=2)
    ids = ids_batch()
    changed = ids.clone()
    changed[:, 6:] = (changed[:, 6:] + 1) % 11
    torch.testing.assert_close(m(ids)[:, :6], m(changed)[:, :6])
    assert not torch.allclose(m(ids)[:, 6:], m(changed)[:, 6:])


def test_ids_errors_name_the_shape_and_the_limit():
    m = model(n_layers=1)
    with pytest.raises(ValueError, match=r"ids must be a tensor of shape \(B, T\); got torch.Size\(\[9\]\)"):
        m(ids_batch()[0])
    with pytest.raises(ValueError, match=r"ids must be a tensor of shape \(B, T\); got <class 'list'>"):
        m.residual([[1, 2, 3]])
    too_long = torch.zeros(1, m.config.block_size + 1, dtype=torch.long)
    with pytest.raises(ValueError, match=f"sequence of length {m.config.block_size + 1} is longer than block_size = "
                                         f"{m.config.block_size}"):
        m(too_long)


@pytest.mark.parametrize("layer, heads", [(0, [1]), (1, [0]), (1, [0, 1])])
def test_ablation_equals_zeroing_the_heads_rows_of_the_output_projection(layer, heads):
    m = model(n_layers=2, bias=True)
    ids = ids_batch()
    zeroed = copy.deepcopy(m)
    d_head = 4
    with torch.no_grad():
        for h in heads:  # the head's slice of the output projection's input meets these rows of W_o
            zeroed.layers[layer].W_o[h * d_head:(h + 1) * d_head] = 0
    with m.ablate(layer, heads):
        ablated = m(ids)
    torch.testing.assert_close(ablated, zeroed(ids))
    assert not torch.allclose(ablated, m(ids))  # the ablation is undone after the block
    with pytest.raises(ValueError, match="layer must lie"):
        with m.ablate(2, [0]):
            pass


def test_attention_maps_are_each_layers_weights():
    m = model(n_layers=2, final_norm=False)
    ids = ids_batch()
    maps = m.attention_maps(ids)
    assert len(maps) == 2 and all(w.shape == (3, 2, 9, 9) for w in maps)
    x = m.tok.E[ids] + m.pos.P[:9]
    for attn, w in zip(m.layers, maps, strict=True):
        out, want = multi_head_attention(x, x, attn, 2, mask=causal_mask(9))
        torch.testing.assert_close(w, want)
        x = x + out


def test_token_losses_are_the_negative_log_probabilities_of_the_next_tokens():
    m = model(n_layers=2)
    ids = ids_batch()
    log_p = torch.log_softmax(m(ids), -1).detach()
    losses = token_losses(m, ids)
    assert losses.shape == (3, 8)
    for b in range(3):
        for s in range(1, 9):
            assert math.isclose(float(losses[b, s - 1]), -float(log_p[b, s - 1, ids[b, s]]), rel_tol=1e-5)


def test_repeated_segments_repeat_and_draw_every_id():
    ids = repeated_segments(200, 7, 5, torch.Generator().manual_seed(0))
    assert ids.shape == (200, 14) and ids.dtype == torch.int64
    assert torch.equal(ids[:, :7], ids[:, 7:])
    counts = torch.bincount(ids[:, :7].flatten(), minlength=5)
    assert counts.min() > 200 * 7 / 5 * 0.8  # about uniform
    again = repeated_segments(200, 7, 5, torch.Generator().manual_seed(0))
    assert torch.equal(ids, again)
    with pytest.raises(ValueError):
        repeated_segments(2, 0, 5)


def test_copy_masks_pick_the_same_offsets_in_each_copy():
    first, second = copy_masks(5)
    targets = torch.arange(1, 10)  # the position of the token each entry predicts
    assert targets[first].tolist() == [1, 2, 3, 4] and targets[second].tolist() == [6, 7, 8, 9]


def test_copy_losses_average_token_losses_over_each_copy():
    m = model(n_layers=2)
    ids = repeated_segments(4, 5, 11, torch.Generator().manual_seed(3))
    first, second = copy_losses(m, ids)
    losses = token_losses(m, ids)
    torch.testing.assert_close(first, losses[:, 0:4].mean(1))  # tokens 1..4 are entries 0..3
    torch.testing.assert_close(second, losses[:, 5:9].mean(1))  # tokens 6..9 are entries 5..8
    with pytest.raises(ValueError, match="repeats"):
        copy_losses(m, ids_batch(T=10))


def targets_by_loops(row):
    out = []
    for t, token in enumerate(row):
        earlier = [p for p in range(t) if row[p] == token]
        out.append(earlier[-1] + 1 if earlier else -1)
    return out


def test_induction_targets_match_loops():
    g = torch.Generator().manual_seed(4)
    for ids in (torch.tensor([3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5]), torch.randint(4, (5, 17), generator=g),
                repeated_segments(3, 6, 50, g), torch.tensor([7, 7, 7])):
        got = induction_targets(ids)
        rows = ids.tolist() if ids.dim() == 2 else [ids.tolist()]
        want = [targets_by_loops(r) for r in rows]
        assert (got.tolist() if ids.dim() == 2 else [got.tolist()]) == want
    with pytest.raises(ValueError):
        induction_targets(torch.zeros(2, 3))


def attention_to(keys, T):
    """(T, T) weights putting all of query t's weight on key keys[t], or on key 0 where keys[t] is -1."""
    w = torch.zeros(T, T)
    for t, k in enumerate(keys):
        w[t, max(k, 0)] = 1
    return w


def test_scores_are_one_on_their_own_patterns_and_small_on_others():
    ids = repeated_segments(1, 8, 1000, torch.Generator().manual_seed(5))  # distinct tokens in the segment
    assert len(set(ids[0, :8].tolist())) == 8
    T = 16
    previous = attention_to([-1] + list(range(T - 1)), T)
    induction = attention_to(induction_targets(ids[0]).tolist(), T)
    itself = attention_to(list(range(T)), T)
    weights = torch.stack([previous, induction, itself])[None]  # (1, 3, T, T)
    prev_scores = previous_token_score(weights)[0]
    ind_scores = induction_score(weights, ids)[0]
    torch.testing.assert_close(prev_scores[0], torch.tensor(1.0))
    torch.testing.assert_close(ind_scores[1], torch.tensor(1.0))
    # on the second copy an induction head's target is t - 7 and a previous-token head's is t - 1
    assert prev_scores[1] < 0.1 and prev_scores[2] == 0 and ind_scores[0] == 0 and ind_scores[2] == 0
    uniform = (causal_mask(T).float() / torch.arange(1, T + 1.0)[:, None])[None, None]  # (1, 1, T, T)
    assert 0 < induction_score(uniform, ids)[0, 0] < 0.1 and 0 < previous_token_score(uniform)[0, 0] < 0.25


def column_k_composition(W_Q2, W_K2, W_V1, W_O1):
    """Elhage et al.'s formula in their column convention: W_QK = W_Q^T W_K, W_OV = W_O W_V."""
    W_QK = W_Q2.T @ W_K2
    W_OV = W_O1 @ W_V1
    return np.linalg.norm(W_QK @ W_OV) / (np.linalg.norm(W_QK) * np.linalg.norm(W_OV))


def column_q_composition(W_Q2, W_K2, W_V1, W_O1):
    W_QK, W_OV = W_Q2.T @ W_K2, W_O1 @ W_V1
    return np.linalg.norm(W_QK.T @ W_OV) / (np.linalg.norm(W_QK) * np.linalg.norm(W_OV))


def column_v_composition(W_V2, W_O2, W_V1, W_O1):
    W_OV2, W_OV1 = W_O2 @ W_V2, W_O1 @ W_V1
    return np.linalg.norm(W_OV2 @ W_OV1) / (np.linalg.norm(W_OV2) * np.linalg.norm(W_OV1))


def column_weights(attn, head):
    """Head ``head``'s W_Q, W_K, W_V (d_head, d_model) and W_O (d_model, d_head), the column convention."""
    d_head = attn.d_model // attn.n_heads
    s = slice(head * d_head, (head + 1) * d_head)
    return tuple(W.detach().double().numpy() for W in (attn.W_q[:, s].T, attn.W_k[:, s].T, attn.W_v[:, s].T,
                                                       attn.W_o[s, :].T))


def test_composition_scores_match_the_column_convention_formulas():
    torch.manual_seed(6)
    earlier, later = MultiHeadAttention(12, 3, bias=False), MultiHeadAttention(12, 3, bias=False)
    for kind, formula in (("k", column_k_composition), ("q", column_q_composition)):
        table = composition_scores(earlier, later, kind)
        assert table.shape == (3, 3)
        for j in range(3):
            for i in range(3):
                Q2, K2, _, _ = column_weights(later, j)
                _, _, V1, O1 = column_weights(earlier, i)
                assert math.isclose(float(table[j, i]), formula(Q2, K2, V1, O1), rel_tol=1e-4)
    table = composition_scores(earlier, later, "v")
    _, _, V2, O2 = column_weights(later, 2)
    _, _, V1, O1 = column_weights(earlier, 0)
    assert math.isclose(float(table[2, 0]), column_v_composition(V2, O2, V1, O1), rel_tol=1e-4)


def test_qk_and_ov_matrices_give_the_heads_scores_and_outputs():
    torch.manual_seed(7)
    attn = MultiHeadAttention(8, 2, bias=False)
    x = torch.randn(5, 8)
    q, k, v = (split_heads(x @ W, 2) for W in (attn.W_q, attn.W_k, attn.W_v))  # (h, T, d_head)
    for h in range(2):
        torch.testing.assert_close(x @ qk_matrix(attn, h) @ x.T, q[h] @ k[h].T)
        torch.testing.assert_close(x @ ov_matrix(attn, h), v[h] @ attn.W_o[4 * h:4 * h + 4])


def test_composition_is_invariant_to_scaling_and_bounded():
    g = torch.Generator().manual_seed(8)
    qk, ov = torch.randn(6, 6, generator=g, dtype=torch.float64), torch.randn(6, 6, generator=g, dtype=torch.float64)
    for f in (k_composition, q_composition, v_composition):
        base = f(qk, ov)
        torch.testing.assert_close(f(3.0 * qk, 0.01 * ov), base)
        assert 0 < float(base) <= 1
    # k and q differ by the transpose of QK: equal for a symmetric QK, not in general
    torch.testing.assert_close(k_composition(qk + qk.T, ov), q_composition(qk + qk.T, ov))
    assert not torch.isclose(k_composition(qk, ov), q_composition(qk, ov))
    # 1 exactly when the product's norm is the product of the norms: rank-one matrices that line up
    u, w = torch.randn(6, 1, generator=g, dtype=torch.float64), torch.randn(1, 6, generator=g, dtype=torch.float64)
    torch.testing.assert_close(composition_score(w.T @ u.T, u @ w), torch.tensor(1.0, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"need two matrices that multiply, \(m, n\) and \(n, p\); got \(2, 3\) and "
                                         r"\(2, 3\)"):
        composition_score(torch.ones(2, 3), torch.ones(2, 3))


def test_random_composition_matches_a_direct_draw():
    scores = random_composition(16, 4, "k", n=400, generator=torch.Generator().manual_seed(9))
    assert scores.shape == (400,) and bool((scores > 0).all()) and bool((scores < 1).all())
    g = torch.Generator().manual_seed(10)
    direct = []
    for _ in range(400):
        Q, K, V = (torch.randn(16, 4, generator=g, dtype=torch.float64) for _ in range(3))
        W_O = torch.randn(4, 16, generator=g, dtype=torch.float64)
        direct.append(column_k_composition(Q.T.numpy(), K.T.numpy(), V.T.numpy(), W_O.T.numpy()))
    # two independent samples of the same distribution: their means agree to a few standard errors
    se = float(np.std(direct)) / math.sqrt(400)
    assert abs(float(scores.mean()) - float(np.mean(direct))) < 5 * math.sqrt(2) * se


def test_steepest_drop_finds_a_step_and_a_ramp():
    steps = np.arange(1000)
    step_curve = np.where(steps < 600, 3.0, 0.5)
    start, share = steepest_drop(step_curve, width=50, smooth=10)
    assert 550 <= start <= 600 and share == 1.0  # the whole fall lies inside one window of 50 steps
    ramp = np.clip(3.0 - (steps - 200) * 2.5 / 500, 0.5, 3.0)  # falls evenly from step 200 to 700
    start, share = steepest_drop(ramp, width=100, smooth=1)
    assert 200 <= start <= 600 and abs(share - 100 / 500) < 1e-9
    by_loop = max((ramp[i] - ramp[i + 100]) for i in range(900)) / (ramp[0] - ramp[-1])
    assert abs(share - by_loop) < 1e-12
    with pytest.raises(ValueError, match="does not fall"):
        steepest_drop(np.ones(100), width=10, smooth=5)


def test_a_short_training_run_logs_both_copies_and_learns():
    config = InductionConfig(vocab_size=8, min_len=3, max_len=5, d_model=16, n_heads=2, steps=60, batch_size=8,
                             warmup=5)
    run = train_induction(config)
    assert len(run.log) == 60 and set(run.log[0]) == {"step", "length", "loss", "first", "second"}
    assert {e["length"] for e in run.log} <= {3, 4, 5} and len({e["length"] for e in run.log}) == 3
    # the first entry: the fresh model's losses on the first batch, drawn again here from the same seeds
    torch.manual_seed(config.seed)
    fresh = AttnOnlyTransformer(config.model_config())
    g = torch.Generator().manual_seed(config.seed)
    L = int(torch.randint(config.min_len, config.max_len + 1, (1,), generator=g))
    first, second = copy_losses(fresh, repeated_segments(config.batch_size, L, config.vocab_size, g))
    assert run.log[0]["length"] == L
    assert math.isclose(run.log[0]["first"], float(first.mean()), rel_tol=1e-5)
    assert math.isclose(run.log[0]["second"], float(second.mean()), rel_tol=1e-5)
    assert not any(torch.equal(p, q) for p, q in zip(run.model.parameters(), fresh.parameters(), strict=True))
    again = train_induction(config)
    np.testing.assert_array_equal(run.curve("second"), again.curve("second"))  # seeded: it repeats exactly


def test_the_probe_runs_every_few_steps_and_its_values_are_logged():
    config = InductionConfig(vocab_size=8, min_len=3, max_len=4, d_model=16, n_heads=2, steps=30, batch_size=4,
                             warmup=5)
    seen = []

    def probe(m):
        seen.append(m.training)
        return {"n": float(len(seen))}

    run = train_induction(config, probe=probe, probe_every=10)
    steps, values = run.probed("n")
    assert steps.tolist() == [0, 10, 20] and values.tolist() == [1.0, 2.0, 3.0] and seen == [False] * 3
    plain = train_induction(config)
    np.testing.assert_array_equal(run.curve("loss"), plain.curve("loss"))  # the probe changes nothing
