"""Rotary position embeddings (chapter 21): the relative property, the complex form, the twins, the GPT option
with its key-value cache and its sliding cache, and checkpoints that keep the option."""

import math

import numpy as np
import pytest
import torch

import attnbook.numpy.rotary as nr
import attnbook.torch.rotary as tr
from attnbook.numpy.positional import sinusoidal_frequencies
from attnbook.torch import GPT, GPTConfig, KVCache, generate
from attnbook.torch.attention import masked_softmax
from attnbook.torch.masks import causal_mask
from attnbook.train import build_parser
from attnbook.training.lm import GPTRunConfig, load_gpt, preset, train_gpt


def rotation_matrix(pos: float, d: int, base: float = 10000.0) -> np.ndarray:
    """The oracle: the block rotation written out, pair i = dimensions (i, i + d/2), angle pos * theta_i."""
    R = np.zeros((d, d))
    for i in range(d // 2):
        a = pos * base ** (-2 * i / d)
        j = i + d // 2
        R[i, i], R[i, j], R[j, i], R[j, j] = math.cos(a), -math.sin(a), math.sin(a), math.cos(a)
    return R  # column convention: rotated = R @ x


def test_frequencies_are_chapter_11s_and_angles_multiply_positions():
    for d in (2, 8, 64):
        np.testing.assert_allclose(nr.rotary_frequencies(d), sinusoidal_frequencies(d), rtol=1e-15)
    np.testing.assert_allclose(nr.rotary_angles([0, 3], 8), np.outer([0, 3], sinusoidal_frequencies(8)))


def test_apply_rotary_is_the_block_rotation():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(5, 8))
    positions = np.array([0, 1, 7, 100, 2500])
    want = np.stack([rotation_matrix(p, 8) @ x[t] for t, p in enumerate(positions)])
    np.testing.assert_allclose(nr.apply_rotary(x, positions), want, atol=1e-12)
    # rotate_half turns every pair by 90 degrees: the block rotation with all angles pi/2
    quarter = np.zeros((8, 8))
    for i in range(4):
        quarter[i, i + 4], quarter[i + 4, i] = -1.0, 1.0
    np.testing.assert_array_equal(nr.rotate_half(x), x @ quarter.T)


def test_rotation_keeps_lengths():
    x = np.random.default_rng(1).normal(size=(3, 6, 16))
    np.testing.assert_allclose(np.linalg.norm(nr.apply_rotary(x), axis=-1), np.linalg.norm(x, axis=-1), rtol=1e-12)


@pytest.mark.parametrize("d", [2, 8, 32])
def test_score_depends_only_on_the_offset(d):
    rng = np.random.default_rng(d)
    q, k = rng.normal(size=(1, d)), rng.normal(size=(1, d))
    for offset in (-7, 0, 3, 50):
        scores = [float(nr.apply_rotary(q, [m])[0] @ nr.apply_rotary(k, [m - offset])[0]) for m in (60, 100, 1000)]
        # the oracle: one rotation by the offset, applied to the query alone
        direct = float(q[0] @ rotation_matrix(offset, d).T @ k[0])
        np.testing.assert_allclose(scores, direct, rtol=1e-9, atol=1e-9)
        # and in PyTorch
        qt, kt = torch.tensor(q), torch.tensor(k)
        s = [float(tr.apply_rotary(qt, torch.tensor([m]))[0] @ tr.apply_rotary(kt, torch.tensor([m - offset]))[0])
             for m in (60, 100, 1000)]
        np.testing.assert_allclose(s, direct, rtol=1e-9, atol=1e-9)


def test_complex_form_equals_rotate_half_form():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(2, 3, 7, 16))
    positions = rng.integers(0, 5000, size=7)
    np.testing.assert_allclose(nr.apply_rotary_complex(x, positions), nr.apply_rotary(x, positions), atol=1e-12)
    xt = torch.tensor(x)
    torch.testing.assert_close(tr.apply_rotary_complex(xt, torch.tensor(positions)),
                               tr.apply_rotary(xt, torch.tensor(positions)), atol=1e-12, rtol=0)
    x32 = xt.float()
    torch.testing.assert_close(tr.apply_rotary_complex(x32), tr.apply_rotary(x32))


def test_numpy_and_torch_twins_agree():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(4, 9, 12))
    pos = rng.integers(0, 300, size=9)
    np.testing.assert_allclose(tr.rotary_frequencies(12).numpy(), nr.rotary_frequencies(12), rtol=1e-15)
    np.testing.assert_allclose(tr.rotary_angles(torch.tensor(pos), 12).numpy(), nr.rotary_angles(pos, 12), rtol=1e-15)
    np.testing.assert_array_equal(tr.rotate_half(torch.tensor(x)).numpy(), nr.rotate_half(x))
    for f in ("apply_rotary", "apply_rotary_complex"):
        np.testing.assert_allclose(getattr(tr, f)(torch.tensor(x), torch.tensor(pos)).numpy(),
                                   getattr(nr, f)(x, pos), atol=1e-12)
        np.testing.assert_allclose(getattr(tr, f)(torch.tensor(x), base=500.0).numpy(),
                                   getattr(nr, f)(x, base=500.0), atol=1e-12)
    for T_q, T_k, w in ((5, 5, 2), (1, 9, 4), (3, 8, 8), (4, 4, 10)):
        np.testing.assert_array_equal(tr.sliding_window_mask(T_q, T_k, window=w).numpy(),
                                      nr.sliding_window_mask(T_q, T_k, window=w))


def test_sliding_window_mask_is_causal_mask_cut_to_the_window():
    for T, w in ((6, 2), (6, 6), (6, 20)):
        causal = causal_mask(T).numpy()
        band = np.tril(np.ones((T, T), bool), 0) & ~np.tril(np.ones((T, T), bool), -w)
        np.testing.assert_array_equal(nr.sliding_window_mask(T, window=w), causal & band)


def test_bad_input_is_refused():
    for mod, arr in ((nr, np.zeros((3, 5))), (tr, torch.zeros(3, 5))):
        with pytest.raises(ValueError, match="even"):
            mod.apply_rotary(arr)
    with pytest.raises(ValueError, match="positions"):
        nr.apply_rotary(np.zeros((3, 4)), [0, 1])
    with pytest.raises(ValueError, match="positions"):
        tr.apply_rotary(torch.zeros(3, 4), torch.tensor([0, 1]))
    with pytest.raises(ValueError, match="window"):
        tr.sliding_window_mask(3, window=0)
    with pytest.raises(ValueError, match="max_length"):
        KVCache(max_length=0)


# The GPT option.

def rotary_gpt(n_layers=2, block_size=8, **kw):
    torch.manual_seed(0)
    m = GPT(GPTConfig(vocab_size=13, block_size=block_size, n_layers=n_layers, n_heads=2, d_model=16,
                      positions="rotary", **kw))
    with torch.no_grad():  # larger weights than the initialisation, so positions matter to the predictions
        for p in m.parameters():
            p.add_(0.3 * torch.randn_like(p))
    return m.eval()


def test_positions_field_is_validated_and_fields_only_appended():
    from dataclasses import fields

    from attnbook.torch import GPTShape
    names = [f.name for f in fields(GPTShape)]
    # Fields are only ever appended: a GPTShape built with positional arguments keeps its meaning.
    assert names[:names.index("positions") + 1] == ["block_size", "n_layers", "n_heads", "d_model", "d_ff", "dropout",
                                                    "activation", "eps", "bias", "n_kv_heads", "norm", "positions"]
    assert names[names.index("positions") + 1:] == ["qk_norm", "tie_embeddings", "rope_base", "logit_softcap"]
    assert GPTConfig(vocab_size=5).positions == "learned" and GPTRunConfig().positions == "learned"
    with pytest.raises(ValueError, match="positions must be one of 'learned', 'rotary'"):
        GPTConfig(vocab_size=5, positions="sinusoidal")
    with pytest.raises(ValueError, match="even"):
        GPTConfig(vocab_size=5, d_model=6, n_heads=2, positions="rotary")
    assert build_parser().parse_args(["gpt", "--positions", "rotary"]).positions == "rotary"


def test_rotary_gpt_has_no_position_table():
    learned = GPT(GPTConfig(vocab_size=13, block_size=8, n_layers=1, n_heads=2, d_model=16))
    rotary = GPT(GPTConfig(vocab_size=13, block_size=8, n_layers=1, n_heads=2, d_model=16, positions="rotary"))
    assert rotary.pos is None and "pos.P" not in rotary.state_dict()
    assert set(learned.state_dict()) - set(rotary.state_dict()) == {"pos.P"}
    assert rotary.n_params() == learned.n_params(include_positions=False) == rotary.n_params(include_positions=False)


@pytest.mark.parametrize("base", [10000.0, 500000.0])
def test_rotary_attention_matches_a_hand_computation(base):
    m = rotary_gpt(n_layers=1, rope_base=base)
    ids = torch.randint(13, (2, 7))
    block = m.blocks[0]
    attn = block.self_attn
    # the oracle, written out: embeddings, layer norm, projections, rotation per head (NumPy), causal softmax
    with torch.no_grad():
        h = block.norm1(m.tok(ids))
        q = (h @ attn.W_q + attn.b_q).reshape(2, 7, 2, 8).transpose(1, 2)
        k = (h @ attn.W_k + attn.b_k).reshape(2, 7, 2, 8).transpose(1, 2)
        v = (h @ attn.W_v + attn.b_v).reshape(2, 7, 2, 8).transpose(1, 2)
        q = torch.tensor(nr.apply_rotary(q.double().numpy(), base=base), dtype=torch.float32)
        k = torch.tensor(nr.apply_rotary(k.double().numpy(), base=base), dtype=torch.float32)
        w = masked_softmax(q @ k.transpose(-2, -1) / math.sqrt(8), causal_mask(7))
        heads = (w @ v).transpose(1, 2).reshape(2, 7, 16)
        x = m.tok(ids) + heads @ attn.W_o + attn.b_o
        x = x + block.ff(block.norm3(x))
        want = m.norm(x) @ m.tok.E.T
        torch.testing.assert_close(m(ids), want, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16])
def test_cached_tables_rotate_exactly_as_the_formula(dtype):
    tables = tr.RotaryTables(8, 16, base=500.0)
    x = torch.randn(2, 3, 10, 8, dtype=torch.float64).to(dtype)
    for start in (0, 5, 30):  # 30: past the 16 tabulated positions, so the tables grow
        want = tr.apply_rotary(x, torch.arange(start, start + 10), base=500.0)
        assert torch.equal(tables(x, start), want)
    assert tables.cos.shape == (40, 8) and tables.cos.dtype == torch.float64
    tables.float()  # a cast of the module rebuilds the tables in float64 rather than rounding them
    assert tables.cos.dtype == torch.float64
    assert torch.equal(tables(x, 3), tr.apply_rotary(x, torch.arange(3, 13), base=500.0))
    assert "cos" not in tables.state_dict()  # recomputed, never saved


def test_a_rotary_gpt_tabulates_once_for_its_context_and_base():
    m = GPT(GPTConfig(vocab_size=13, block_size=8, n_layers=3, n_heads=2, d_model=16, positions="rotary",
                      rope_base=500000))
    tables = {id(block.self_attn.rope) for block in m.blocks}
    rope = m.blocks[0].self_attn.rope
    assert len(tables) == 1 and rope.cos.shape == (8, 8)
    torch.testing.assert_close(rope.cos[:, :4], torch.cos(torch.arange(8.0, dtype=torch.float64)[:, None]
                                                          * 500000.0 ** (-torch.arange(0, 8, 2) / 8)))
    assert GPTConfig(vocab_size=5).rope_base == 10000.0 and set(m.state_dict()) == set(
        GPT(GPTConfig(vocab_size=13, block_size=8, n_layers=3, n_heads=2, d_model=16, positions="rotary")).state_dict())
    for bad in (1.0, 0, "10000", True):
        with pytest.raises(ValueError, match="rope_base"):
            GPTConfig(vocab_size=5, positions="rotary", rope_base=bad)


def test_rotary_gpt_with_grouped_query_attention_runs_and_caches():
    m = rotary_gpt(n_layers=2, n_kv_heads=1)
    ids = torch.randint(13, (2, 8))
    cache = KVCache()
    parts = [m(ids[:, :3], cache=cache)] + [m(ids[:, t:t + 1], cache=cache) for t in range(3, 8)]
    torch.testing.assert_close(torch.cat(parts, 1), m(ids), atol=1e-5, rtol=1e-5)


def test_rotary_kv_cache_equals_the_full_forward():
    m = rotary_gpt()
    ids = torch.randint(13, (3, 8))
    cache = KVCache()
    parts = [m(ids[:, :2], cache=cache), m(ids[:, 2:5], cache=cache), m(ids[:, 5:6], cache=cache),
             m(ids[:, 6:], cache=cache)]
    assert cache.length == cache.position == 8
    torch.testing.assert_close(torch.cat(parts, 1), m(ids), atol=1e-5, rtol=1e-5)


def test_rotary_runs_past_block_size_and_scores_are_shift_invariant():
    m = rotary_gpt(block_size=8)
    ids = torch.randint(13, (2, 20))
    assert m(ids).shape == (2, 20, 13)  # no table to run out of
    # Shifting every position by 40 changes no score: a cache that has seen 40 other tokens (and was cut
    # by its window so they are out of sight) leaves the logits of the next 8 tokens as they were at 0.
    cache = KVCache(max_length=1)
    m(torch.randint(13, (2, 40)), cache=cache)
    assert cache.position == 40
    cache.max_length = None
    cache.keys = {k: v[..., :0, :] for k, v in cache.keys.items()}
    cache.values = {k: v[..., :0, :] for k, v in cache.values.items()}
    torch.testing.assert_close(m(ids[:, :8], cache=cache), m(ids[:, :8]), atol=1e-5, rtol=1e-5)


def stepped(m, ids, prompt, cache):
    """Logits of every position of ids, the prompt in one call, then one token per call."""
    parts = [m(ids[:, :prompt], cache=cache)] + [m(ids[:, t:t + 1], cache=cache) for t in range(prompt, ids.shape[1])]
    return torch.cat(parts, 1)


def test_sliding_cache_before_the_window_is_full_equals_recomputation():
    m = rotary_gpt(block_size=8)
    ids = torch.randint(13, (2, 8))
    cache = KVCache(max_length=8)
    torch.testing.assert_close(stepped(m, ids, 3, cache), m(ids), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("prompt", [1, 5, 12])  # a prompt longer than the window too
def test_sliding_cache_equals_sliding_window_attention(prompt):
    m = rotary_gpt(block_size=8)
    ids = torch.randint(13, (2, 30))
    cache = KVCache(max_length=8)
    got = stepped(m, ids, prompt, cache)
    assert cache.length == 8 and cache.position == 30
    # the direct reference: the whole sequence at its absolute positions, each position seeing its last 8
    torch.testing.assert_close(got, m(ids, window=8), atol=1e-5, rtol=1e-5)
    # the reference written out without the model's window argument: the mask given to every block
    with torch.no_grad():
        x = m.tok(ids)
        for block in m.blocks:
            x = block(x, self_mask=torch.tensor(nr.sliding_window_mask(30, window=8)))
        torch.testing.assert_close(got, m.norm(x) @ m.tok.E.T, atol=1e-5, rtol=1e-5)


def test_one_layer_sliding_cache_equals_recomputing_the_last_window():
    m = rotary_gpt(n_layers=1, block_size=8)
    ids = torch.randint(13, (2, 25))
    got = stepped(m, ids, 4, KVCache(max_length=8))
    for t in range(8, 25):  # the window of 8 tokens ending at t, recomputed from scratch at positions 0 .. 7
        torch.testing.assert_close(got[:, t], m(ids[:, t - 7:t + 1])[:, -1], atol=1e-5, rtol=1e-5)


def test_two_layer_sliding_cache_differs_from_recomputing_the_window():
    m = rotary_gpt(n_layers=2, block_size=8)
    ids = torch.randint(13, (2, 25))
    got = stepped(m, ids, 4, KVCache(max_length=8))
    recomputed = torch.stack([m(ids[:, t - 7:t + 1])[:, -1] for t in range(8, 25)], 1)
    # the earlier tokens of a recomputed window lose their context in layer 1, so layer 2's keys differ
    assert (got[:, 8:] - recomputed).abs().max() > 1e-3


def test_generate_with_a_sliding_cache():
    m = rotary_gpt(block_size=8)
    prompt = torch.randint(13, (2, 3))
    out = generate(m, prompt, 25, greedy=True, use_cache=True, sliding_cache=True)
    assert out.shape == (2, 28)
    want = m(out[:, :-1], window=8).argmax(-1)  # greedy tokens of sliding-window attention
    assert torch.equal(out[:, 3:], want[:, 2:])
    # until the window is full, the same tokens as recomputing
    plain = generate(m, prompt, 5, greedy=True)
    assert torch.equal(out[:, :8], plain)
    with pytest.raises(ValueError, match="rotary"):
        generate(GPT(GPTConfig(vocab_size=13, block_size=8, n_layers=1, n_heads=2, d_model=16)), prompt, 3,
                 use_cache=True, sliding_cache=True)
    with pytest.raises(ValueError, match="use_cache"):
        generate(m, prompt, 3, sliding_cache=True)


def test_learned_model_refuses_a_sliding_cache_and_windows_with_a_cache():
    learned = GPT(GPTConfig(vocab_size=13, block_size=8, n_layers=1, n_heads=2, d_model=16))
    with pytest.raises(ValueError, match="rotary"):
        learned(torch.zeros(1, 3, dtype=torch.long), cache=KVCache(max_length=8))
    with pytest.raises(ValueError, match="window"):
        learned(torch.zeros(1, 3, dtype=torch.long), cache=KVCache(), window=2)


def test_checkpoint_keeps_the_positions_option(word_text, tmp_path):
    config = preset("tiny", progress=False, steps=6, warmup=2, eval_every=3, positions="rotary", out_dir=str(tmp_path))
    run = train_gpt(config, text=word_text)
    model, tok = load_gpt(tmp_path / "ckpt.pt")
    assert model.config.positions == "rotary" and model.pos is None
    ids = tok.encode(word_text[:40])[None]
    torch.testing.assert_close(model(ids), run.model(ids), atol=0, rtol=0)
    with pytest.raises(ValueError, match="positions"):
        train_gpt(preset("tiny", progress=False, steps=8, warmup=2, out_dir=str(tmp_path)), text=word_text, resume=True)
