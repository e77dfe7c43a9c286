"""Chapter 17's checkers: answers computed another way pass; delegating answers, a generation loop that runs
the whole text again at every step, and training loops with a detail of the recipe wrong are refused, with
the reason or the part named."""

import copy
import math

import torch
import torch.nn.functional as F

import attnbook.torch as at
from attnbook.exercises import check_generate_cached, check_train_loop_by_hand
from attnbook.exercises.ch17 import _PARTS, _greedy_cached
from attnbook.training.lm import train_gpt
from attnbook.training.schedule import lr_at
from attnbook.training.trainer import optimizer_step

# --- generation with the cache ----------------------------------------------------------------------------


def cached_by_hand(model, idx, n_new):
    cache = at.KVCache()
    with torch.no_grad():
        logits = model(idx, cache=cache)[:, -1]
        out = [idx]
        for step in range(n_new):
            next_id = torch.max(logits, dim=-1).indices[:, None]  # another argmax
            out.append(next_id)
            if step + 1 < n_new:
                logits = model(ids=next_id, cache=cache)[:, -1]
    return torch.cat(out, dim=1)


def test_reference_gives_the_uncached_greedy_tokens():
    for case in check_generate_cached.cases:
        model, idx, n_new = copy.deepcopy(case.args)
        assert torch.equal(_greedy_cached(model, idx, n_new), at.generate(model, idx, n_new, greedy=True))


def test_generate_cached_by_hand_passes():
    assert check_generate_cached(cached_by_hand)


def test_generate_cached_that_reruns_the_whole_text_is_refused_with_the_reason():
    def rerun(model, idx, n_new):
        with torch.no_grad():
            for _ in range(n_new):
                idx = torch.cat([idx, model(idx)[:, -1].argmax(-1, keepdim=True)], dim=1)
        return idx

    verdict = check_generate_cached(rerun)
    assert not verdict and "fed the model" in verdict.message and "newest token" in verdict.message

    def rerun_with_cache_unused(model, idx, n_new):  # a cache made, but each step still runs everything
        for _ in range(n_new):
            logits = model(idx, cache=at.KVCache())
            idx = torch.cat([idx, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
        return idx

    verdict = check_generate_cached(rerun_with_cache_unused)
    assert not verdict and "newest token" in verdict.message


def test_generate_cached_that_feeds_the_last_token_is_refused():
    def one_call_too_many(model, idx, n_new):
        cache = at.KVCache()
        logits = model(idx, cache=cache)[:, -1]
        for _ in range(n_new):
            next_id = logits.argmax(-1, keepdim=True)
            idx = torch.cat([idx, next_id], dim=1)
            logits = model(next_id, cache=cache)[:, -1]
        return idx

    verdict = check_generate_cached(one_call_too_many)
    assert not verdict and "never fed back in" in verdict.message


def test_generate_cached_delegating_is_refused_by_name():
    verdict = check_generate_cached(lambda model, idx, n: at.generate(model, idx, n, greedy=True, use_cache=True))
    assert not verdict and "generate" in verdict.message

    def by_sample_next(model, idx, n_new):
        cache = at.KVCache()
        logits = model(idx, cache=cache)[:, -1]
        for step in range(n_new):
            next_id = at.sample_next(logits, greedy=True)
            idx = torch.cat([idx, next_id], dim=1)
            if step + 1 < n_new:
                logits = model(next_id, cache=cache)[:, -1]
        return idx

    verdict = check_generate_cached(by_sample_next)
    assert not verdict and "sample_next" in verdict.message


# --- the capstone -----------------------------------------------------------------------------------------


def lr_with_floor(step, peak, warmup, total, final):
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = min((step - warmup) / max(1, total - 1 - warmup), 1.0)
    return final + (peak - final) * (1 + math.cos(math.pi * progress)) / 2


def draw_batch(ids, block_size, batch_size, generator):
    starts = torch.randint(len(ids) - block_size, (batch_size,), generator=generator)
    windows = ids[starts[:, None] + torch.arange(block_size + 1)]
    return windows[:, :-1], windows[:, 1:]


def loop(model, get_batch, steps, lr, warmup, min_lr, weight_decay, betas, grad_clip, clip=True, zero=True,
         schedule=lr_with_floor, skip_last=False, update=None):
    decay = [p for p in model.parameters() if p.ndim >= 2]
    rest = [p for p in model.parameters() if p.ndim < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": weight_decay}, {"params": rest, "weight_decay": 0}],
                            lr=lr, betas=betas, foreach=False)  # another implementation than the package's
    losses = []
    for step in range(steps):
        for group in opt.param_groups:
            group["lr"] = schedule(step, lr, warmup, steps, min_lr)
        x, y = get_batch()
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        if update is not None:  # a ready-made update instead of the four steps
            update(model, opt, loss, grad_clip)
            losses.append(loss.item())
            continue
        if zero:
            opt.zero_grad(set_to_none=False)
        loss.backward()
        if clip and grad_clip:
            # the norm by hand: the square root of the sum of every gradient's squares
            norm = torch.sqrt(sum((p.grad**2).sum() for p in model.parameters()))
            scale = min(1.0, grad_clip / (float(norm) + 1e-6))
            for p in model.parameters():
                p.grad.mul_(scale)
        if not (skip_last and step == steps - 1):
            opt.step()
        losses.append(float(loss.detach()))
    return losses


PARTS = {"lr_with_floor": lr_with_floor, "draw_batch": draw_batch, "train_loop_by_hand": loop}


def test_capstone_another_way_passes_alone_and_with_its_parts():
    parts = dict(_PARTS)
    assert parts["lr_with_floor"](lr_with_floor)
    assert parts["draw_batch"](draw_batch)
    verdict = check_train_loop_by_hand(PARTS)
    assert verdict, verdict.message
    assert check_train_loop_by_hand(loop)


def test_capstone_names_the_part_that_disagrees():
    def no_floor(step, peak, warmup, total, final):
        return lr_with_floor(step, peak, warmup, total, 0.0)

    verdict = check_train_loop_by_hand({**PARTS, "lr_with_floor": no_floor})
    assert not verdict and "`lr_with_floor`" in verdict.message and "final" in verdict.message

    def unshifted(ids, block_size, batch_size, generator):
        x, _ = draw_batch(ids, block_size, batch_size, generator)
        return x, x

    verdict = check_train_loop_by_hand({**PARTS, "draw_batch": unshifted})
    assert not verdict and "`draw_batch`" in verdict.message and "shifted by one" in verdict.message


def test_capstone_parts_not_attempted_read_as_not_attempted():
    def stub(*args):
        raise NotImplementedError

    verdict = check_train_loop_by_hand({"lr_with_floor": stub, "draw_batch": stub, "train_loop_by_hand": stub})
    assert not verdict and not verdict.attempted and "lr_with_floor" in verdict.message


def test_capstone_loops_with_a_detail_wrong_are_refused_naming_it():
    def run(**change):
        return check_train_loop_by_hand(lambda *args: loop(*args, **change))

    verdict = run(clip=False)
    assert not verdict and "clip the gradient norm" in verdict.message
    verdict = run(zero=False)
    assert not verdict and "zero_grad" in verdict.message
    verdict = run(schedule=lambda step, peak, warmup, total, final: peak)
    assert not verdict and "schedule" in verdict.message

    def linear(step, peak, warmup, total, final):  # a plausible slip of one's own: a linear decay
        if step < warmup:
            return peak * (step + 1) / warmup
        return final + (peak - final) * (1 - (step - warmup) / max(1, total - 1 - warmup))

    verdict = run(schedule=linear)
    assert not verdict and "The losses agree up to step" in verdict.message


def test_capstone_loop_that_skips_the_last_update_is_refused_on_the_parameters():
    verdict = check_train_loop_by_hand(lambda *args: loop(*args, skip_last=True))  # every loss right
    assert not verdict and "after the last step the parameter" in verdict.message


def test_capstone_delegating_is_refused_by_name():
    def with_optimizer_step(*args):
        return loop(*args, update=optimizer_step)

    verdict = check_train_loop_by_hand(with_optimizer_step)
    assert not verdict and "optimizer_step" in verdict.message
    verdict = check_train_loop_by_hand(lambda *args: loop(*args, schedule=lr_at))
    assert not verdict and "lr_at" in verdict.message
    assert train_gpt in check_train_loop_by_hand.forbidden


def test_capstone_parts_accept_their_references_and_name_each_mistake():
    for key, checker in _PARTS:
        assert checker(checker.reference), key
        for mistake in checker.mistakes:
            verdict = check_train_loop_by_hand({**PARTS, key: mistake.fn})
            assert not verdict and f"`{key}`" in verdict.message and mistake.hint in verdict.message
