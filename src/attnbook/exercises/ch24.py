"""Checkers for the coding exercises of chapter 24 (masked language modelling).

BERT's corruption is random, so its checker cannot compare the learner's answer with the package's value by
value. It runs the learner's function on long sequences and tests what must hold for any correct draw:
positions that are not chosen keep their ids; the share of chosen positions, and among the chosen ones the
shares masked, changed to another id and left as they were, each lie within ``SDS`` binomial standard
deviations of what ``mask_tokens`` promises; a random replacement is never the mask id and is uniform over
the others. An answer that reproduces the package's own draws passes at once.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from attnbook.exercises._harness import (
    COMPARED,
    Case,
    Checker,
    Mistake,
    Outcome,
    Problem,
    _recorded,
    _Rejected,
    _values,
)
from attnbook.training.mlm import mask_tokens

SPREAD_SEEDS, SPREAD_IDS = 30, 200  # the draws on which the number of chosen positions must vary
# Below this share of the binomial variance the spread fails: (n - 1) s^2 / sigma^2 follows a chi-squared law with
# 29 degrees of freedom, below 0.2 x 29 = 5.8 about twice in a million.
SPREAD_LEAST = 0.2
SDS = 5.0  # a share passes within this many standard deviations: about one false alarm in 1.7 million per test
# What the harness reports after a comparison: only then is the answer judged by its statistics.
_JUDGED = COMPARED | {Outcome.WRONG_FORM}


def _mask_tokens(ids, mask_id, vocab_size, seed, rate, mask_prob, random_prob):
    return mask_tokens(ids, mask_id, vocab_size, rate, mask_prob, random_prob, torch.Generator().manual_seed(seed))


def _pair(answer: Any, shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray] | str:
    """The answer as (inputs, chosen) arrays of ``shape``, or a sentence saying why it is not one."""
    if isinstance(answer, (tuple, list)) and len(answer) == 2:
        parts = answer
    elif getattr(answer, "shape", None) is not None and tuple(answer.shape) == (2, *shape):
        parts = (answer[0], answer[1])  # the pair stacked into one array
    else:
        return None  # let the harness's own description stand
    try:
        inputs, chosen = _values(parts[0]), _values(parts[1])
    except _Rejected as rejected:
        return str(rejected)
    if inputs.shape != shape or chosen.shape != shape:
        return (f"returned inputs of shape {inputs.shape} and chosen of shape {chosen.shape}; both must have the "
                f"shape of ids, {shape}")
    if inputs.dtype.kind == "f" and not np.all(np.isfinite(inputs)):
        return "returned NaN or infinity among the inputs; they must be token ids"
    if not (np.all(inputs == np.round(inputs)) and inputs.min(initial=0) >= 0):
        return "returned inputs that are not whole numbers of 0 or more; they must be token ids"
    if not np.all((chosen == 0) | (chosen == 1)):
        return "returned a chosen that is not boolean (True/False, or 1/0)"
    return inputs.astype(np.int64), chosen.astype(bool)


def _share_test(name: str, count: int, total: int, p: float, what: str) -> tuple[str, str, str] | None:
    """``(name, sign, sentence)`` when ``count / total`` is more than ``SDS`` standard deviations from ``p``."""
    if total == 0:
        return None
    share = count / total
    sd = math.sqrt(p * (1 - p) / total)
    if abs(share - p) <= SDS * sd + 1e-12:
        return None
    sign = "all" if count == total else "none" if count == 0 else "+" if share > p else "-"
    return name, sign, (f"{what}: {count:,} of {total:,} ({share:.4f}), expected {p:.4f} \u00b1 {SDS * sd:.4f} "
                        f"({SDS:g} standard deviations)")


def _failures(args: tuple[Any, ...], answer: Any) -> list[tuple[str, str, str]] | str | None:
    """Every statistical test the answer fails, in order, as ``(test, sign, sentence)``; a sentence when
    the answer is not a pair of arrays; ``None`` when it cannot be read at all."""
    ids, mask_id, vocab_size, _, rate, mask_prob, random_prob = args
    x = ids.numpy()
    pair = _pair(answer, tuple(x.shape))
    if pair is None or isinstance(pair, str):
        return pair
    inputs, chosen = pair
    if inputs.max(initial=0) >= vocab_size:
        return f"returned inputs up to {int(inputs.max())}; token ids lie in [0, vocab_size - 1 = {vocab_size - 1}]"
    failed = []
    moved = int(((inputs != x) & ~chosen).sum())
    if moved:
        failed.append(("untouched", "+", f"{moved:,} positions that are not chosen have changed; they must keep "
                                         "their ids"))
    n, k = x.size, int(chosen.sum())
    shown, original = inputs[chosen], x[chosen]
    masked = int((shown == mask_id).sum())
    kept = int((shown == original).sum())
    other = k - masked - kept
    keep_prob = 1 - mask_prob - random_prob
    tests = (("chosen", k, n, rate, "chosen positions"),
             ("masked", masked, k, mask_prob, "chosen positions showing the mask id"),
             ("other", other, k, random_prob * (vocab_size - 2) / (vocab_size - 1),
              "chosen positions showing another id than their own, not the mask"),
             ("kept", kept, k, keep_prob + random_prob / (vocab_size - 1), "chosen positions showing their own id"))
    failed += [f for f in (_share_test(*t) for t in tests) if f is not None]
    if 0 < rate < 1 and 0 < k < n:
        # Neighbours chosen together no more and no less often than independent draws of the answer's own share
        # are (the share itself is tested above): a test of independence alone.
        flat, q = chosen.ravel(), k / n
        both = int((flat[1:] & flat[:-1]).sum())
        p2 = q * q
        sd = math.sqrt((n - 1) * p2 * (1 - p2) + 2 * (n - 2) * (q**3 - p2 * p2))  # the pairs overlap
        if abs(both - (n - 1) * p2) > SDS * sd:
            failed.append(("neighbours", "+" if both > (n - 1) * p2 else "-",
                           f"neighbouring positions both chosen: {both:,} of {n - 1:,} pairs (a share of "
                           f"{both / (n - 1):.4f}), expected "
                           f"{(n - 1) * p2:,.0f} \u00b1 {SDS * sd:,.0f} ({SDS:g} standard deviations) for positions "
                           "chosen independently: the choice of one position must not depend on its neighbour's"))
    if rate == 1 and mask_prob == 0 and random_prob == 1:  # every position replaced at random: uniform ids
        counts = np.bincount(inputs.ravel(), minlength=vocab_size)
        p = 1 / (vocab_size - 1)
        sd = math.sqrt(p * (1 - p) / n)
        far = [i for i in range(vocab_size) if i != mask_id and abs(counts[i] / n - p) > SDS * sd]
        if far:
            failed.append(("uniform", "", f"with every position replaced at random, id {far[0]} came up "
                                          f"{int(counts[far[0]]):,} times in {n:,}, expected about {n * p:,.0f}: "
                                          "a random id is uniform over the ids other than the mask"))
    return failed


def _key(failures: list[tuple[str, str, str]] | str | None) -> Any:
    return failures if not isinstance(failures, list) else frozenset((name, sign) for name, sign, _ in failures)


@dataclass(repr=False)
class StatisticalChecker(Checker):
    """A ``Checker`` for a random answer: ``judge(args, answer)`` lists the tests the answer fails, as
    ``(test, sign, sentence)``; an answer passes a case when it fails none (or equals the reference's own
    draw). A mistake's hint is shown when the learner's answer fails the same tests, in the same direction,
    as the mistake's answer on that case."""

    judge: Callable[[tuple[Any, ...], Any], Any] = _failures
    seed_arg: int | None = None  # the position of the seed among the arguments: the draw must follow it
    spread_case: int | None = None  # the case on whose first ids the number chosen must vary from seed to seed

    def _spread(self, fn: Callable[..., Any], case: Case, forbidden: Sequence[Callable[..., Any]]) -> Problem | None:
        """Over ``SPREAD_SEEDS`` seeds on the case's first ``SPREAD_IDS`` ids, the number of chosen positions must
        vary as a binomial count does: a fixed number (``randperm``'s first round(rate n)) does not vary at all."""
        ids, *rest = copy.deepcopy(case.args)
        i = self.seed_arg
        short = ids.reshape(-1)[:SPREAD_IDS].clone()
        rate = rest[3]
        counts = []
        for offset in range(SPREAD_SEEDS):
            args = [short, *copy.deepcopy(rest)]
            args[i] = case.args[i] + 100 + offset
            got, problem = self._run(fn, tuple(args), case.label, forbidden)
            if problem is not None:
                return problem
            pair = _pair(got, tuple(short.shape))
            if not isinstance(pair, tuple):
                return None  # the cases' own checks describe an answer that is not a pair
            counts.append(int(pair[1].sum()))
        variance, expected = float(np.var(counts, ddof=1)), len(short) * rate * (1 - rate)
        if variance >= SPREAD_LEAST * expected:
            return None
        shown = f"always {counts[0]}" if len(set(counts)) == 1 else f"between {min(counts)} and {max(counts)}"
        return Problem(Outcome.WRONG_VALUE,
                       f"over {SPREAD_SEEDS} seeds on the first {len(short)} ids of this case, the number of chosen "
                       f"positions was {shown} (variance {variance:.2f}, where positions chosen independently with "
                       f"probability {rate:g} give {expected:.0f}) (input: {case.label}). Choose each position on its "
                       "own draw, so that how many are chosen varies from draw to draw: a fixed number of positions "
                       "(randperm's first round(rate n)) is not what the statement asks.")

    def _seeded(self, fn: Callable[..., Any], case: Case, first: Any, forbidden: Sequence[Callable[..., Any]]
                ) -> Problem | None:
        """The answer must be a function of its seed: the same seed gives the same draw, another seed another."""
        i = self.seed_arg
        again, problem = self._run(fn, copy.deepcopy(case.args), case.label, forbidden)
        if problem is not None:
            return problem
        other_args = list(copy.deepcopy(case.args))
        other_args[i] = other_args[i] + 1
        other, problem = self._run(fn, tuple(other_args), case.label, forbidden)
        if problem is not None:
            return problem
        first_pair, again_pair, other_pair = (_pair(a, tuple(case.args[0].shape)) for a in (first, again, other))
        if any(not isinstance(x, tuple) for x in (first_pair, again_pair, other_pair)):
            return None  # the cases' own checks describe an answer that is not a pair
        if not all(np.array_equal(a, b) for a, b in zip(first_pair, again_pair, strict=True)):
            return Problem(Outcome.WRONG_VALUE,
                           f"two calls with the same seed gave different draws (input: {case.label}). Draw from a "
                           "torch.Generator seeded with `seed`, so that a run can be repeated exactly.")
        reference = [_pair(self.reference(*copy.deepcopy(a)), tuple(case.args[0].shape))
                     for a in (case.args, tuple(other_args))]
        draws_differ = all(isinstance(r, tuple) for r in reference) and not np.array_equal(reference[0][1],
                                                                                            reference[1][1])
        if draws_differ and np.array_equal(first_pair[1], other_pair[1]):
            return Problem(Outcome.WRONG_VALUE,
                           f"seeds {case.args[i]} and {case.args[i] + 1} chose the same positions (input: "
                           f"{case.label}): the choice must be drawn at random from the seed, not fixed.")
        return None

    def _check_case(self, fn: Callable[..., Any], case: Case, forbidden: Sequence[Callable[..., Any]] = (),
                    hints: bool = True) -> Problem | None:
        recorded, returned = _recorded(fn)
        problem = Checker._check_case(self, recorded, case, forbidden, hints=False)  # as every checker runs it
        if problem is None or "answer" not in returned or problem.outcome not in _JUDGED:
            return problem
        failures = self.judge(case.args, returned["answer"])
        if failures is None:
            return problem  # not even a pair of arrays: the harness's description says what came back
        if isinstance(failures, str):
            return Problem(Outcome.WRONG_FORM, f"{failures} (input: {case.label}).")
        if not failures:
            problem = None if self.seed_arg is None else self._seeded(fn, case, returned["answer"], forbidden)
            if problem is None and self.spread_case is not None and case is self.cases[self.spread_case]:
                problem = self._spread(fn, case, forbidden)
            return problem
        message = Problem(Outcome.WRONG_VALUE, f"{failures[0][2]} (input: {case.label}).")
        for mistake in self.mistakes:
            try:
                typical = self.judge(case.args, mistake.fn(*case.args))
            except Exception:
                continue
            if _key(typical) == _key(failures):
                return message.extended(f"Hint: {mistake.hint}")
        return message


# --- the typical wrong answers ----------------------------------------------------------------------

def _draws(ids, vocab_size, seed):
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(ids.shape, generator=g), torch.rand(ids.shape, generator=g),
            torch.randint(vocab_size - 1, ids.shape, generator=g), g)


def _corrupt(ids, pick, kind, random_ids, mask_id, mask_prob, random_prob):
    out = ids.clone()
    to_random = pick & (kind >= mask_prob) & (kind < mask_prob + random_prob)
    out[pick & (kind < mask_prob)] = mask_id
    out[to_random] = random_ids[to_random]
    return out


def _other_ids(random_ids, mask_id):
    return random_ids + (random_ids >= mask_id).long()


def _every_position_corrupted(ids, mask_id, vocab_size, seed, rate, mask_prob, random_prob):
    _, kind, random_ids, _ = _draws(ids, vocab_size, seed)
    every = torch.ones_like(ids, dtype=torch.bool)
    return _corrupt(ids, every, kind, _other_ids(random_ids, mask_id), mask_id, mask_prob, random_prob), every


def _targets_everywhere(ids, mask_id, vocab_size, seed, rate, mask_prob, random_prob):
    pick, kind, random_ids, _ = _draws(ids, vocab_size, seed)
    inputs = _corrupt(ids, pick < rate, kind, _other_ids(random_ids, mask_id), mask_id, mask_prob, random_prob)
    return inputs, torch.ones_like(ids, dtype=torch.bool)


def _targets_where_changed(ids, mask_id, vocab_size, seed, rate, mask_prob, random_prob):
    pick, kind, random_ids, _ = _draws(ids, vocab_size, seed)
    inputs = _corrupt(ids, pick < rate, kind, _other_ids(random_ids, mask_id), mask_id, mask_prob, random_prob)
    return inputs, inputs != ids


def _random_may_be_the_mask(ids, mask_id, vocab_size, seed, rate, mask_prob, random_prob):
    pick, kind, _, g = _draws(ids, vocab_size, seed)
    random_ids = torch.randint(vocab_size, ids.shape, generator=g)  # every id, the mask's included
    return _corrupt(ids, pick < rate, kind, random_ids, mask_id, mask_prob, random_prob), pick < rate


def _random_never_the_original(ids, mask_id, vocab_size, seed, rate, mask_prob, random_prob):
    pick, kind, _, g = _draws(ids, vocab_size, seed)
    step = torch.randint(1, vocab_size - 1, ids.shape, generator=g)  # among the V - 1 non-mask ids, skip ids
    slot = ids - (ids > mask_id).long()  # the original's place among the non-mask ids
    random_ids = _other_ids((slot + step) % (vocab_size - 1), mask_id)
    return _corrupt(ids, pick < rate, kind, random_ids, mask_id, mask_prob, random_prob), pick < rate


def _random_from_the_data(ids, mask_id, vocab_size, seed, rate, mask_prob, random_prob):
    pick, kind, _, g = _draws(ids, vocab_size, seed)
    flat = ids.reshape(-1)
    random_ids = flat[torch.randint(flat.numel(), ids.shape, generator=g)]  # an id of the sequence itself
    return _corrupt(ids, pick < rate, kind, random_ids, mask_id, mask_prob, random_prob), pick < rate


def _chosen_in_pairs(ids, mask_id, vocab_size, seed, rate, mask_prob, random_prob):
    pick, kind, random_ids, _ = _draws(ids, vocab_size, seed)
    flat = (pick < rate).reshape(-1).clone()
    flat[1::2] = flat[0::2][: flat[1::2].numel()]  # each odd position copies the choice of the one before it
    chosen = flat.reshape(ids.shape)
    return _corrupt(ids, chosen, kind, _other_ids(random_ids, mask_id), mask_id, mask_prob, random_prob), chosen


def _mask_cases() -> list[Case]:
    g = torch.Generator().manual_seed(2424)
    cases = []
    # (shape, vocab_size, mask_id, seed, rate, mask_prob, random_prob)
    for shape, V, mask_id, seed, rate, m, q, what in (
            ((64, 512), 66, 65, 0, 0.15, 0.8, 0.1, "BERT's recipe"),
            ((6000,), 10, 0, 1, 0.5, 0.5, 0.3, "rate 0.5, mask_prob 0.5, random_prob 0.3"),
            ((50, 200), 5, 2, 2, 1.0, 0.0, 1.0, "every position chosen and replaced at random"),
            ((3, 7), 66, 65, 3, 1.0, 1.0, 0.0, "every position chosen and masked"),
            ((1,), 3, 1, 4, 0.15, 0.8, 0.1, "a single id")):
        others = torch.tensor([i for i in range(V) if i != mask_id])
        ids = others[torch.randint(len(others), shape, generator=g)]
        if q == 1.0:  # ids far from uniform (80% of them the first id): a random id drawn from the
            common = torch.rand(shape, generator=g) < 0.8  # sequence's own ids is then far from uniform too
            ids = torch.where(common, others[0], ids)
        skew = ", 80% of them id 0" if q == 1.0 else ""
        cases.append(Case(f"ids of shape {shape} over {V - 1} ids{skew}, mask_id {mask_id}, vocab_size {V}, seed "
                          f"{seed}, {what}", (ids, mask_id, V, seed, rate, m, q)))
    return cases


check_mask_tokens_by_hand = StatisticalChecker(
    name="mask_tokens_by_hand",
    doc="Check ``fn(ids, mask_id, vocab_size, seed, rate, mask_prob, random_prob) -> (inputs, chosen)``: BERT's "
        "corruption of the integer tensor ``ids``, with ``inputs`` shaped like ``ids`` and ``chosen`` boolean. "
        "Each position is chosen with probability ``rate``; a chosen one becomes ``mask_id`` with probability "
        "``mask_prob``, an id drawn uniformly from the ``vocab_size - 1`` ids other than ``mask_id`` with "
        "probability ``random_prob``, and stays otherwise; positions not chosen keep their ids. Random, so "
        "checked by its statistics on long sequences: each share within 5 standard deviations.",
    reference=_mask_tokens,
    cases=_mask_cases(),
    mistakes=(
        Mistake(_every_position_corrupted, "choose about `rate` of the positions first: the 80/10/10 split applies "
                "to the chosen positions only, and every other position is left alone and carries no loss."),
        Mistake(_targets_everywhere, "`chosen` marks the positions the loss is taken on: the ones chosen for "
                "corruption (about `rate` of them), not every position."),
        Mistake(_targets_where_changed, "`chosen` must also mark the chosen positions that kept their id: the model "
                "is asked to predict those too, which is why a visible character cannot be trusted blindly."),
        Mistake(_random_may_be_the_mask, "draw the random id from the `vocab_size - 1` ids other than the mask: "
                "a random replacement must never show the mask id."),
        Mistake(_random_from_the_data, "draw the random id uniformly from the vocab_size - 1 ids other than the "
                "mask, not from the ids of the sequence: those follow the text's frequencies (here 80% of them are "
                "id 0), and a random replacement must not."),
        Mistake(_chosen_in_pairs, "choose each position with its own draw: positions chosen together with a "
                "neighbour keep the share right but are not independent, and a model learns to predict from "
                "which neighbours are hidden."),
        Mistake(_random_never_the_original, "draw the random id uniformly from every id but the mask's, the "
                "original included: it happens to be the original with probability 1 / (vocab_size - 1)."),
    ),
    forbidden=(mask_tokens,),
    seed_arg=3,
    spread_case=1,
)
