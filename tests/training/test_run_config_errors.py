"""The public API refuses bad input with errors that name the field, the value and what is expected,
and the NumPy and PyTorch twins agree on the edge cases (NaN, infinity, empty sequences, huge values).

Each test compares against an oracle: the twin, PyTorch's own function, a rescaled input whose answer
is the same, or the state before the call.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os

import numpy as np
import pytest
import torch

from attnbook import numpy as anp
from attnbook import torch as atorch
from attnbook.data.shakespeare import DataUnavailableError, tinyshakespeare_path
from attnbook.torch import GPT, GPTConfig, TokenEmbedding, generate
from attnbook.training.checkpoint import load_checkpoint, save_checkpoint
from attnbook.training.lm import GPTRunConfig, load_gpt, preset, train_gpt
from attnbook.training.trainer import TrainConfig

TEXT = "to be, or not to be: that is the question. " * 40


def _tiny(out_dir, **overrides) -> GPTRunConfig:
    base = dict(n_layers=1, n_heads=2, d_model=16, block_size=8, steps=4, batch_size=4, warmup=1, eval_every=2,
                eval_batches=1, out_dir=str(out_dir), progress=False)
    return GPTRunConfig(**{**base, **overrides})


# --- resume --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("field, value", [("activation", "relu"), ("bias", False), ("dropout", 0.1),
                                          ("d_model", 32), ("batch_size", 8), ("seed", 7)])
def test_resume_refuses_a_different_model_or_data_before_writing(tmp_path, field, value):
    train_gpt(_tiny(tmp_path), text=TEXT)
    ckpt = tmp_path / "ckpt.pt"
    before = ckpt.read_bytes(), (tmp_path / "log.json").read_bytes()
    with pytest.raises(ValueError, match=f"{field}: saved .*, requested {value!r}"):
        train_gpt(_tiny(tmp_path, steps=6, **{field: value}), text=TEXT, resume=True)
    assert (ckpt.read_bytes(), (tmp_path / "log.json").read_bytes()) == before  # nothing was written


def test_resume_refuses_steps_below_the_checkpoint(tmp_path):
    train_gpt(_tiny(tmp_path, steps=4), text=TEXT)
    before = (tmp_path / "ckpt.pt").read_bytes()
    with pytest.raises(ValueError, match="steps = 2 is below the checkpoint's step 4"):
        train_gpt(_tiny(tmp_path, steps=2, warmup=1), text=TEXT, resume=True)
    assert (tmp_path / "ckpt.pt").read_bytes() == before
    resumed = train_gpt(_tiny(tmp_path, steps=6), text=TEXT, resume=True)  # the same fields: it continues
    assert resumed.steps_done == 6


# --- configuration values ------------------------------------------------------------------------------

@pytest.mark.parametrize("field, value, expected", [
    ("grad_clip", -1.0, "grad_clip must be 0 .* got -1.0"),
    ("weight_decay", -1.0, "weight_decay must be 0 or more .* got -1.0"),
    ("min_lr", 2e-3, r"min_lr must lie in \[0, lr = 0.001\] .* got 0.002"),
    ("eval_batches", 0, "eval_batches must be a whole number, at least 1; got 0"),
    ("n_layers", -1, "n_layers must be a whole number, at least 1; got -1"),
    ("lr", 0.0, "lr must be positive; got 0.0"),
    ("dropout", 1.0, r"dropout must be in \[0, 1\); got 1.0"),
    ("beta2", 1.0, r"beta2 must be in \[0, 1\); got 1.0"),
    ("eval_every", -1, "eval_every must be 0 .* got -1"),
    ("activation", "swish", "activation must be one of .* got 'swish'"),
    ("precision", "fp8", "precision must be one of .* got 'fp8'"),
])
def test_run_config_names_the_bad_field(field, value, expected):
    with pytest.raises(ValueError, match=expected):
        preset("tiny", **{field: value})


@pytest.mark.parametrize("field, value", [("n_layers", -1), ("n_layers", 0), ("block_size", 0), ("vocab_size", 0),
                                          ("d_ff", 0), ("dropout", -0.5)])
def test_gpt_config_refuses_sizes_that_build_a_broken_model(field, value):
    with pytest.raises(ValueError, match=f"{field} must"):
        GPTConfig(**{"vocab_size": 10, field: value})


@pytest.mark.parametrize("field, value", [("grad_clip", -1.0), ("weight_decay", -0.1), ("min_lr", 1.0), ("lr", -1.0)])
def test_train_config_names_the_bad_field(field, value):
    with pytest.raises(ValueError, match=f"{field} must"):
        TrainConfig(**{field: value})


def test_an_out_dir_that_is_a_file_is_refused_before_training(tmp_path):
    a_file = tmp_path / "runs"
    a_file.write_text("not a folder")
    with pytest.raises(ValueError, match="out_dir must be a folder"):
        train_gpt(_tiny(a_file, steps=100000, warmup=1), text=TEXT)  # 100000 steps would take minutes


def test_the_command_line_checks_every_argument_before_training(tmp_path, capsys):
    from attnbook.train import main

    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes("café au lait ".encode("latin-1") * 50)
    cases = [
        (["--sample", "-5"], "argument --sample: must be 0 or more; got -5"),
        (["--threads", "-1"], "argument --threads: must be 0 or more; got -1"),
        (["--grad-clip", "-1"], "argument --grad-clip: must be 0"),
        (["--weight-decay", "-1"], "argument --weight-decay: must be 0 or more"),
        (["--min-lr", "1", "--lr", "0.1"], "argument --min-lr: must lie in [0, --lr = 0.1]"),
        (["--text-file", str(latin1)], "is not UTF-8 text (byte 0xe9 at position 3)"),
        (["--text-file", str(tmp_path / "missing.txt")], "cannot be read"),
    ]
    for args, message in cases:
        with pytest.raises(SystemExit) as stop:
            main(["gpt", "--preset", "tiny", "--no-progress", *args])
        assert stop.value.code == 2, args
        assert message in capsys.readouterr().err, args


# --- softmax: one behaviour for NaN, infinity and empty axes, in both twins -----------------------------

@pytest.mark.parametrize("x", [
    [np.nan, 1.0], [np.inf, 1.0], [np.inf, np.inf], [1.0, -np.inf], [-np.inf, -np.inf], [-np.inf, np.inf],
    [[np.nan, 0.0, 1.0], [0.0, 1.0, 2.0]], [[1000.0, -np.inf], [np.inf, -np.inf]],
])
def test_softmax_twins_agree_on_nan_and_infinity(x):
    x = np.array(x)
    ours, theirs = anp.softmax(x), atorch.softmax(torch.tensor(x)).numpy()
    np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=0)  # NaN where NaN, the same numbers elsewhere
    finite_slices = ~np.any(np.isnan(x) | np.isposinf(x), axis=-1)
    np.testing.assert_array_equal(np.isnan(ours).all(axis=-1), ~finite_slices)
    # PyTorch's own softmax agrees, except that we give zeros, not NaN, to a slice that is all -inf.
    reference = torch.softmax(torch.tensor(x), -1).numpy()
    ruled_out = np.isneginf(x).all(axis=-1)
    np.testing.assert_array_equal(np.isnan(reference).all(axis=-1), ~finite_slices | ruled_out)
    np.testing.assert_allclose(ours[finite_slices & ~ruled_out], reference[finite_slices & ~ruled_out], rtol=1e-12)


@pytest.mark.parametrize("shape_q, shape_k", [((3, 4), (0, 4)), ((0, 4), (2, 4)), ((0, 4), (0, 4)),
                                              ((2, 0, 4), (2, 5, 4))])
def test_empty_sequences_give_the_same_result_in_both_twins(shape_q, shape_k):
    Q, K = np.ones(shape_q), np.ones(shape_k)
    V = np.ones(shape_k[:-1] + (2,))
    out_np, w_np = anp.scaled_dot_product_attention(Q, K, V)
    out_t, w_t = atorch.scaled_dot_product_attention(torch.tensor(Q), torch.tensor(K), torch.tensor(V))
    np.testing.assert_array_equal(out_np, out_t.numpy())
    np.testing.assert_array_equal(w_np, w_t.numpy())
    assert out_np.shape == shape_q[:-1] + (2,) and not np.isnan(out_np).any()
    np.testing.assert_array_equal(anp.softmax(np.zeros((3, 0))), atorch.softmax(torch.zeros(3, 0)).numpy())


def test_masked_softmax_refuses_an_additive_mask():
    scores = np.array([[1.0, 2.0, 3.0]])
    with pytest.raises(ValueError, match="mask must be boolean.*got dtype float64.*mask == 0"):
        anp.masked_softmax(scores, np.array([[0.0, -np.inf, 0.0]]))
    allowed = np.array([[0.0, -np.inf, 0.0]]) == 0  # what the error message advises
    np.testing.assert_allclose(anp.masked_softmax(scores, allowed),
                               torch.softmax(torch.tensor([[1.0, -np.inf, 3.0]]), -1).numpy())


# --- generate -------------------------------------------------------------------------------------------

def _small_gpt() -> GPT:
    torch.manual_seed(0)
    return GPT(GPTConfig(vocab_size=5, block_size=4, n_layers=1, n_heads=1, d_model=8))


def test_generate_restores_the_training_mode_when_it_raises():
    model = _small_gpt().train()
    with pytest.raises(ValueError, match="top_k"):
        generate(model, torch.zeros(1, 2, dtype=torch.long), 3, top_k=99)
    assert model.training
    model.eval()
    generate(model, torch.zeros(1, 2, dtype=torch.long), 2)
    assert not model.training


def test_generate_refuses_a_negative_number_of_tokens():
    model = _small_gpt()
    with pytest.raises(ValueError, match="max_new_tokens must be an integer, 0 or more; got -3"):
        generate(model, torch.zeros(1, 2, dtype=torch.long), -3)
    ids = torch.zeros(1, 2, dtype=torch.long)
    assert torch.equal(generate(model, ids, 0), ids)


# --- checkpoints ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("content, words", [(b"", "is empty"), (b"garbage" * 20, "corrupt"),
                                            (None, "truncated or corrupt")])
def test_unreadable_checkpoints_give_a_clear_error_without_torchs_advice(tmp_path, content, words):
    path = tmp_path / "ckpt.pt"
    if content is None:  # a real checkpoint, cut short
        save_checkpoint({"w": torch.ones(1000)}, path)
        path.write_bytes(path.read_bytes()[:300])
    else:
        path.write_bytes(content)
    with pytest.raises(ValueError, match=words) as err:
        load_checkpoint(path)
    assert "weights_only=False" not in str(err.value) and err.value.__cause__ is None
    assert err.value.__context__ is None or err.value.__suppress_context__  # torch's message is not chained


def test_load_gpt_names_what_a_foreign_checkpoint_lacks(tmp_path):
    path = tmp_path / "foreign.pt"
    save_checkpoint({"model": {}, "step": 3}, path)
    with pytest.raises(ValueError, match="not written by attnbook's trainer: it lacks 'config', 'chars'"):
        load_gpt(path)


def test_failed_saves_leave_no_temporary_files(tmp_path):
    path = tmp_path / "ckpt.pt"
    # Python 3.13's message names the local object rather than pickling ("Can't get local object ...").
    with pytest.raises(Exception, match="pickle|local object"):
        save_checkpoint({"f": lambda: 0}, path)  # not picklable
    (tmp_path / "ckpt.ptabc123.tmp").write_bytes(b"left by a save that was killed")
    save_checkpoint({"w": torch.ones(2)}, path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt.pt"]
    torch.testing.assert_close(load_checkpoint(path)["w"], torch.ones(2))
    with pytest.raises(ValueError, match="it is a folder"):
        save_checkpoint({"w": torch.ones(2)}, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt.pt"]


# --- cosine similarity: huge values and float16 -----------------------------------------------------------

@pytest.mark.parametrize("scale", [1e155, 1e-160, 1.0])
def test_cosine_similarity_is_scale_free_in_both_twins(scale):
    u, v = np.array([1.0, 1.0]), np.array([1.0, 0.0])
    expected = anp.cosine_similarity(u, v)  # 1/sqrt(2), at an ordinary scale
    assert math.isclose(expected, 1 / math.sqrt(2), rel_tol=1e-12)
    U, V = u * scale, v * scale
    assert math.isclose(float(anp.cosine_similarity(U, V)), expected, rel_tol=1e-12)
    assert math.isclose(float(anp.pairwise_cosine_similarity(U[None], V[None])[0, 0]), expected, rel_tol=1e-12)
    assert math.isclose(float(atorch.cosine_similarity(torch.tensor(U), torch.tensor(V))), expected, rel_tol=1e-12)
    assert math.isclose(float(atorch.pairwise_cosine_similarity(torch.tensor(U)[None], torch.tensor(V)[None])),
                        expected, rel_tol=1e-12)


def test_cosine_similarity_in_float16_does_not_overflow():
    rng = np.random.default_rng(0)
    X, Y = (rng.normal(size=(3, 8)) * 1000).astype(np.float16), (rng.normal(size=(4, 8)) * 1000).astype(np.float16)
    exact = anp.pairwise_cosine_similarity(X.astype(np.float64), Y.astype(np.float64))
    Xt, Yt = torch.tensor(X), torch.tensor(Y)
    for got in (anp.pairwise_cosine_similarity(X, Y), atorch.pairwise_cosine_similarity(Xt, Yt),
                anp.cosine_similarity(X[0], Y[0])[None, None], atorch.cosine_similarity(Xt[0], Yt[0])):
        got = np.asarray(got, dtype=np.float64).reshape(-1)
        assert np.isfinite(got).all()
        np.testing.assert_allclose(got, exact.reshape(-1)[: got.size] if got.size > 1 else exact[0, 0], atol=2e-3)


# --- unclear errors made clear -----------------------------------------------------------------------------

def test_split_heads_refuses_a_width_the_heads_do_not_divide_in_both_twins():
    message = r"d_model = 10 \(the last axis of X, shape \(3, 10\)\) must be divisible by n_heads = 4"
    with pytest.raises(ValueError, match=message):
        anp.split_heads(np.zeros((3, 10)), 4)
    with pytest.raises(ValueError, match=message):
        atorch.split_heads(torch.zeros(3, 10), 4)
    X = np.arange(24.0).reshape(3, 8)  # the twins still agree where the width divides
    np.testing.assert_array_equal(anp.split_heads(X, 4), atorch.split_heads(torch.tensor(X), 4).numpy())


@pytest.mark.parametrize("kind", [np.asarray, lambda a: np.asarray(a).tolist()])
def test_torch_attention_names_numpy_arrays_and_lists(kind):
    Q = np.ones((2, 4))
    with pytest.raises(ValueError, match="Q must be a torch.Tensor; got (numpy.ndarray|list)"):
        atorch.scaled_dot_product_attention(kind(Q), kind(Q), kind(Q))


def test_a_data_folder_whose_input_txt_is_a_folder_says_so(tmp_path, monkeypatch):
    (tmp_path / "tinyshakespeare" / "input.txt").mkdir(parents=True)
    monkeypatch.setenv("ATTNBOOK_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("ATTNBOOK_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(DataUnavailableError, match="is a folder, not the file input.txt") as err:
        tinyshakespeare_path(download=False)
    assert "download" not in str(err.value)


@pytest.mark.parametrize("dtype", [torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8])
def test_token_embedding_accepts_any_integer_dtype(dtype):
    emb = TokenEmbedding(10, 4)
    ids = torch.tensor([[0, 3, 9]])
    torch.testing.assert_close(emb(ids.to(dtype)), torch.nn.functional.embedding(ids, emb.E))
    message = "integer ids; got dtype torch.(float32|bool) .any integer dtype is accepted"
    for bad in (torch.float32, torch.bool):
        with pytest.raises(ValueError, match=message):
            emb(ids.to(bad))


def test_resume_checkpoint_and_log_stay_consistent(tmp_path):
    # The log written beside the checkpoint is whole JSON, and no temporary file is left.
    run = train_gpt(_tiny(tmp_path), text=TEXT)
    log = json.loads((tmp_path / "log.json").read_text())
    assert log == run.log
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]
    assert dataclasses.asdict(run.config) == load_checkpoint(tmp_path / "ckpt.pt")["config"]
