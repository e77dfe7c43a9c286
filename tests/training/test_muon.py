"""Muon (chapter 25): the Newton-Schulz iteration against the SVD and against torch.optim.Muon's own step;
the split of a GPT's parameters; training with Muon, and its checkpoints resuming exactly."""

import math
from dataclasses import replace

import pytest
import torch

from attnbook.torch import GPT
from attnbook.training.lm import GPTRunConfig, preset, train_gpt
from attnbook.training.muon import CUBIC, Muon, MuonAdamW, muon_parameters, newton_schulz, ns_dtype_for, polar_factor


@pytest.mark.parametrize("shape", [(6, 6), (5, 9), (9, 5)])
def test_the_cubic_iteration_converges_to_the_polar_factor(shape):
    G = torch.randn(shape, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    P = polar_factor(G)
    torch.testing.assert_close(P @ P.T if shape[0] <= shape[1] else P.T @ P, torch.eye(min(shape), dtype=G.dtype))
    torch.testing.assert_close(newton_schulz(G, steps=60, coefficients=CUBIC), P, rtol=0, atol=1e-10)


@pytest.mark.parametrize("shape", [(32, 96), (96, 32)])
def test_the_quintic_iteration_keeps_the_singular_vectors_and_lands_near_one(shape):
    G = torch.randn(shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    X = newton_schulz(G)
    U, _, Vh = torch.linalg.svd(G, full_matrices=False)
    core = U.T @ X @ Vh.T  # diagonal if X shares G's singular vectors
    torch.testing.assert_close(core, torch.diag(torch.diagonal(core)), rtol=0, atol=1e-10)
    s = torch.diagonal(core)
    assert 0.5 < s.min() and s.max() < 1.25  # near 1, not on it: the price of five steps
    torch.testing.assert_close(newton_schulz(G.T), X.T)  # the iteration commutes with transposition


@pytest.mark.parametrize(("adjust", "factor"), [("original", 1.0), ("match_rms_adamw", 0.2 * math.sqrt(40))])
def test_newton_schulz_is_what_torch_optim_muon_steps_along(adjust, factor):
    torch.manual_seed(2)
    W = torch.nn.Parameter(torch.randn(24, 40))
    before = W.detach().clone()
    W.grad = torch.randn(24, 40)
    # No momentum, no weight decay: the step is -lr times the orthogonalised gradient, times the
    # shape's factor (1 for a wide matrix in Jordan's rule; 0.2 sqrt(max(m, n)) to match AdamW's size).
    opt = torch.optim.Muon([W], lr=0.5, weight_decay=0.0, momentum=0.0, nesterov=False, adjust_lr_fn=adjust)
    opt.step()
    expected = before - 0.5 * factor * newton_schulz(W.grad, dtype=torch.bfloat16).float()
    torch.testing.assert_close(W.detach(), expected, rtol=0, atol=1e-5)


@pytest.mark.parametrize("nesterov", [True, False])
def test_our_muon_in_bfloat16_takes_torch_optim_muons_steps_exactly(nesterov):
    torch.manual_seed(3)
    shapes = [(24, 40), (40, 24), (16, 16)]
    ours = [torch.nn.Parameter(torch.randn(s)) for s in shapes]
    theirs = [torch.nn.Parameter(p.detach().clone()) for p in ours]
    a = Muon(ours, lr=0.02, weight_decay=0.1, momentum=0.9, nesterov=nesterov, ns_dtype=torch.bfloat16)
    b = torch.optim.Muon(theirs, lr=0.02, weight_decay=0.1, momentum=0.9, nesterov=nesterov,
                         adjust_lr_fn="match_rms_adamw")
    for _ in range(4):  # momentum builds up over the steps
        for p, q in zip(ours, theirs, strict=True):
            p.grad = torch.randn(p.shape)
            q.grad = p.grad.clone()
        a.step()
        b.step()
    for p, q in zip(ours, theirs, strict=True):
        assert torch.equal(p, q)


def test_muon_in_float32_steps_closer_to_the_polar_factor():
    torch.manual_seed(4)
    W32, W16 = torch.nn.Parameter(torch.zeros(32, 64)), torch.nn.Parameter(torch.zeros(32, 64))
    G = torch.randn(32, 64)
    W32.grad, W16.grad = G.clone(), G.clone()
    # No momentum, no decay: each step is -lr 0.2 sqrt(64) times the iteration's result on G.
    Muon([W32], lr=1.0, weight_decay=0.0, momentum=0.0, nesterov=False, ns_dtype=torch.float32).step()
    Muon([W16], lr=1.0, weight_decay=0.0, momentum=0.0, nesterov=False, ns_dtype=torch.bfloat16).step()
    reference = -1.6 * newton_schulz(G.double()).float()  # the same iteration in float64
    err32, err16 = (W32 - reference).abs().max().item(), (W16 - reference).abs().max().item()
    assert err32 < 1e-4 < err16
    assert ns_dtype_for("cpu") == torch.float32 and ns_dtype_for("cuda") == torch.bfloat16
    assert ns_dtype_for("cpu", "bf16") == torch.bfloat16
    with pytest.raises(ValueError, match="Muon trains matrices only"):
        Muon([torch.nn.Parameter(torch.ones(3))], lr=0.1)


def test_muon_takes_the_block_matrices_and_adamw_the_rest():
    model = GPT(preset("tiny").model_config(vocab_size=20))
    matrices, rest = muon_parameters(model)
    names = {id(p): n for n, p in model.named_parameters()}
    assert {names[id(p)] for p in matrices} == {n for n, p in model.named_parameters()
                                                 if n.startswith("blocks.") and p.dim() == 2}
    assert "tok.E" in {names[id(p)] for p in rest} and all(p.dim() == 1 for p in rest if names[id(p)] != "tok.E"
                                                           and names[id(p)] != "pos.P")
    assert len(matrices) + len(rest) == len(list(model.parameters()))
    opt = MuonAdamW(model, lr=1e-3, matrix_lr=0.02, weight_decay=0.1, betas=(0.9, 0.99))
    assert [g["lr_scale"] for g in opt.param_groups] == [pytest.approx(20.0), 1.0]


def test_training_with_muon_lowers_the_loss_and_resumes_exactly(verse_text, tmp_path):
    config = preset("tiny", progress=False, steps=24, eval_every=8, optimizer="muon", matrix_lr=0.01)
    whole = train_gpt(replace(config, out_dir=str(tmp_path / "a")), text=verse_text)
    assert whole.val_loss < math.log(whole.tokenizer.vocab_size) - 0.5
    assert whole.log[4]["lr"] == pytest.approx(1e-3)  # the schedule's rate, which AdamW's groups use
    b = replace(config, out_dir=str(tmp_path / "b"))
    train_gpt(b, text=verse_text, stop_after=12)
    resumed = train_gpt(b, text=verse_text, resume=True)
    assert [e["loss"] for e in resumed.log] == [e["loss"] for e in whole.log]
    with pytest.raises(ValueError, match="optimizer: saved 'muon', requested 'adamw'"):
        train_gpt(replace(b, optimizer="adamw", matrix_lr=None, steps=30), text=verse_text, resume=True)


def test_optimizer_errors_name_what_was_expected():
    with pytest.raises(ValueError, match="optimizer must be one of 'adamw', 'muon'; got 'sgd'"):
        GPTRunConfig(optimizer="sgd")
    with pytest.raises(ValueError, match="matrix_lr is Muon's learning rate; it needs optimizer='muon'"):
        GPTRunConfig(matrix_lr=0.02)
    with pytest.raises(ValueError, match="G must be a matrix"):
        newton_schulz(torch.ones(3))


def test_the_batched_iteration_equals_the_matrix_by_matrix_one():
    gen = torch.Generator().manual_seed(7)
    G = torch.randn(5, 12, 20, generator=gen, dtype=torch.float64)
    stacked = newton_schulz(G)
    for k in range(5):
        torch.testing.assert_close(stacked[k], newton_schulz(G[k]), rtol=0, atol=1e-12)
    torch.testing.assert_close(newton_schulz(G.mT), stacked.mT, rtol=0, atol=1e-12)  # tall matrices too
    with pytest.raises(ValueError, match="a stack of matrices"):
        newton_schulz(torch.ones(2, 2, 3, 4))


@pytest.mark.parametrize("ns_dtype", [torch.float32, torch.bfloat16])
def test_muon_batched_over_shapes_steps_as_it_does_matrix_by_matrix(ns_dtype):
    # A GPT's shapes: square attention matrices, and the feed-forward's wide and tall ones, which the batched
    # step iterates together (the tall ones transposed); one matrix of a shape of its own.
    shapes = [(16, 16)] * 3 + [(16, 48), (48, 16), (48, 16), (8, 24)]
    gen = torch.Generator().manual_seed(8)
    start = [torch.randn(s, generator=gen) for s in shapes]
    grads = [[torch.randn(s, generator=gen) for s in shapes] for _ in range(3)]
    runs = []
    for batched in (True, False):
        params = [torch.nn.Parameter(w.clone()) for w in start]
        opt = Muon(params, lr=0.02, weight_decay=0.1, momentum=0.9, ns_dtype=ns_dtype, batched=batched)
        for step_grads in grads:
            for p, g in zip(params, step_grads, strict=True):
                p.grad = g.clone()
            opt.step()
        runs.append(params)
    tol = 1e-6 if ns_dtype == torch.float32 else 2e-4  # one rounding of bfloat16's 8 bits, times lr
    for p, q, w in zip(*runs, start, strict=True):
        torch.testing.assert_close(p, q, rtol=0, atol=tol)
        assert (p - w).abs().max() > 100 * tol  # every matrix moved, by far more than the tolerance
