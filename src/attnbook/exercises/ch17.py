"""Checkers for the coding exercises of chapter 17 (training a GPT on Shakespeare)."""

from __future__ import annotations

import copy
import dataclasses
import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from attnbook.data.shakespeare import DataUnavailableError, load_tinyshakespeare
from attnbook.data.text import CharTokenizer, random_windows, split
from attnbook.exercises._capstone import CannotCheck, PartsChecker
from attnbook.exercises._harness import Case, Checker, Mistake, Outcome, Verdict, _resolve
from attnbook.exercises.ch15 import _ready_made
from attnbook.torch.decoding import generate, sample_next
from attnbook.torch.kvcache import KVCache
from attnbook.torch.transformer import GPT, GPTConfig
from attnbook.training.lm import evaluate_loss, train_gpt
from attnbook.training.schedule import lr_at
from attnbook.training.trainer import TrainConfig, make_optimizer, optimizer_step, train


def _bigram_counts(train_ids, V, start: float) -> torch.Tensor:
    """``(V, V)``: how often each pair (previous, next) occurs in ``train_ids``, every count from ``start``."""
    counts = torch.full((V, V), start, dtype=torch.float64)
    counts.index_put_((train_ids[:-1], train_ids[1:]), torch.ones(len(train_ids) - 1, dtype=torch.float64),
                      accumulate=True)
    return counts


def _bigram_loss(train_ids, val_ids, V):
    counts = _bigram_counts(train_ids, V, start=1.0)  # add-one: every pair has been 'seen' once
    log_p = (counts / counts.sum(dim=1, keepdim=True)).log()
    return float(-log_p[val_ids[:-1], val_ids[1:]].mean())


def _unsmoothed(train_ids, val_ids, V):
    counts = _bigram_counts(train_ids, V, start=0.0)
    log_p = (counts / counts.sum(dim=1, keepdim=True).clamp_min(1)).log()
    return float(-log_p[val_ids[:-1], val_ids[1:]].mean())


def _on_train(train_ids, val_ids, V):
    return _bigram_loss(train_ids, train_ids, V)


def _denominator_plus_one(train_ids, val_ids, V):
    counts = _bigram_counts(train_ids, V, start=0.0)
    log_p = ((counts + 1) / (counts.sum(dim=1, keepdim=True) + 1)).log()  # 1 added below, not V
    return float(-log_p[val_ids[:-1], val_ids[1:]].mean())


def _unigram(train_ids, val_ids, V):
    counts = torch.ones(V, dtype=torch.float64) + torch.bincount(train_ids, minlength=V)
    return float(-(counts / counts.sum()).log()[val_ids[1:]].mean())


def _bigram_cases() -> list[Case]:
    g = torch.Generator().manual_seed(1701)
    cases = [Case("train [0, 1, 0, 1, 0], val [0, 1, 1], V=2",
                  (torch.tensor([0, 1, 0, 1, 0]), torch.tensor([0, 1, 1]), 2))]
    for n, V in ((200, 5), (500, 8)):
        train = torch.randint(V, (n,), generator=g)
        cases.append(Case(f"random ids, {n} training and 60 validation, V={V}",
                          (train, torch.randint(V, (60,), generator=g), V)))
    return cases


check_bigram_loss = Checker(
    name="bigram_loss",
    doc="Check ``fn(train_ids, val_ids, V) -> float``: add-one bigram cross-entropy on the validation ids.",
    reference=_bigram_loss,
    cases=_bigram_cases(),
    mistakes=(
        Mistake(_unsmoothed, "a pair never seen in training gets probability 0 and an infinite loss: start every "
                "count at 1 (add-one smoothing)."),
        Mistake(_on_train, "evaluate on the validation ids; the counts come from the training ids."),
        Mistake(_unigram, "that ignores the previous character: count pairs (previous, next), one row per previous "
                "character."),
        Mistake(_denominator_plus_one, "add-one smoothing adds 1 to each of the V counts of a row, so the row's "
                "total grows by V, not by 1: divide by the row's count plus V, or the probabilities of a row do not "
                "sum to 1."),
    ),
    atol=1e-9,
)


def _scores(prompt_len, new_tokens, use_cache):
    p, n = prompt_len, new_tokens
    if not use_cache:  # forward s runs causal attention over all p + s tokens
        return sum((p + s) * (p + s + 1) // 2 for s in range(n))
    return p * (p + 1) // 2 + sum(p + s for s in range(1, n))  # then one query over p + s keys


def _full_squares(prompt_len, new_tokens, use_cache):
    p, n = prompt_len, new_tokens
    if not use_cache:
        return sum((p + s) ** 2 for s in range(n))
    return p * p + sum(p + s for s in range(1, n))


def _one_key_too_many(prompt_len, new_tokens, use_cache):
    p, n = prompt_len, new_tokens
    if not use_cache:
        return _scores(p, n, use_cache)
    return p * (p + 1) // 2 + sum(p + s + 1 for s in range(1, n))


def _one_forward_too_many(prompt_len, new_tokens, use_cache):
    p, n = prompt_len, new_tokens
    if not use_cache:
        return sum((p + s) * (p + s + 1) // 2 for s in range(n + 1))
    return p * (p + 1) // 2 + sum(p + s for s in range(1, n + 1))


check_attention_scores = Checker(
    name="attention_scores",
    doc="Check ``fn(prompt_len, new_tokens, use_cache) -> int``: query-key pairs scored during generation.",
    reference=_scores,
    cases=[Case(f"prompt_len={p}, new_tokens={n}, use_cache={c}", (p, n, c))
           # (3, 5): with the cache, one key too many per step (p + s + 1) and full squares give different counts
           for p, n in ((1, 1), (3, 5), (64, 256)) for c in (False, True)],
    mistakes=(
        Mistake(_full_squares, "causal attention scores only the allowed pairs: L (L + 1) / 2 for L tokens, "
                "not L squared."),
        Mistake(_one_forward_too_many, "n new tokens take n forward passes: the last token sampled is never fed "
                "back in."),
        Mistake(_one_key_too_many, "with the cache, forward pass s (s = 1 .. n - 1) scores its one new query against "
                "p + s keys: the p of the prompt and the s tokens generated so far, its own included, not p + s + 1."),
    ),
)


# --- greedy speculative decoding with key-value caches ----------------------------------------------


@dataclass(repr=False)
class _OneThread(PartsChecker):
    """A ``PartsChecker`` that runs on one thread: its models are so small that a second thread only waits
    (and, on a busy machine, waits long), so a check takes the same time wherever it runs."""

    def __call__(self, answer: Any) -> Verdict:
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            return super().__call__(answer)
        finally:
            torch.set_num_threads(threads)



class _Calls:
    """The forward passes of a model as the checker sees them: the number of tokens fed each time, whether a
    cache came with them, the parameters at each (when asked) and the model that ran them.

    A deep copy of a model copies its hooks; this recorder stays one object through every copy
    (``__deepcopy__``), so the checker sees the calls made on whichever copy of the model an answer got.
    """

    def __init__(self) -> None:
        self.snapshots = False
        self.reset()

    def __deepcopy__(self, memo: dict) -> _Calls:
        return self

    def reset(self, snapshots: bool = False) -> None:
        self.lengths: list[int] = []
        self.cached: list[bool] = []
        self.params: list[dict[str, torch.Tensor]] = []
        self.model: GPT | None = None
        self.snapshots = snapshots

    def hook(self, module: GPT, args: tuple, kwargs: dict) -> None:
        ids = args[0] if args else kwargs.get("ids")
        cache = args[1] if len(args) > 1 else kwargs.get("cache")
        self.lengths.append(int(ids.shape[-1]) if torch.is_tensor(ids) else -1)
        self.cached.append(cache is not None)
        self.model = module
        if self.snapshots:
            self.params.append({k: v.detach().clone() for k, v in module.named_parameters()})


class _CheckedGPT(GPT):
    """The package's GPT, with a recorder of its forward passes, compared by ``==`` as the harness compares
    arguments: equal weights (``trained=False``), or the same architecture when the exercise trains it."""

    __hash__ = GPT.__hash__

    def __init__(self, config: GPTConfig, trained: bool = False) -> None:
        super().__init__(config)
        self.trained = trained
        self.calls = _Calls()
        self.register_forward_pre_hook(self.calls.hook, with_kwargs=True)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, GPT) or other.config != self.config:
            return False
        if self.trained:
            return True
        mine, theirs = self.state_dict(), other.state_dict()
        return mine.keys() == theirs.keys() and all(torch.equal(mine[k], theirs[k]) for k in mine)

    def __repr__(self) -> str:
        c = self.config
        return (f"GPT(vocab_size={c.vocab_size}, block_size={c.block_size}, n_layers={c.n_layers}, "
                f"n_heads={c.n_heads}, d_model={c.d_model})")


def _random_model(seed: int, V: int, T: int, d: int, L: int, h: int, trained: bool = False,
                  dtype: torch.dtype = torch.float64) -> _CheckedGPT:
    """A GPT with random weights everywhere (biases and norms too), so that its logits are far from ties."""
    torch.manual_seed(seed)
    model = _CheckedGPT(GPTConfig(vocab_size=V, block_size=T, n_layers=L, n_heads=h, d_model=d,
                                  activation="gelu"), trained=trained).to(dtype)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():  # matrices and tables of unit-size outputs; vectors (biases, norms) around 1
        for p in model.parameters():
            noise = torch.randn(p.shape, generator=g, dtype=p.dtype)
            p.copy_(noise / math.sqrt(p.shape[0]) if p.dim() >= 2 else 1 + 0.3 * noise)
    return model


def _greedy(target, draft, idx, n_new, k):
    # The target's plain greedy continuation: what speculative decoding must reproduce token for token.
    return generate(target, idx, n_new, greedy=True)


def _keep(cache: KVCache, length: int) -> None:
    """Roll ``cache`` back to its first ``length`` positions (a cache without ``max_length``)."""
    for module in cache.keys:
        cache.keys[module] = cache.keys[module][..., :length, :]
        cache.values[module] = cache.values[module][..., :length, :]
        cache.seen[module] = length


def _speculative(target, draft, idx, n_new, k, roll_target=True, roll_draft=True, keep_draft_token=False):
    """Greedy speculative decoding (and, with a flag off, its typical mistakes): each cache holds a prefix of
    the text, and each call feeds the model only what its cache lacks."""
    target_cache, draft_cache = KVCache(), KVCache()
    out, end = idx, idx.shape[1] + n_new
    fed = {"target": 0, "draft": 0}  # how many tokens of the text each model's cache is taken to hold
    with torch.no_grad():
        while out.shape[1] < end:
            m = min(k, end - out.shape[1] - 1)  # proposals; the target adds one token of its own
            proposal = out
            for _ in range(m):
                logits = draft(proposal[:, fed["draft"]:], cache=draft_cache)[:, -1]
                fed["draft"] = proposal.shape[1]
                proposal = torch.cat([proposal, logits.argmax(-1, keepdim=True)], dim=1)
            n = out.shape[1]
            choice = target(proposal[:, fed["target"]:], cache=target_cache)[0, -(m + 1):].argmax(-1)
            drafted = proposal[0, n:]
            j = 0
            while j < m and drafted[j] == choice[j]:
                j += 1
            own = drafted[j:j + 1] if keep_draft_token and j < m else choice[j:j + 1]
            out = torch.cat([out, drafted[None, :j], own[None]], dim=1)
            fed["target"] = out.shape[1] - 1
            fed["draft"] = min(fed["draft"], out.shape[1] - 1)
            if roll_target:
                _keep(target_cache, fed["target"])
            if roll_draft:
                _keep(draft_cache, fed["draft"])
    return out


def _speculative_reference(target, draft, idx, n_new, k):
    # Exactly the target's greedy continuation (the tests compare it with `generate` on every case).
    return _speculative(target, draft, idx, n_new, k)


def _no_target_rollback(target, draft, idx, n_new, k):
    return _speculative(target, draft, idx, n_new, k, roll_target=False)


def _draft_token_kept(target, draft, idx, n_new, k):
    return _speculative(target, draft, idx, n_new, k, keep_draft_token=True)


def _rounds(target, draft, idx, n_new, k) -> int:
    """The number of rounds (calls of the target) greedy speculative decoding takes on this case: each round
    the draft proposes up to ``k`` tokens greedily, the target keeps the longest agreeing prefix and adds one."""
    with torch.no_grad():
        greedy = generate(target, idx, n_new, greedy=True)[0]
        length, end, rounds = idx.shape[1], idx.shape[1] + n_new, 0
        while length < end:
            m = min(k, end - length - 1)
            guess = generate(draft, greedy[None, :length], m, greedy=True)[0, length:] if m else greedy[:0]
            j = 0
            while j < m and guess[j] == greedy[length + j]:
                j += 1
            length, rounds = length + j + 1, rounds + 1
    return rounds


def _draft_of(target: _CheckedGPT, seed: int, noise: float) -> _CheckedGPT:
    """A draft with the target's architecture and weights plus ``noise`` times random ones (its own recorder)."""
    c = target.config
    draft = _random_model(seed, c.vocab_size, c.block_size, c.d_model, c.n_layers, c.n_heads)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p, q in zip(draft.parameters(), target.parameters(), strict=True):
            p.copy_(q + noise * torch.randn(q.shape, generator=g, dtype=q.dtype) * q.abs().mean())
    return draft


class _Fickle(_CheckedGPT):
    """A draft with the target's weights that proposes a wrong token at every third position (2, 5, 8, ...):
    it agrees with the target often, and not always."""

    def forward(self, ids: torch.Tensor, cache: KVCache | None = None, window: int | None = None) -> torch.Tensor:
        start = cache.length if cache is not None else 0
        logits = super().forward(ids, cache=cache, window=window)
        wrong = (torch.arange(start, start + ids.shape[-1]) % 3 == 2)[None, :, None]  # (1, T, 1)
        other = F.one_hot((logits.argmax(-1) + 1) % logits.shape[-1], logits.shape[-1]).to(logits.dtype)
        return logits + 1e3 * other * wrong


def _fickle_copy(target: _CheckedGPT) -> _Fickle:
    draft = _Fickle(target.config).to(next(target.parameters()).dtype)
    draft.load_state_dict(target.state_dict())
    return draft


def _speculative_cases() -> list[Case]:
    cases = []
    # (seed, V, block_size, d_model, layers, heads, prompt, n_new, k, draft): the draft a copy of the target's
    # weights (it always agrees), that copy wrong at every third position, the target's weights changed a
    # little (it agrees for a while), or a smaller model with weights of its own (it seldom agrees).
    for seed, V, T, d, L, h, prompt, n_new, k, kind in (
            (1710, 13, 16, 16, 2, 2, 3, 12, 3, "same"), (1711, 11, 12, 8, 1, 2, 1, 1, 2, "same"),
            (1712, 11, 12, 8, 1, 2, 2, 2, 4, "same"), (1716, 5, 48, 8, 1, 2, 2, 23, 5, "close"),
            (1713, 13, 40, 16, 2, 4, 4, 17, 3, "fickle"), (1714, 11, 40, 16, 2, 2, 3, 14, 3, "closer"),
            (1715, 13, 16, 16, 2, 2, 5, 12, 3, "small")):
        target = _random_model(seed, V, T, d, L, h)
        if kind == "same":
            draft, what = _draft_of(target, seed + 100, 0.0), "the target's weights (it always agrees)"
        elif kind == "fickle":
            draft, what = _fickle_copy(target), "the target's weights but a wrong token at every third position"
        elif kind in ("close", "closer"):
            noise = 0.3 if kind == "close" else 0.1
            draft, what = _draft_of(target, seed + 100, noise), f"the target's weights plus {noise:g} x noise"
        else:
            draft = _random_model(seed + 100, V, T, 8, 1, 2)
            what = "a 1-block model of width 8 with weights of its own"
        idx = torch.randint(0, V, (1, prompt), generator=torch.Generator().manual_seed(seed))
        cases.append(Case(f"a target GPT with random weights, V={V}, block_size={T}, {L} block(s), width {d}; a draft "
                          f"with {what}; a prompt of shape (1, {prompt}), n_new={n_new}, k={k}",
                          (target, draft, idx, n_new, k)))
    return cases


def _calls_of_speculation(fn, case: Case, call) -> str | None:
    """Once the tokens agree: the target must check each round's proposals in one call, with its cache."""
    target, draft, idx, n_new, k = copy.deepcopy(case.args)
    target.calls.reset()
    draft.calls.reset()
    call(target, draft, idx, n_new, k)
    t_lengths, t_cached = list(target.calls.lengths), list(target.calls.cached)
    d_lengths, d_cached = list(draft.calls.lengths), list(draft.calls.cached)
    rounds = _rounds(*copy.deepcopy(case.args))
    where = f"(input: {case.label})"
    if not t_lengths:
        return (f"the tokens are right, but the checker saw no call of the target: call it as "
                f"target(ids, cache=cache) {where}.")
    if not all(t_cached) or any(n > k + 1 for n in t_lengths[1:]):
        n = max(t_lengths[1:], default=0)
        return (f"the tokens are right, but a call of the target after its first fed it {n} tokens or came without its "
                f"cache: each check feeds only what the target's cache lacks (the newest kept token and the k = {k} "
                f"proposals at most) {where}.")
    if len(t_lengths) > rounds + 1:
        return (f"the tokens are right, but the target was called {len(t_lengths)} times for {n_new} new token(s). "
                f"Here greedy speculation takes {rounds} round(s): each round the draft proposes up to k = {k} tokens "
                f"and ONE call of the target checks all of them, keeping the longest prefix it agrees with and adding "
                f"its own next token. Check the proposals together, and keep the draft's cache rolled back to the "
                f"kept tokens, or its proposals continue a text that is no longer there {where}.")
    if rounds < n_new and not d_lengths:
        return (f"the tokens are right, but the draft was never called: it proposes the tokens the target "
                f"checks {where}.")
    if d_lengths and (not all(d_cached) or any(n > k + 1 for n in d_lengths[1:])):
        return (f"the tokens are right, but a call of the draft after its first fed it more than k + 1 = {k + 1} "
                f"tokens or came without its cache: the draft keeps a cache of its own and is fed only what it "
                f"lacks {where}.")
    return None


check_speculative_greedy = _OneThread(
    name="speculative_greedy",
    allowed=(KVCache,),  # the caches are the package's; the speculation is the exercise
    error_hints=(("T_q >= 1", "a model was called with no new token: its cache already held every position of "
                  "the ids it was given. After a round, cut each cache back to the tokens kept (the draft's too, "
                  "whose proposals were rejected) and feed each model only the tokens its cache lacks."),),
    doc="Check ``fn(target, draft, idx, n_new, k) -> (1, T + n_new) ids``: greedy speculative decoding of "
        "``n_new >= 1`` tokens after the prompt ``idx`` ``(1, T)``, ``T + n_new - 1 <= block_size``: exactly the "
        "target's greedy continuation; the draft proposes up to ``k`` tokens a round with its own ``KVCache``, one "
        "call of the target (with its cache) checks them, and the target is called no more often than the rounds "
        "this needs (plus one, for a prompt run on its own).",
    reference=_speculative_reference,
    cases=_speculative_cases(),
    mistakes=(
        Mistake(_no_target_rollback, "after a check the target's cache still holds the keys and values of the "
                "proposals it rejected, so its next call reads them as earlier text: cut every cached tensor back "
                "to the kept tokens ([..., :length, :]) and set cache.seen to that length."),
        Mistake(_draft_token_kept, "at the first disagreement the token to keep is the target's own greedy choice; "
                "the draft's proposal there is the one the target rejected."),
    ),
    forbidden=(generate, sample_next),
    extra=_calls_of_speculation,
)


# --- capstone: the training loop by hand ------------------------------------------------------------------


def _lr(step, peak, warmup, total, final):
    return lr_at(step, peak, warmup, total, final, "cosine")


def _by_hand(step, peak, warmup, total, final):
    """The schedule written out, for the typical mistakes (which may not call the package's ``lr_at``)."""
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = min(max((step - warmup) / max(1, total - 1 - warmup), 0.0), 1.0)
    return final + (peak - final) * 0.5 * (1 + math.cos(math.pi * progress))


def _floor_ignored(step, peak, warmup, total, final):
    return _by_hand(step, peak, warmup, total, 0.0)


def _warmup_from_zero(step, peak, warmup, total, final):
    return peak * step / warmup if step < warmup else _by_hand(step, peak, warmup, total, final)


def _decay_too_long(step, peak, warmup, total, final):
    if step < warmup:
        return peak * (step + 1) / warmup
    return final + (peak - final) * 0.5 * (1 + math.cos(math.pi * (step - warmup) / (total - warmup)))


_SCHEDULE_CASES = [Case(f"step={s}, peak={p:g}, warmup={w}, total={t}, final={f:g}", (s, p, w, t, f))
                   for s, p, w, t, f in ((0, 1e-3, 10, 100, 1e-4), (4, 1e-3, 10, 100, 1e-4), (9, 1e-3, 10, 100, 1e-4),
                                         (10, 1e-3, 10, 100, 1e-4), (37, 1e-3, 10, 100, 1e-4),
                                         (99, 1e-3, 10, 100, 1e-4), (0, 2e-3, 0, 50, 2e-4),
                                         (25, 2e-3, 0, 50, 2e-4), (3, 5e-3, 4, 6, 5e-4), (4, 5e-3, 3, 5, 5e-4))]

_LR_WITH_FLOOR = Checker(
    name="lr_with_floor",
    doc="Check ``fn(step, peak, warmup, total, final) -> float``: linear warm-up to ``peak``, then a cosine "
        "down to ``final`` at step ``total - 1``.",
    reference=_lr,
    cases=_SCHEDULE_CASES,
    mistakes=(
        Mistake(_floor_ignored, "the cosine ends at final (the recipe's min_lr), not at 0: final + (peak - final) "
                "times the cosine factor."),
        Mistake(_warmup_from_zero, "steps count from 0, and step 0 already trains: its rate is peak / warmup, "
                "step s's peak (s + 1) / warmup."),
        Mistake(_decay_too_long, "the decay reaches final at the last step, total - 1: divide the steps since the "
                "warm-up by total - 1 - warmup."),
    ),
    forbidden=(lr_at,),
    rtol=1e-9,
    atol=1e-12,
)


def _windows(ids, block_size, batch_size, generator):
    return random_windows(ids, block_size, batch_size, generator)


def _windows_unshifted(ids, block_size, batch_size, generator):
    starts = torch.randint(len(ids) - block_size, (batch_size,), generator=generator)
    x = ids[starts[:, None] + torch.arange(block_size)]
    return x, x


def _windows_short_range(ids, block_size, batch_size, generator):
    starts = torch.randint(len(ids) - block_size - 1, (batch_size,), generator=generator)
    windows = ids[starts[:, None] + torch.arange(block_size + 1)]
    return windows[:, :-1], windows[:, 1:]


class _Generator(torch.Generator):
    """A generator that draws as any other; compared by its seed, since drawing from it is meant to advance it."""

    __hash__ = torch.Generator.__hash__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, torch.Generator) and other.initial_seed() == self.initial_seed()


def _window_cases() -> list[Case]:
    ids = torch.randint(0, 50, (200,), generator=torch.Generator().manual_seed(17))
    return [Case(f"ids of length {n}, block_size={T}, batch_size={B}, generator seeded {seed}",
                 (ids[:n].clone(), T, B, _Generator().manual_seed(seed)))
            for n, T, B, seed in ((200, 8, 4, 0), (40, 16, 6, 1), (12, 11, 3, 2))]


_DRAW_BATCH = Checker(
    name="draw_batch",
    doc="Check ``fn(ids, block_size, batch_size, generator) -> (x, y)``: ``batch_size`` windows at offsets "
        "``torch.randint(len(ids) - block_size, (batch_size,), generator=generator)``, ``x`` the first "
        "``block_size`` ids of each, ``y`` the next-character targets.",
    reference=_windows,
    cases=_window_cases(),
    mistakes=(
        Mistake(_windows_unshifted, "the targets are the inputs shifted by one: y[:, t] is the id after x[:, t]."),
        Mistake(_windows_short_range, "the last window may end at the last id: draw offsets below len(ids) - "
                "block_size, which is torch.randint(len(ids) - block_size, ...)."),
    ),
    forbidden=(random_windows,),
)


# The parts, checked one by one before the whole (kept in a tuple: they are not exercises of their own).
_PARTS = (("lr_with_floor", _LR_WITH_FLOOR), ("draw_batch", _DRAW_BATCH))
del _LR_WITH_FLOOR, _DRAW_BATCH


class _Batches:
    """``get_batch()``: the next of a fixed list of batches ``(x, y)``, once per step; a copy starts from the first."""

    def __init__(self, batches: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
        self.batches = batches
        self.drawn = 0

    def __call__(self) -> tuple[torch.Tensor, torch.Tensor]:
        if self.drawn >= len(self.batches):
            raise RuntimeError(f"get_batch() was called more than {len(self.batches)} times for "
                               f"{len(self.batches)} steps: call it once per step")
        x, y = self.batches[self.drawn]
        self.drawn += 1
        return x.clone(), y.clone()

    __hash__ = object.__hash__

    def __eq__(self, other: object) -> bool:  # the harness's in-place check: the batches, not how many were drawn
        return isinstance(other, _Batches) and len(other.batches) == len(self.batches) and all(
            torch.equal(a, c) and torch.equal(b, d) for (a, b), (c, d) in zip(self.batches, other.batches, strict=True))

    def __repr__(self) -> str:
        x, _ = self.batches[0]
        return f"get_batch: {len(self.batches)} batches of shape {tuple(x.shape)}"


def _package_loop(model, get_batch, steps, lr, warmup, min_lr, weight_decay, betas, grad_clip):
    """The package's own training loop, ``trainer.train``, with these settings and the next-token loss: AdamW
    from ``make_optimizer`` (decay on the matrices only), ``lr_at`` set in every group before each step, and
    ``optimizer_step`` (zero_grad, backward, clipping, step)."""
    config = TrainConfig(steps=steps, lr=lr, warmup=warmup, min_lr=min_lr, weight_decay=weight_decay,
                         beta1=betas[0], beta2=betas[1], grad_clip=grad_clip, progress=False)

    def loss_fn(m, batch):
        x, y = batch
        return F.cross_entropy(m(x).flatten(0, 1), y.flatten())

    # The batches come from get_batch in order; a generator of its own leaves the global seeds alone.
    result = train(model, lambda _: get_batch(), loss_fn, config, generator=torch.Generator())
    model.train()  # as the learner's loop leaves it
    return result.losses


def _loop(model, get_batch, steps, lr, warmup, min_lr, weight_decay, betas, grad_clip, *, clip=True, zero=True,
          schedule=_by_hand, decay_all=False, adam=False, clip_at_zero=False):
    """A loop from torch primitives with one thing changed: the typical mistakes."""
    matrices = [p for p in model.parameters() if p.dim() >= 2]
    vectors = [p for p in model.parameters() if p.dim() < 2]
    groups = ([{"params": list(model.parameters()), "weight_decay": weight_decay}] if decay_all else
              [{"params": matrices, "weight_decay": weight_decay}, {"params": vectors, "weight_decay": 0.0}])
    make = torch.optim.Adam if adam else torch.optim.AdamW
    optimizer = make(groups, lr=lr, betas=tuple(betas))
    losses = []
    for step in range(steps):
        for group in optimizer.param_groups:
            group["lr"] = schedule(step, lr, warmup, steps, min_lr)
        x, y = get_batch()
        loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
        if zero:
            optimizer.zero_grad()
        loss.backward()
        if clip and (grad_clip or clip_at_zero):
            torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        optimizer.step()
        losses.append(loss.item())
    return losses


def _no_clipping(*args):
    return _loop(*args, clip=False)


def _clipped_to_zero(*args):
    return _loop(*args, clip_at_zero=True)


def _no_zero_grad(*args):
    return _loop(*args, zero=False)


def _constant_rate(*args):
    return _loop(*args, schedule=lambda step, peak, warmup, total, final: peak)


def _schedule_to_zero(*args):
    return _loop(*args, schedule=_floor_ignored)


def _schedule_from_zero(*args):
    return _loop(*args, schedule=_warmup_from_zero)


def _decay_everything(*args):
    return _loop(*args, decay_all=True)


def _adam_with_l2(*args):
    return _loop(*args, adam=True)


def _loop_cases() -> list[Case]:
    cases = []
    for seed, (V, T, d, L, h, B, steps, lr, warmup, min_lr, wd, betas, clip) in enumerate((
            (13, 8, 16, 1, 2, 4, 6, 1e-2, 2, 1e-3, 0.1, (0.9, 0.99), 0.5),
            (11, 6, 12, 2, 3, 3, 8, 3e-2, 3, 3e-3, 0.5, (0.8, 0.95), 0.0),
            (17, 8, 16, 2, 2, 5, 7, 2e-2, 0, 2e-3, 0.2, (0.9, 0.99), 2.0))):
        model = _random_model(1710 + seed, V, T, d, L, h, trained=True)
        g = torch.Generator().manual_seed(seed)
        ids = torch.randint(0, V, (400,), generator=g)
        batches = _Batches([random_windows(ids, T, B, g) for _ in range(steps)])
        clipping = f"grad_clip={clip:g}" + (" (no clipping)" if not clip else "")
        cases.append(Case(f"a GPT with random weights (V={V}, {L} block(s), d_model={d}), {steps} steps of batches "
                          f"({B}, {T}), lr={lr:g}, warmup={warmup}, min_lr={min_lr:g}, weight_decay={wd:g}, "
                          f"betas={betas}, {clipping}",
                          (model, batches, steps, lr, warmup, min_lr, wd, betas, clip)))
    return cases


_LOOP_CASES = _loop_cases()

# The target: a small GPT on slices of Tiny Shakespeare, trained by the answer with the checker's batches.
TARGET = {"train_chars": 200_000, "val_chars": 20_000, "n_layers": 2, "n_heads": 2, "d_model": 32,
          "block_size": 32, "batch_size": 32, "steps": 300, "lr": 1e-2, "warmup": 30, "min_lr": 1e-3,
          "weight_decay": 0.1, "betas": (0.9, 0.99), "grad_clip": 1.0, "seed": 0, "val_loss": 2.45}


@functools.cache
def _shakespeare_slices() -> tuple[torch.Tensor, torch.Tensor, int]:
    text = load_tinyshakespeare()
    tok = CharTokenizer.from_text(text)
    train_ids, val_ids = split(tok.encode(text), 0.9)
    return train_ids[:TARGET["train_chars"]], val_ids[:TARGET["val_chars"]], tok.vocab_size


# The learner's own GPT class for the target run (the dict's "GPT"), set while a check runs; None: the package's.
# "reason": why the target ran on the package's GPT; "skip": the target is not run (a bare function refused anyway).
_TARGET_GPT: dict[str, Any] = {"class": None, "note": None, "reason": None, "skip": False}


def _target_model(V: int) -> torch.nn.Module:
    """The model the target run trains: the learner's GPT class built with the target's sizes, or, where there is
    none (or it cannot be built), the package's GPT, with a sentence saying so in ``_TARGET_GPT["note"]``."""
    t = TARGET
    sizes = {"vocab_size": V, "block_size": t["block_size"], "n_layers": t["n_layers"], "n_heads": t["n_heads"],
             "d_model": t["d_model"]}
    cls = _TARGET_GPT["class"]
    torch.manual_seed(t["seed"])
    if cls is not None:
        try:
            model = cls(**sizes)
        except NotImplementedError:
            reason = "your GPT class is not written yet (it raises NotImplementedError)"
        except Exception as exc:  # the learner's bug: said, and the target still checks the loop
            reason = f"`GPT(**sizes)` raised {type(exc).__name__}: {str(exc)[:120]}"
        else:
            if not isinstance(model, torch.nn.Module):
                reason = f"`GPT(**sizes)` returned {type(model).__name__}, not an nn.Module"
            elif (refused := _ready_made(model)) is not None:
                raise _Delegated(refused)
            else:
                return model
        _TARGET_GPT["note"] = f"The training target ran on the package's GPT instead of yours: {reason}."
        _TARGET_GPT["reason"] = reason
        torch.manual_seed(t["seed"])
    else:
        _TARGET_GPT["note"] = ("The training target ran on the package's GPT: pass your GPT class of chapter 15 in "
                               "the dict, under 'GPT', to train your own.")
    return _CheckedGPT(GPTConfig(activation="gelu", **sizes), trained=True)


class _Delegated(Exception):
    """The learner's GPT class holds someone else's model or attention."""


def _reaches_target(fn, call) -> str | None:
    t = TARGET
    try:
        train_ids, val_ids, V = _shakespeare_slices()
    except DataUnavailableError as exc:
        raise CannotCheck(f"the training target (a validation loss of at most {t['val_loss']} on Tiny Shakespeare) "
                          f"could not be checked, because the text cannot be loaded here ({exc}); set "
                          "ATTNBOOK_DATA_DIR to a folder holding it, or run where it can be downloaded") from exc
    try:
        model = _target_model(V)
    except _Delegated as refused:
        return f"the training target needs your own GPT, but {refused}"
    g = torch.Generator().manual_seed(t["seed"])
    batches = _Batches([random_windows(train_ids, t["block_size"], t["batch_size"], g) for _ in range(t["steps"])])
    calls = getattr(model, "calls", None)
    if calls is not None:
        calls.reset()
    call(model, batches, t["steps"], t["lr"], t["warmup"], t["min_lr"], t["weight_decay"], t["betas"],
         t["grad_clip"])
    trained = calls.model if calls is not None and calls.model is not None else model
    val = evaluate_loss(trained, val_ids, t["block_size"])
    whose = "the package's GPT" if calls is not None else "your GPT"
    if not val <= t["val_loss"]:
        return (f"it agrees with the package's trainer on the small cases, but trained for {t['steps']} steps on "
                f"Tiny Shakespeare, {whose} reaches a validation loss of {val:.3f}, above the target "
                f"{t['val_loss']}.")
    return None


def _same_parameters(fn, case: Case, call) -> str | None:
    """Once the losses agree: the parameters after the last step, then (last case) the target on Shakespeare."""
    model, *rest = copy.deepcopy(case.args)
    reference = copy.deepcopy(model)
    _package_loop(reference, *copy.deepcopy(tuple(rest)))
    model.calls.reset()
    call(model, *rest)
    trained = model.calls.model if model.calls.model is not None else model
    want = dict(reference.named_parameters())
    for name, p in trained.named_parameters():
        if not torch.allclose(p.detach(), want[name].detach(), rtol=1e-7, atol=1e-10):
            return (f"the losses agree, but after the last step the parameter {name} differs from the package "
                    f"trainer's: the last update is missing or different (input: {case.label}).")
    if case is _LOOP_CASES[-1] and not _TARGET_GPT["skip"]:
        return _reaches_target(fn, call)
    return None


def _first_difference(fn, case: Case, call) -> str | None:
    """Where the losses first differ, and which parameters differ after the step before."""
    model, *rest = copy.deepcopy(case.args)
    reference = copy.deepcopy(model)
    reference.calls.reset(snapshots=True)
    want = _package_loop(reference, *copy.deepcopy(tuple(rest)))
    wanted = reference.calls.params
    model.calls.reset(snapshots=True)
    got = [float(v) for v in call(model, *rest)]
    seen = model.calls.params
    first = next((s for s, (a, b) in enumerate(zip(want, got, strict=False)) if not math.isclose(a, b, rel_tol=1e-7)),
                 None)
    if first is None:
        return None
    if first == 0:
        return ("The first loss, before any update, already differs: it is the mean cross-entropy of model(x) "
                "against y over all B x T predictions.")
    if len(seen) > first and len(wanted) > first:
        names = [n for n, p in seen[first].items() if not torch.allclose(p, wanted[first][n], rtol=1e-7, atol=1e-10)]
        if names and all(seen[first][n].dim() < 2 for n in names):
            return (f"The losses agree up to step {first}; after update {first} only vectors differ ({names[0]}, ...), "
                    "which points at the weight decay: the matrices only.")
        if names:
            return f"The losses agree up to step {first}; update {first} gives other parameters ({names[0]}, ...)."
    return f"The losses agree up to step {first}, then differ: look at update {first}."


# What the capstone's answer must hold: its three functions and the learner's GPT class, which the target trains.
_REQUIRED = ("lr_with_floor", "draw_batch", "train_loop_by_hand", "GPT")
_THE_DICT = ('{"lr_with_floor": lr_with_floor, "draw_batch": draw_batch, "train_loop_by_hand": train_loop_by_hand, '
             '"GPT": MyGPT}')


@dataclass(repr=False)
class _LoopChecker(_OneThread):
    """The capstone's checker. The answer is the dict of the learner's parts and GPT class (``"GPT"``), which the
    target run trains: a dict without one of them, or a bare loop, is refused, saying what is missing (a bare loop
    is first run on the small cases, so that what is wrong in it is said too). Only the checker's own typical
    mistakes, and answers the tests build from the reference, may come as a bare function."""

    def __call__(self, answer: Any) -> Verdict:
        if not isinstance(answer, Mapping):
            if callable(answer) and not self.watch(_resolve(self.forbidden), answer, ()).trusted:
                return self._bare(answer)
        elif missing := [key for key in _REQUIRED if key not in answer]:
            given = [(key, checker) for key, checker in self.parts if key in answer]
            if any(not checker(answer[key]) for key, checker in given):
                return super().__call__(answer)  # a part that disagrees (or is not attempted) is named first
            return Verdict(False, f"{self.name}: the dict of your parts has no {_listed(missing)}. The exercise asks "
                                  f"for all four, {_THE_DICT}: {_WHY_ALL[missing[0]]}", outcome=Outcome.WRONG_FORM)
        given = answer.get("GPT") if isinstance(answer, Mapping) else None
        _TARGET_GPT.update({"class": given, "note": None, "reason": None})
        try:
            with torch.random.fork_rng():  # the target run seeds the global generator: the caller's stays as it was
                verdict = super().__call__(answer)
            note, reason = _TARGET_GPT["note"], _TARGET_GPT["reason"]
        finally:
            _TARGET_GPT.update({"class": None, "note": None, "reason": None})
        if note is None or not verdict.attempted:
            return verdict
        if given is not None and verdict:  # the loop is right, but the target did not train the learner's GPT
            attempted = "not written yet" not in reason
            return Verdict(False, f"{self.name}: your loop agrees with the package's trainer, but the training target "
                                  f"must train your GPT class, and {reason}.", attempted=attempted,
                           outcome=Outcome.ERROR if attempted else None)
        return Verdict(verdict.passed, f"{verdict.message} {note}", outcome=verdict.outcome)

    def _bare(self, fn: Any) -> Verdict:
        """A bare loop: checked on the small cases (not the target), then refused for want of its parts."""
        small = dataclasses.replace(self, parts=())
        _TARGET_GPT["skip"] = True
        try:
            verdict = Checker.__call__(small, fn)
        finally:
            _TARGET_GPT["skip"] = False
        if not verdict:
            return verdict
        return Verdict(False, f"{self.name}: your loop agrees with the package's trainer on the small cases, but the "
                              f"exercise asks for the dict of your parts, {_THE_DICT}: without it lr_with_floor and "
                              "draw_batch go unchecked and the training target cannot train your own GPT.",
                       outcome=Outcome.WRONG_FORM)


_WHY_ALL = {
    "lr_with_floor": "each part is checked on its own before the loop, so that the one that disagrees is named.",
    "draw_batch": "each part is checked on its own before the loop, so that the one that disagrees is named.",
    "train_loop_by_hand": "the loop itself is the whole that the check trains with.",
    "GPT": "the training target trains your GPT class of chapter 15's capstone, not the package's.",
}


def _listed(keys: list[str]) -> str:
    named = [f"'{k}'" for k in keys]
    return named[0] if len(named) == 1 else ", ".join(named[:-1]) + " or " + named[-1]


check_train_loop_by_hand = _LoopChecker(
    name="train_loop_by_hand",
    doc="Check ``fn(model, get_batch, steps, lr, warmup, min_lr, weight_decay, betas, grad_clip) -> losses``: "
        "``steps`` steps of the package's training loop written out (AdamW with the decay on matrices only, the "
        "warm-up and cosine rate set every step, gradient clipping, ``grad_clip=0`` none), ``get_batch()`` once "
        "per step, the list of the ``steps`` losses returned; the model trained in place must match the "
        "package's trainer, and train a small GPT to a validation loss of at most 2.45 on Tiny Shakespeare. "
        "The answer is the dict of your parts, ``lr_with_floor``, ``draw_batch`` and ``train_loop_by_hand``, each "
        "checked before the whole, with ``GPT``, your GPT class of chapter 15's capstone (built as "
        "``GPT(vocab_size, block_size, n_layers, n_heads, d_model)``), which the target run trains; a dict "
        "without one of them, or a bare function, is refused.",
    reference=_package_loop,
    cases=_LOOP_CASES,
    mistakes=(
        Mistake(_no_zero_grad, "clear the gradients every step (optimizer.zero_grad()) before backward: otherwise "
                "each step adds its gradient to all the earlier ones."),
        Mistake(_no_clipping, "clip the gradient norm to grad_clip (over all parameters together) between "
                "backward and the step; grad_clip=0 means no clipping."),
        Mistake(_clipped_to_zero, "grad_clip = 0 means no clipping: clip_grad_norm_(..., 0) scales every gradient "
                "to a norm of 0, so that only the weight decay moves the weights. Clip only when grad_clip > 0."),
        Mistake(_constant_rate, "set the learning rate of every parameter group before each step, from the "
                "warm-up and cosine schedule; a constant rate is the peak at every step."),
        Mistake(_schedule_from_zero, "steps count from 0 and step 0 already trains: its rate is lr / warmup."),
        Mistake(_schedule_to_zero, "the cosine ends at min_lr, not at 0."),
        Mistake(_decay_everything, "weight decay applies to the matrices only (parameters of 2 or more "
                "dimensions): biases and the norms' parameters go in a group with weight_decay 0."),
        Mistake(_adam_with_l2, "Adam's weight_decay adds the decay to the gradient, which Adam then rescales; "
                "AdamW (torch.optim.AdamW) shrinks the weights directly, as the package does."),
    ),
    forbidden=(train, optimizer_step, make_optimizer, train_gpt, lr_at),
    atol=1e-10,
    rtol=1e-7,
    time_limit=60.0,
    extra_time_limit=600.0,  # the further test trains for 300 steps: seconds on a quiet machine, more under load
    parts=_PARTS,
    diagnose=_first_difference,
    extra=_same_parameters,
)
