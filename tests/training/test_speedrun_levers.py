"""The levers chapter 25 measures on top of Muon, each against its definition: the trapezoidal schedule, logit
soft-capping, zero-initialised output projections, AdamW's own rate beside Muon, Muon's momentum warm-up and
its number of Newton-Schulz steps."""

import math
from dataclasses import replace

import pytest
import torch

import attnbook.training.lm as lm
from attnbook.torch import GPT, GPTConfig
from attnbook.training.lm import (
    GPTRunConfig,
    preset,
    train_gpt,
    zero_output_projections,
)
from attnbook.training.muon import Muon, newton_schulz
from attnbook.training.optimisation import muon_momentum
from attnbook.training.schedule import lr_at


def small(**overrides) -> GPTConfig:
    return GPTConfig(vocab_size=23, d_model=32, n_heads=4, n_layers=2, block_size=16, **overrides)


def test_the_trapezoid_warms_up_holds_then_falls_in_a_straight_line_to_the_end():
    peak, final, warmup, total = 2.0, 0.2, 10, 100
    rates = [lr_at(s, peak, warmup, total, final, "trapezoid", cooldown=0.4) for s in range(total + 5)]
    assert rates[:warmup] == pytest.approx([peak * (s + 1) / warmup for s in range(warmup)])
    start = total - 1 - 40  # the last 40% of the steps decay
    assert rates[warmup:start + 1] == [peak] * (start + 1 - warmup)  # held at the peak until the cool-down
    assert rates[total - 1:] == [pytest.approx(final)] * 6  # the end, and past it
    steps = [rates[s] - rates[s + 1] for s in range(start, total - 1)]
    assert steps == pytest.approx([steps[0]] * len(steps))  # a straight line: equal decrements
    # cosine decays from the warm-up's end; the trapezoid is higher everywhere in between
    cosine = [lr_at(s, peak, warmup, total, final, "cosine") for s in range(total)]
    assert all(t >= c for t, c in zip(rates, cosine, strict=False)) and sum(rates) > sum(cosine) + 10
    with pytest.raises(ValueError, match="cooldown must be a fraction in \\(0, 1\\]"):
        lr_at(0, peak, warmup, total, final, "trapezoid", cooldown=0.0)


def test_a_soft_capped_model_returns_c_tanh_of_the_uncapped_logits():
    torch.manual_seed(0)
    plain, capped = GPT(small()), GPT(small(logit_softcap=2.0))
    capped.load_state_dict(plain.state_dict())  # the cap adds no parameters
    with torch.no_grad():
        plain.tok.E.mul_(40.0)  # logits far beyond the cap
        capped.tok.E.mul_(40.0)
    ids = torch.randint(0, 23, (2, 16))
    raw = plain(ids)
    assert raw.abs().max() > 10
    torch.testing.assert_close(capped(ids), 2.0 * torch.tanh(raw / 2.0))
    assert capped(ids).abs().max() <= 2.0  # tanh rounds to 1 in float32 far out, never beyond
    for bad in (0.0, -1.0, math.inf, True):
        with pytest.raises(ValueError, match="logit_softcap must be None"):
            small(logit_softcap=bad)


def test_zeroed_output_projections_make_every_block_the_identity(verse_text):
    torch.manual_seed(1)
    model = GPT(small(positions="learned"))
    zero_output_projections(model)
    zeroed = sorted(n for n, p in model.named_parameters() if n.endswith(".W") and not p.any())  # biases start at 0
    assert zeroed == sorted(n for n, _ in model.named_parameters()
                            if n.startswith("blocks.") and n.endswith(("out_proj.W", "fc2.W")))
    assert any(n.endswith("fc1.W") for n, p in model.named_parameters() if p.any())  # the rest is untouched
    ids = torch.randint(0, 23, (2, 16))
    x = model.tok(ids) + model.pos(16, 0)  # with identity blocks, the logits see only the embeddings
    torch.testing.assert_close(model(ids), model.norm(x) @ model.tok.E.T)
    # train_gpt zeroes them when, and only when, the run asks for it
    for flag in (False, True):
        calls = []
        with pytest.MonkeyPatch.context() as mp:
            spy = lambda m, calls=calls: calls.append(m) or zero_output_projections(m)  # noqa: E731
            mp.setattr(lm, "zero_output_projections", spy)
            config = preset("tiny", steps=1, warmup=0, eval_every=0, progress=False, zero_init_projections=flag)
            train_gpt(config, text=verse_text)
        assert len(calls) == flag


def test_adamw_beside_muon_runs_at_embed_lr_and_muons_momentum_warms_up(verse_text):
    config = preset("tiny", progress=False, optimizer="muon", matrix_lr=4e-3, embed_lr=3e-3, steps=12, warmup=2,
                    eval_every=0, muon_momentum_warmup=8)
    torch.manual_seed(0)
    optimizer = config.build_optimizer(GPT(config.model_config(23)))
    assert [g["lr_scale"] for g in optimizer.muon.param_groups] == [pytest.approx(4.0)]
    assert [g["lr_scale"] for g in optimizer.adamw.param_groups] == [pytest.approx(3.0)]
    assert [muon_momentum(s, 8) for s in (0, 4, 8, 20)] == pytest.approx([0.85, 0.90, 0.95, 0.95])
    seen = []
    original = Muon.step

    def spy(self, closure=None):
        seen.append(self.param_groups[0]["momentum"])
        return original(self, closure)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Muon, "step", spy)
        train_gpt(config, text=verse_text)
    assert seen == pytest.approx([muon_momentum(s, 8) for s in range(12)])
    with pytest.raises(ValueError, match="embed_lr is AdamW's rate beside Muon"):
        GPTRunConfig(embed_lr=1e-3)
    with pytest.raises(ValueError, match="muon_momentum_warmup is Muon's momentum warm-up; it needs optimizer='muon'"):
        GPTRunConfig(muon_momentum_warmup=10)
    with pytest.raises(ValueError, match="schedule must be one of 'cosine', 'linear', 'trapezoid'"):
        GPTRunConfig(schedule="step")
    with pytest.raises(ValueError, match="muon_ns_steps must be a whole number, at least 1"):
        GPTRunConfig(optimizer="muon", muon_ns_steps=0)


@pytest.mark.parametrize("steps", [3, 4])
def test_fewer_newton_schulz_steps_are_torch_optim_muons_with_as_many(steps):
    torch.manual_seed(3)
    ours = [torch.nn.Parameter(torch.randn(s)) for s in [(24, 40), (40, 24)]]
    theirs = [torch.nn.Parameter(p.detach().clone()) for p in ours]
    a = Muon(ours, lr=0.02, weight_decay=0.1, ns_steps=steps, ns_dtype=torch.bfloat16)
    b = torch.optim.Muon(theirs, lr=0.02, weight_decay=0.1, ns_steps=steps, adjust_lr_fn="match_rms_adamw")
    for _ in range(3):
        for p, q in zip(ours, theirs, strict=True):
            p.grad = torch.randn_like(p)
            q.grad = p.grad.clone()
        a.step()
        b.step()
    for p, q in zip(ours, theirs, strict=True):
        torch.testing.assert_close(p, q, rtol=0, atol=0)
    # and the run config reaches the optimizer
    config = replace(preset("tiny"), optimizer="muon", muon_ns_steps=steps)
    assert config.build_optimizer(GPT(config.model_config(23))).muon.param_groups[0]["ns_steps"] == steps
    # fewer steps lift the smallest singular values less far towards 1: a trade, measured in chapter 25
    U, _ = torch.linalg.qr(torch.randn(32, 32, dtype=torch.float64, generator=torch.Generator().manual_seed(0)))
    G = U @ torch.diag(torch.logspace(-3, 0, 32, dtype=torch.float64)) @ U.T
    assert torch.linalg.svdvals(newton_schulz(G, steps)).min() < torch.linalg.svdvals(newton_schulz(G, 5)).min()
