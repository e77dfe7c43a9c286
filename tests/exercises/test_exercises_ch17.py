"""Chapter 17's checkers: answers computed another way pass; delegating answers, speculative decoding that
calls the target more often than its rounds need or without its cache, and training loops with a detail of
the recipe wrong are refused, with the reason or the part named."""

import copy
import math

import torch
import torch.nn.functional as F
from _answers import accepts_reference, unwatched

import attnbook.torch as at
from attnbook.exercises import check_speculative_greedy, check_train_loop_by_hand
from attnbook.exercises._harness import Outcome
from attnbook.exercises.ch17 import (
    _PARTS,
    TARGET,
    _draft_token_kept,
    _greedy,
    _keep,
    _no_target_rollback,
    _rounds,
    _speculative,
)
from attnbook.training.lm import train_gpt
from attnbook.training.schedule import lr_at
from attnbook.training.trainer import optimizer_step

# --- greedy speculative decoding ---------------------------------------------------------------------------


def speculative_by_hand(target, draft, idx, n_new, k):
    """Another way: counters of what each cache holds, and a rolled-back cache rebuilt as a new KVCache."""

    def rebuilt(cache, length):
        fresh = at.KVCache()
        for module in cache.keys:
            fresh.keys[module] = cache.keys[module][:, :, :length].clone()
            fresh.values[module] = cache.values[module][:, :, :length].clone()
            fresh.seen[module] = length
        return fresh

    t_cache, d_cache, t_len, d_len = at.KVCache(), at.KVCache(), 0, 0
    text = idx[0].tolist()
    goal = len(text) + n_new
    with torch.no_grad():
        while len(text) < goal:
            guesses = []
            for _ in range(min(k, goal - len(text) - 1)):
                feed = (text + guesses)[d_len:]
                d_len += len(feed)
                guesses.append(int(torch.max(draft(torch.tensor([feed]), cache=d_cache)[0, -1], dim=-1).indices))
            feed = (text + guesses)[t_len:]
            picks = target(torch.tensor([feed]), cache=t_cache)[0, len(feed) - len(guesses) - 1:].argmax(-1).tolist()
            kept = 0
            while kept < len(guesses) and guesses[kept] == picks[kept]:
                kept += 1
            text += guesses[:kept] + [picks[kept]]
            t_len = len(text) - 1
            t_cache = rebuilt(t_cache, t_len)
            d_len = min(d_len, t_len)
            d_cache = rebuilt(d_cache, d_len)
    return torch.tensor([text])


def test_the_reference_and_the_cases():
    for case in check_speculative_greedy.cases:
        args = copy.deepcopy(case.args)
        assert torch.equal(_speculative(*copy.deepcopy(args)), _greedy(*copy.deepcopy(args)))
    rounds = {case.label: _rounds(*copy.deepcopy(case.args)) for case in check_speculative_greedy.cases}
    n_new = {case.label: case.args[3] for case in check_speculative_greedy.cases}
    fickle = next(label for label in rounds if "every third" in label)
    assert 1 < n_new[fickle] / rounds[fickle] < 4  # the draft agrees often, and not always
    assert sum(rounds[label] < n_new[label] for label in rounds) >= 5


def test_speculative_by_hand_passes():
    assert check_speculative_greedy(speculative_by_hand)
    verdict = check_speculative_greedy(lambda *args: _speculative(*args))
    assert not verdict and "attnbook.exercises.ch17._speculative" in verdict.message


def test_plain_cached_greedy_is_refused_for_its_calls():
    def plain(target, draft, idx, n_new, k):
        cache = at.KVCache()
        with torch.no_grad():
            logits = target(idx, cache=cache)[:, -1]
            for step in range(n_new):
                next_id = logits.argmax(-1, keepdim=True)
                idx = torch.cat([idx, next_id], dim=1)
                if step + 1 < n_new:
                    logits = target(next_id, cache=cache)[:, -1]
        return idx

    verdict = check_speculative_greedy(plain)
    assert not verdict and "the target was called 12 times" in verdict.message and "ONE call" in verdict.message


def test_checking_the_proposals_one_by_one_is_refused():
    def one_by_one(target, draft, idx, n_new, k):
        t_cache, d_cache = at.KVCache(), at.KVCache()
        out, end = idx, idx.shape[1] + n_new
        with torch.no_grad():
            while out.shape[1] < end:
                guess = draft(out[:, d_cache.length:], cache=d_cache)[:, -1].argmax(-1, keepdim=True)
                pick = target(out[:, t_cache.length:], cache=t_cache)[:, -1].argmax(-1, keepdim=True)
                out = torch.cat([out, pick], dim=1)
                if not torch.equal(guess, pick):
                    _keep(d_cache, out.shape[1] - 2)
        return out

    verdict = check_speculative_greedy(one_by_one)
    assert not verdict and "the target was called" in verdict.message


def test_a_target_without_its_cache_is_refused():
    def rerun(target, draft, idx, n_new, k):
        return _speculative(_Uncached(target), draft, idx, n_new, k)

    class _Uncached:  # runs the whole text at each check, the cache left empty
        def __init__(self, model):
            self.model, self.seen = model, None

        def __call__(self, ids, cache=None):
            self.seen = ids if self.seen is None else torch.cat([self.seen[:, :cache.length], ids], dim=1)
            cache.keys.clear()
            return self.model(self.seen)

    with unwatched():  # the checker's own speculation, run with a model that drops its cache
        verdict = check_speculative_greedy(rerun)
    assert not verdict and "without its cache" in verdict.message


def test_the_typical_mistakes_are_named():
    verdict = check_speculative_greedy(_no_target_rollback)
    assert not verdict and "still holds the keys and values of the proposals it rejected" in verdict.message
    verdict = check_speculative_greedy(_draft_token_kept)
    assert not verdict and "the target's own greedy choice" in verdict.message


def test_delegating_is_refused_by_name():
    verdict = check_speculative_greedy(lambda target, draft, idx, n, k: at.generate(target, idx, n, greedy=True))
    assert not verdict and "generate" in verdict.message

    def by_sample_next(target, draft, idx, n_new, k):
        out = idx
        with torch.no_grad():
            for _ in range(n_new):
                out = torch.cat([out, at.sample_next(target(out)[:, -1], greedy=True)], dim=1)
        return out

    verdict = check_speculative_greedy(by_sample_next)
    assert not verdict and "sample_next" in verdict.message


def test_choices_read_one_position_late_are_refused():
    # A plausible slip: the target's logit for "after the i-th proposal" taken from the position after it.
    def late(target, draft, idx, n_new, k):
        t_cache, d_cache = at.KVCache(), at.KVCache()
        out, end = idx, idx.shape[1] + n_new
        with torch.no_grad():
            while out.shape[1] < end:
                m = min(k, end - out.shape[1] - 1)
                proposal = out
                for _ in range(m):
                    logits = draft(proposal[:, d_cache.length:], cache=d_cache)[:, -1]
                    proposal = torch.cat([proposal, logits.argmax(-1, keepdim=True)], dim=1)
                n = out.shape[1]
                logits = target(proposal[:, t_cache.length:], cache=t_cache)[0]
                choice = torch.cat([logits[-m:], logits[-1:]]).argmax(-1) if m else logits[-1:].argmax(-1)
                j = 0
                while j < m and proposal[0, n + j] == choice[j]:
                    j += 1
                out = torch.cat([out, proposal[:, n:n + j], choice[None, j:j + 1]], dim=1)
                _keep(t_cache, out.shape[1] - 1)
                _keep(d_cache, min(d_cache.length, out.shape[1] - 1))
        return out

    assert not check_speculative_greedy(late)


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


def test_capstone_another_way_without_its_gpt_or_its_parts_is_refused_saying_what_is_missing():
    parts = dict(_PARTS)
    assert parts["lr_with_floor"](lr_with_floor)
    assert parts["draw_batch"](draw_batch)
    verdict = check_train_loop_by_hand(PARTS)  # no "GPT": the target would train the package's
    assert not verdict and verdict.outcome is Outcome.WRONG_FORM, verdict.message
    assert "has no 'GPT'" in verdict.message and "not the package's" in verdict.message
    verdict = check_train_loop_by_hand(loop)  # right on every small case, but alone
    assert not verdict and verdict.outcome is Outcome.WRONG_FORM, verdict.message
    assert "agrees with the package's trainer on the small cases" in verdict.message
    assert "lr_with_floor and draw_batch go unchecked" in verdict.message


class OwnGPT(torch.nn.Module):
    """A GPT of one's own modules (chapter 15's capstone), counting its forward passes in training mode."""

    def __init__(self, vocab_size, block_size, n_layers, n_heads, d_model):
        super().__init__()
        self.n_heads, self.trained_steps = n_heads, 0
        self.wte, self.wpe = torch.nn.Embedding(vocab_size, d_model), torch.nn.Embedding(block_size, d_model)
        self.blocks = torch.nn.ModuleList(torch.nn.ModuleDict({
            "ln_1": torch.nn.LayerNorm(d_model), "qkv": torch.nn.Linear(d_model, 3 * d_model),
            "proj": torch.nn.Linear(d_model, d_model), "ln_2": torch.nn.LayerNorm(d_model),
            "fc": torch.nn.Linear(d_model, 4 * d_model), "out": torch.nn.Linear(4 * d_model, d_model)})
            for _ in range(n_layers))
        self.ln_f = torch.nn.LayerNorm(d_model)
        for m in self.modules():
            if isinstance(m, (torch.nn.Linear, torch.nn.Embedding)):
                torch.nn.init.normal_(m.weight, std=0.02)
            if isinstance(m, torch.nn.Linear):
                torch.nn.init.zeros_(m.bias)

    def forward(self, ids):
        self.trained_steps += self.training
        B, T = ids.shape
        x = self.wte(ids) + self.wpe(torch.arange(T))
        for b in self.blocks:
            q, k, v = (t.view(B, T, self.n_heads, -1).transpose(1, 2) for t in b["qkv"](b["ln_1"](x)).chunk(3, -1))
            scores = (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).masked_fill(
                torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
            x = x + b["proj"]((F.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(B, T, -1))
            x = x + b["out"](F.gelu(b["fc"](b["ln_2"](x)), approximate="tanh"))
        return self.ln_f(x) @ self.wte.weight.T


def test_capstone_target_trains_the_learners_own_gpt_class():
    built = []

    class Recorded(OwnGPT):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            built.append(self)

    verdict = check_train_loop_by_hand({**PARTS, "GPT": Recorded})
    assert verdict, verdict.message
    assert "package's GPT" not in verdict.message
    assert len(built) == 1 and built[0].trained_steps == TARGET["steps"]  # built once, trained 300 steps


def test_capstone_target_with_an_unwritten_gpt_class_reads_as_not_attempted():
    class Stub(torch.nn.Module):
        def __init__(self, *args, **kwargs):
            raise NotImplementedError

    verdict = check_train_loop_by_hand({**PARTS, "GPT": Stub})
    assert not verdict and not verdict.attempted, verdict.message
    assert "must train your GPT class, and your GPT class is not written yet" in verdict.message, verdict.message


def test_capstone_target_refuses_a_gpt_class_holding_the_packages():
    class Wrapper(torch.nn.Module):
        def __init__(self, vocab_size, block_size, n_layers, n_heads, d_model):
            super().__init__()
            self.inner = at.GPT(at.GPTConfig(vocab_size=vocab_size, block_size=block_size, n_layers=n_layers,
                                             n_heads=n_heads, d_model=d_model))

        def forward(self, ids):
            return self.inner(ids)

    verdict = check_train_loop_by_hand({**PARTS, "GPT": Wrapper})
    assert not verdict and "attnbook.torch.transformer.GPT" in verdict.message, verdict.message


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
        assert accepts_reference(checker), key
        for mistake in checker.mistakes:
            verdict = check_train_loop_by_hand({**PARTS, key: mistake.fn})
            assert not verdict and f"`{key}`" in verdict.message and mistake.hint in verdict.message
