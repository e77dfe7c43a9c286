"""Inputs that used to be accepted in silence are refused, with errors that name the argument, the value
and what is expected, in both twins where a function has two; where an odd input has a meaning (NaN in,
NaN out), a test shows it.

Each test checks the refusal and, beside it, that the valid neighbour still agrees with an oracle: the
twin, PyTorch's own function, a closed form, or the state before the call.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from attnbook import numpy as anp
from attnbook import torch as atorch
from attnbook.data.bpe import BPETokenizer, chunk_counts, learn_merges, merge_pair
from attnbook.data.masked_text import MaskedCharTokenizer
from attnbook.numpy import backprop as bp
from attnbook.torch import GPT, GPTConfig, KVCache, LearnedPositions, SinusoidalPositions
from attnbook.training import lr_at
from attnbook.training.lm import GPTRunConfig
from attnbook.training.mlm import MLMRunConfig, encoder_logits, make_eval_set, masked_lm_loss
from attnbook.training.muon import Muon, MuonAdamW, newton_schulz

# --- the cases found by probing the public API ----------------------------------------------------------


@pytest.mark.parametrize("kwargs, message", [
    ({"step": -1}, "step must be an integer, at least 0; got -1"),
    ({"step": 2.5}, "step must be an integer, at least 0; got 2.5"),
    ({"warmup": 1.5}, "warmup must be an integer, at least 0; got 1.5"),
    ({"peak": -1e-3}, "peak must be a positive finite number; got -0.001"),
    ({"peak": math.nan}, "peak must be a positive finite number; got nan"),
    ({"final": 1.0}, r"final must be a finite number in \[0, peak = 0.001\]; got 1.0"),
    ({"final": -1e-4}, r"final must be a finite number in \[0, peak = 0.001\]"),
])
def test_lr_at_refuses_what_would_give_a_negative_or_rising_rate(kwargs, message):
    args = {"step": 0, "peak": 1e-3, "warmup": 10, "total": 100, "final": 1e-4} | kwargs
    with pytest.raises(ValueError, match=message):
        lr_at(**args)
    # The valid schedule: step 0 is peak / warmup, and no step of it is negative or above the peak.
    assert lr_at(0, 1e-3, 10, 100, 1e-4) == pytest.approx(1e-4)
    rates = [lr_at(s, 1e-3, 10, 100, 1e-4) for s in range(120)]  # past the end it stays at final
    assert min(rates) >= 1e-4 - 1e-18 and max(rates) == pytest.approx(1e-3) and rates[-1] == pytest.approx(1e-4)


@pytest.mark.parametrize("module", [LearnedPositions, SinusoidalPositions])
@pytest.mark.parametrize("T, offset, message", [(-1, 0, "T must be an integer, at least 0; got -1"),
                                                (2.0, 0, "T must be an integer, at least 0; got 2.0"),
                                                (2, -1, "offset must be an integer, at least 0; got -1"),
                                                (3, 6, "positions up to 8 requested")])
def test_position_tables_refuse_negative_or_fractional_positions(module, T, offset, message):
    table = module(8, 4)
    with pytest.raises(ValueError, match=message):
        table(T, offset)
    torch.testing.assert_close(table(3, 2), table.P[2:5])  # the valid span is the table's rows


@pytest.mark.parametrize("base", [0, -1, 1, math.nan, math.inf])
def test_sinusoidal_and_rotary_frequencies_refuse_a_base_that_gives_nan_or_no_frequencies(base):
    message = "base must be .*greater than 1; got"
    for call in (lambda: anp.sinusoidal_encoding(4, 6, base=base), lambda: anp.sinusoidal_frequencies(6, base),
                 lambda: anp.rotary_frequencies(6, base), lambda: atorch.rotary_frequencies(6, base),
                 lambda: anp.relative_position_map(1, 6, base=base)):
        with pytest.raises(ValueError, match=message):
            call()
    # A valid base other than 10000 gives the closed form, and the twins' frequencies agree.
    pos, i = np.arange(4)[:, None], np.arange(3)[None, :]
    expected = np.empty((4, 6))
    expected[:, 0::2], expected[:, 1::2] = np.sin(pos * 100.0 ** (-2 * i / 6)), np.cos(pos * 100.0 ** (-2 * i / 6))
    np.testing.assert_allclose(anp.sinusoidal_encoding(4, 6, base=100.0), expected, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(atorch.rotary_frequencies(6, 100.0).numpy(), anp.sinusoidal_frequencies(6, 100.0))


def test_sample_next_refuses_nan_logits_even_when_greedy():
    logits = torch.tensor([[0.1, 2.0, -1.0], [0.3, math.nan, 0.2]])
    for kwargs in ({"greedy": True}, {"temperature": 1.0}):
        with pytest.raises(ValueError, match=r"logits contain NaN \(rows \[1\]\)"):
            atorch.sample_next(logits, **kwargs)
    with pytest.raises(ValueError, match=r"logits must be a tensor of shape \(B, V\).*got \(3,\)"):
        atorch.sample_next(logits[0], greedy=True)
    finite = logits.nan_to_num(0.0)
    assert torch.equal(atorch.sample_next(finite, greedy=True), finite.argmax(-1, keepdim=True))


def test_attention_entropy_refuses_negative_weights_and_keeps_nan():
    uniform = torch.full((2, 3, 4), 0.25)  # (h, T_q, T_k)
    torch.testing.assert_close(atorch.attention_entropy(uniform), torch.full((2,), math.log(4)))
    bad = uniform.clone()
    bad[0, 0, 0], bad[0, 0, 1] = -0.25, 0.75  # still sums to 1, but no softmax gives it
    with pytest.raises(ValueError, match="weights must be attention weights, 0 or more .* down to -0.25"):
        atorch.attention_entropy(bad)
    with_nan = uniform.clone()
    with_nan[1, 0, 0] = math.nan  # NaN in, NaN out for that head only: plain arithmetic
    out = atorch.attention_entropy(with_nan)
    assert math.isnan(out[1]) and out[0] == pytest.approx(math.log(4))


@pytest.mark.parametrize("exclude", [[-1], [5], [1.5], [True]])
def test_nearest_refuses_exclude_indices_outside_the_rows(exclude):
    E = np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [-1.0, 0.0], [0.8, 0.3]])
    with pytest.raises(ValueError, match=r"exclude must list row indices of E, integers in \[0, 4\]; got"):
        anp.nearest(np.array([1.0, 0.0]), E, k=2, exclude=exclude)
    # Excluding the last row by its real index: the ranking without it, by cosine (oracle: a direct sort).
    cos = E @ np.array([1.0, 0.0]) / np.linalg.norm(E, axis=1)
    expected = [i for i in np.argsort(-cos, kind="stable") if i != 4][:2]
    assert anp.nearest(np.array([1.0, 0.0]), E, k=2, exclude=[4]).tolist() == expected


@pytest.mark.parametrize("T", [3.0, 2.5, "3", -1])
def test_padding_mask_refuses_a_length_that_is_not_an_integer_in_both_twins(T):
    message = "T must be an integer, at least 0; got"
    with pytest.raises(ValueError, match=message):
        anp.padding_mask(np.array([1, 2]), T)
    with pytest.raises(ValueError, match=message):
        atorch.padding_mask(torch.tensor([1, 2]), T)
    np.testing.assert_array_equal(anp.padding_mask(np.array([1, 2]), 3),
                                  atorch.padding_mask(torch.tensor([1, 2]), 3).numpy())


@pytest.mark.parametrize("k", [math.nan, math.inf, -math.inf])
def test_relative_position_map_refuses_an_offset_that_is_not_finite(k):
    with pytest.raises(ValueError, match="k must be a finite number .*; got"):
        anp.relative_position_map(k, 4)
    PE = anp.sinusoidal_encoding(10, 4)
    np.testing.assert_allclose(PE[2:7] @ anp.relative_position_map(3, 4), PE[5:10], atol=1e-12)  # a valid offset


def test_single_query_attention_refuses_d_attn_zero():
    rng = np.random.default_rng(0)
    e, Z = rng.normal(size=3), rng.normal(size=(5, 4))
    W_v, b_v = rng.normal(size=(4, 2)), rng.normal(size=2)
    with pytest.raises(ValueError, match=r"d_attn \(the columns of W_q and W_k\) must be at least 1"):
        anp.single_query_attention(e, Z, np.zeros((3, 0)), np.zeros(0), np.zeros((4, 0)), np.zeros(0), W_v, b_v)
    # d_attn = 2: the batched attention of the one query is the oracle.
    W_q, b_q, W_k, b_k = rng.normal(size=(3, 2)), rng.normal(size=2), rng.normal(size=(4, 2)), rng.normal(size=2)
    out, alpha = anp.single_query_attention(e, Z, W_q, b_q, W_k, b_k, W_v, b_v)
    ref_out, ref_w = anp.scaled_dot_product_attention((e @ W_q + b_q)[None], Z @ W_k + b_k, Z @ W_v + b_v)
    np.testing.assert_allclose(out, ref_out[0], rtol=1e-12)
    np.testing.assert_allclose(alpha, ref_w[0], rtol=1e-12)


@pytest.mark.parametrize("field, value", [("lr", -1.0), ("lr", 0.0), ("beta1", 3.0), ("beta2", 1.0),
                                          ("min_lr", 2e-3), ("weight_decay", -0.1), ("grad_clip", -1.0),
                                          ("eval_every", -1), ("precision", "fp8"), ("batch_size", 0),
                                          ("dropout", 1.0), ("n_heads", 3), ("warmup", 5000)])
def test_mlm_run_config_refuses_what_gpt_run_config_refuses_with_the_same_words(field, value):
    with pytest.raises(ValueError) as mlm_error:
        MLMRunConfig(**{field: value})
    with pytest.raises(ValueError) as gpt_error:
        GPTRunConfig(**{field: value})
    assert str(mlm_error.value) == str(gpt_error.value)  # one set of checks, so one message
    assert field in str(mlm_error.value)


@pytest.mark.parametrize("kwargs, message", [({"rate": 0.0}, r"rate must be in \(0, 1\]"),
                                             ({"mask_prob": 0.8, "random_prob": 0.3}, r"mask_prob \+ random_prob"),
                                             ({"eval_windows": 0}, "eval_windows must be a whole number, at least 1")])
def test_mlm_run_config_refuses_its_own_fields(kwargs, message):
    with pytest.raises(ValueError, match=message):
        MLMRunConfig(**kwargs)
    assert MLMRunConfig().gpt_config().lr == MLMRunConfig().lr  # the valid default still builds its GPT twin


def _gpt(seed: int, **overrides) -> GPT:
    torch.manual_seed(seed)
    return GPT(GPTConfig(**({"vocab_size": 11, "block_size": 16, "n_layers": 2, "n_heads": 2, "d_model": 16}
                            | overrides))).eval()


@pytest.mark.parametrize("positions", ["learned", "rotary"])
def test_a_kv_cache_serves_one_model_only(positions):
    a, b = _gpt(0, positions=positions), _gpt(1, positions=positions)
    ids = torch.randint(11, (2, 9), generator=torch.Generator().manual_seed(0))
    cache = KVCache()
    first = a(ids[:, :5], cache=cache)
    with pytest.raises(ValueError, match=r"holds the keys and values of GPT at 0x[0-9a-f]+; it cannot serve another "
                                         r"model, GPT at 0x[0-9a-f]+"):
        b(ids[:, 5:], cache=cache)
    # The refusal changed nothing: the owner goes on, and its cached logits equal the full forward.
    rest = a(ids[:, 5:], cache=cache)
    torch.testing.assert_close(torch.cat([first, rest], 1), a(ids), atol=1e-5, rtol=1e-5)
    fresh = KVCache()  # the other model with a cache of its own
    torch.testing.assert_close(b(ids[:, :5], cache=fresh), b(ids)[:, :5], atol=1e-5, rtol=1e-5)
    empty = KVCache()
    with pytest.raises(ValueError, match="token ids must be integer ids"):
        a(ids.float(), cache=empty)  # refused before anything is cached
    assert empty.length == 0
    b(ids[:, :2], cache=empty)  # an empty cache holds no one's keys: it may serve another model


# --- gaps of the same kind in Part IV ----------------------------------------------------------------------

@pytest.mark.parametrize("x", [[math.nan, 1.0], [math.inf, 1.0], [[1.0, -math.inf], [-math.inf, -math.inf]],
                               [[math.nan, 0.0, 1.0], [0.0, 1.0, 2.0]]])
@pytest.mark.parametrize("block_size", [1, 2])
def test_online_softmax_keeps_nan_as_softmax_does_in_both_twins(x, block_size):
    x = np.array(x)
    expected = anp.softmax(x)  # NaN where a slice holds NaN or +inf, zeros where it is all -inf
    np.testing.assert_array_equal(np.isnan(anp.online_softmax(x, block_size)), np.isnan(expected))
    np.testing.assert_allclose(anp.online_softmax(x, block_size), expected, rtol=1e-12)
    np.testing.assert_allclose(atorch.online_softmax(torch.tensor(x), block_size).numpy(), expected, rtol=1e-12)


def test_tiled_attention_gives_nan_where_plain_attention_does_and_refuses_arrays():
    rng = np.random.default_rng(0)
    Q, K, V = rng.normal(size=(5, 4)), rng.normal(size=(6, 4)), rng.normal(size=(6, 3))
    Q[2, 1] = np.nan  # one bad query: its row is NaN, the others are untouched
    plain, _ = anp.scaled_dot_product_attention(Q, K, V)
    for tiled in (anp.tiled_attention(Q, K, V, block_q=2, block_k=4),
                  atorch.tiled_attention(*map(torch.tensor, (Q, K, V)), block_q=2, block_k=4).numpy()):
        np.testing.assert_array_equal(np.isnan(tiled), np.isnan(plain))
        np.testing.assert_allclose(tiled, plain, rtol=1e-10)
    assert np.isnan(anp.tiled_attention(Q, K, V, scale=math.nan)).all()  # a NaN scale: NaN, as plain attention
    with pytest.raises(ValueError, match="Q must be a torch.Tensor; got numpy.ndarray"):
        atorch.tiled_attention(Q, K, V)


@pytest.mark.parametrize("n_rep", [0, -1, 1.5, 2.0, True])
def test_repeat_kv_refuses_a_count_that_is_not_a_positive_integer_in_both_twins(n_rep):
    X = np.arange(24.0).reshape(1, 2, 3, 4)
    for repeat, arr in ((anp.repeat_kv, X), (atorch.repeat_kv, torch.tensor(X))):
        with pytest.raises(ValueError, match="n_rep must be an integer, at least 1; got"):
            repeat(arr, n_rep)
    np.testing.assert_array_equal(anp.repeat_kv(X, 2), np.repeat(X, 2, axis=1))
    np.testing.assert_array_equal(atorch.repeat_kv(torch.tensor(X), 2).numpy(), np.repeat(X, 2, axis=1))


@pytest.mark.parametrize("d, eps, message", [(0, 1e-5, "d must be an integer, at least 1; got 0"),
                                             (-1, 1e-5, "d must be an integer, at least 1; got -1"),
                                             (4.0, 1e-5, "d must be an integer, at least 1; got 4.0"),
                                             (4, -1.0, "eps must be a finite number, 0 or more; got -1.0"),
                                             (4, math.nan, "eps must be a finite number, 0 or more; got nan")])
def test_norm_layers_refuse_a_width_or_eps_that_breaks_them(d, eps, message):
    for layer in (atorch.RMSNorm, atorch.LayerNorm):
        with pytest.raises(ValueError, match=message):
            layer(d, eps)
    if isinstance(d, int) and d >= 1:
        for fn, x, g in ((anp.rms_norm, np.ones((2, d)), np.ones(d)),
                         (atorch.rms_norm, torch.ones(2, d), torch.ones(d))):
            with pytest.raises(ValueError, match=message):
                fn(x, g, eps)
        with pytest.raises(ValueError, match=message):
            bp.layer_norm_forward(np.ones((2, d)), np.ones(d), eps=eps)


def test_rms_norm_with_eps_zero_gives_nan_for_a_zero_vector_as_torch_does():
    x = np.array([[0.0, 0.0, 0.0], [1.0, 2.0, 2.0]])
    ours = anp.rms_norm(x, np.ones(3), eps=0.0)
    theirs = F.rms_norm(torch.tensor(x), (3,), torch.ones(3, dtype=torch.float64), eps=0.0).numpy()
    np.testing.assert_array_equal(np.isnan(ours), np.isnan(theirs))  # 0 / 0 in the first row, in both
    assert np.isnan(ours[0]).all() and np.allclose(ours[1], x[1] / math.sqrt(3.0))


@pytest.mark.parametrize("kwargs", [{"n_layers": -1}, {"n_tokens": 1.5}, {"d_head": 0}, {"batch": 2.0}])
def test_kv_cache_bytes_refuses_negative_or_fractional_counts(kwargs):
    args = {"n_layers": 2, "n_kv_heads": 4, "d_head": 8} | kwargs
    name = next(iter(kwargs))
    with pytest.raises(ValueError, match=f"{name} must be an integer, at least"):
        atorch.kv_cache_bytes(**args)
    # The valid count equals the bytes a filled cache holds.
    model = _gpt(0)
    cache = KVCache()
    model(torch.zeros(3, 5, dtype=torch.long), cache=cache)
    assert cache.nbytes == atorch.kv_cache_bytes(2, 2, 8, n_tokens=5, batch=3)


def test_kv_cache_refuses_keys_that_do_not_continue_the_cached_ones():
    model = _gpt(0)
    cache = KVCache()
    model(torch.zeros(2, 4, dtype=torch.long), cache=cache)
    with pytest.raises(ValueError, match=r"the new keys \(3, 2, 1, 8\) do not continue the cached ones \(2, 2, 4, 8\)"):
        model(torch.zeros(3, 1, dtype=torch.long), cache=cache)  # another batch size
    assert cache.length == 4  # nothing was appended


@pytest.mark.parametrize("kwargs, message", [({"lr": -0.1}, "lr must be a finite number, 0 or more"),
                                             ({"momentum": 1.0}, r"momentum must be a number in \[0, 1\)"),
                                             ({"weight_decay": -0.1}, "weight_decay must be a finite number"),
                                             ({"ns_steps": 2.5}, "ns_steps must be an integer, at least 0")])
def test_muon_refuses_settings_that_train_uphill_or_diverge(kwargs, message):
    W = torch.nn.Parameter(torch.randn(3, 4, generator=torch.Generator().manual_seed(0)))
    with pytest.raises(ValueError, match=message):
        Muon([W], **({"lr": 0.1} | kwargs))
    with pytest.raises(ValueError, match="steps must be an integer; got 2.5"):
        newton_schulz(W.detach(), steps=2.5)
    model = _gpt(0)
    with pytest.raises(ValueError, match="lr must be a positive finite number; got 0.0"):
        MuonAdamW(model, lr=0.0, matrix_lr=0.02, weight_decay=0.1, betas=(0.9, 0.99))
    # A zero gradient has no direction: Newton-Schulz gives zeros, and Muon moves the weights by decay only.
    assert torch.equal(newton_schulz(torch.zeros(3, 4)), torch.zeros(3, 4))
    before = W.detach().clone()
    W.grad = torch.zeros_like(W)
    Muon([W], lr=0.1, weight_decay=0.5).step()
    torch.testing.assert_close(W.detach(), before * (1 - 0.1 * 0.5))


def test_bpe_refuses_negative_or_fractional_budgets_and_ids():
    chunks = chunk_counts("abab abab aaa")
    for kwargs, message in (({"n_merges": -1}, "n_merges must be an int of at least 0; got -1"),
                            ({"n_merges": 1.5}, "n_merges must be an int of at least 0; got 1.5"),
                            ({"vocab_size": 100}, "vocab_size must be an int of at least 256")):
        with pytest.raises(ValueError, match=message):
            learn_merges(chunks, **kwargs)
    with pytest.raises(ValueError, match="new_id must be an integer, at least 0; got -1"):
        merge_pair([1, 2, 3], (1, 2), -1)
    tok = BPETokenizer.from_text("abab abab aaa", n_merges=2)
    with pytest.raises(ValueError, match=r"ids must be ints in \[0, 257\]; got \[True\]"):
        tok.decode([True])
    ids = tok.encode("abab a")
    assert tok.decode(ids.numpy()) == tok.decode(ids.tolist()) == "abab a"  # NumPy integers are ids


def test_masked_char_tokenizer_refuses_float_ids():
    tok = MaskedCharTokenizer.from_text("hello")
    with pytest.raises(ValueError, match=r"ids must lie in \[0, 4\], integers; got \[1.0\]"):
        tok.decode([1.0])
    assert tok.decode(tok.encode("he_lo")) == "he_lo"


def test_numpy_backprop_refuses_targets_and_settings_out_of_range():
    logits = np.array([[0.5, -1.0, 2.0], [0.0, 0.3, -0.2]])
    with pytest.raises(ValueError, match=r"targets must lie in \[0, 2\] \(V = 3 classes\); got values from -1 to 2"):
        bp.cross_entropy_forward(logits, np.array([2, -1]))  # -1 would silently pick the last class
    with pytest.raises(ValueError, match="targets must be integer class ids; got dtype float64"):
        bp.cross_entropy_forward(logits, np.array([2.0, 1.0]))
    loss, _ = bp.cross_entropy_forward(logits, np.array([2, 1]))
    assert loss == pytest.approx(F.cross_entropy(torch.tensor(logits), torch.tensor([2, 1])).item(), rel=1e-12)
    with pytest.raises(ValueError, match=r"betas must be two numbers in \[0, 1\)"):
        bp.Adam({"w": np.ones(2)}, betas=(2.0, 0.9))
    with pytest.raises(ValueError, match="d_ff must be an integer, at least 1; got 0"):
        bp.init_block_params(4, 0, np.random.default_rng(0))


@pytest.mark.parametrize("field, value", [("n_layers", -1), ("vocab_size", 0), ("block_size", 2.0), ("d_ff", 0)])
def test_numpy_gpt_config_refuses_sizes_as_the_torch_gpt_config_does(field, value):
    with pytest.raises(ValueError, match=f"{field} must be"):
        bp.GPTConfig(**{"vocab_size": 5, field: value})
    if value != 2.0:  # the torch twin has always refused these
        with pytest.raises(ValueError, match=f"{field} must be"):
            GPTConfig(**{"vocab_size": 5, field: value})


def test_masked_language_modelling_helpers_refuse_bad_sizes_and_dtypes():
    ids = torch.arange(40) % 7
    for kwargs, message in (({"block_size": 0}, "block_size must be an integer, at least 2; got 0"),
                            ({"rate": 2.0}, r"rate must lie in \(0, 1\]; got 2.0"),
                            ({"rate": math.nan}, r"rate must lie in \(0, 1\]; got nan"),
                            ({"mask_id": 3}, "ids already contain the mask id 3")):
        with pytest.raises(ValueError, match=message):
            make_eval_set(ids, **({"block_size": 4, "mask_id": 7} | kwargs))
    with pytest.raises(ValueError, match="integer token ids, shape .* dtype torch.float32"):
        make_eval_set(ids.float(), 4, 7)
    with pytest.raises(ValueError, match="batch_size must be an integer, at least 1; got 0"):
        encoder_logits(torch.nn.Identity(), torch.zeros(2, 3), 0)
    logits, chosen = torch.randn(2, 3), torch.tensor([True, False])
    with pytest.raises(ValueError, match="targets must be integer token ids; got dtype torch.float32"):
        masked_lm_loss(logits, torch.tensor([1.0, 2.0]), chosen)
    torch.testing.assert_close(masked_lm_loss(logits, torch.tensor([1, 2]), chosen),
                               F.cross_entropy(logits[:1], torch.tensor([1])))


def test_attention_modules_refuse_a_width_of_zero():
    with pytest.raises(ValueError, match="d_kv must be an integer, at least 1; got 0"):
        atorch.GroupedQueryAttention(8, 4, 2, d_kv=0)
    with pytest.raises(ValueError, match="d_model must be an integer, at least 1; got 0"):
        atorch.MultiHeadAttention(0, 1)


@pytest.mark.parametrize("T_q, T_k", [(3.0, None), (2, 4.5)])
def test_masks_refuse_fractional_sizes_in_both_twins(T_q, T_k):
    for fn in (anp.causal_mask, atorch.causal_mask):
        with pytest.raises(ValueError, match="T_[qk] must be an integer"):
            fn(T_q, T_k)
    for fn in (anp.sliding_window_mask, atorch.sliding_window_mask):
        with pytest.raises(ValueError, match="T_[qk] must be an integer"):
            fn(T_q, T_k, window=2)
    np.testing.assert_array_equal(anp.sliding_window_mask(3, 5, window=2),
                                  atorch.sliding_window_mask(3, 5, window=2).numpy())


def test_numpy_rotary_refuses_booleans_as_the_torch_twin_does():
    x = np.ones((3, 4), dtype=bool)
    with pytest.raises(ValueError, match="x must hold numbers; got dtype bool"):
        anp.apply_rotary(x)
    with pytest.raises(ValueError, match="x must hold real numbers; got dtype torch.bool"):
        atorch.apply_rotary(torch.tensor(x))
    # Integers are computed in floating point by both, and a NaN position gives a NaN row in both.
    positions = np.array([0.0, math.nan, 2.0])
    ours = anp.apply_rotary(x.astype(int), positions)
    theirs = atorch.apply_rotary(torch.tensor(x.astype(int)), torch.tensor(positions)).numpy()
    np.testing.assert_array_equal(np.isnan(ours), np.isnan(theirs))
    assert np.isnan(ours[1]).all() and not np.isnan(ours[[0, 2]]).any()
    np.testing.assert_allclose(ours, theirs, rtol=1e-6)
