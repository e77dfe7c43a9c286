"""Chapter 24's checker judges BERT's corruption by its statistics: correct answers with draws of their own
pass, the typical mistakes are named, and a call of the package's ``mask_tokens`` is refused."""

import numpy as np
import torch

from attnbook.exercises import check_mask_tokens_by_hand
from attnbook.exercises.ch24 import SDS, _mask_cases
from attnbook.training.mlm import mask_tokens


def with_numpy(ids, mask_id, vocab_size, seed, rate, mask_prob, random_prob):
    """Another generator and another way to draw: NumPy, and the random id by rejecting the mask."""
    rng = np.random.default_rng(seed)
    x = ids.numpy()
    chosen = rng.random(x.shape) < rate
    u = rng.random(x.shape)
    other = rng.integers(0, vocab_size, x.shape)
    while (bad := other == mask_id).any():
        other[bad] = rng.integers(0, vocab_size, int(bad.sum()))
    out = np.where(chosen & (u < mask_prob), mask_id, x)
    out = np.where(chosen & (u >= mask_prob) & (u < mask_prob + random_prob), other, out)
    return torch.from_numpy(out), torch.from_numpy(chosen)


def exactly_rate(ids, mask_id, vocab_size, seed, rate, mask_prob, random_prob):
    """BERT's own script chooses exactly round(rate * n) positions; the statement asks for each position to be
    chosen independently, and the number chosen over many seeds tells the two apart."""
    g = torch.Generator().manual_seed(seed)
    n = ids.numel()
    chosen = torch.zeros(n, dtype=torch.bool)
    chosen[torch.randperm(n, generator=g)[: round(rate * n)]] = True
    chosen = chosen.view(ids.shape)
    u = torch.rand(ids.shape, generator=g)
    other = torch.randint(vocab_size - 1, ids.shape, generator=g)
    other += (other >= mask_id).long()
    out = torch.where(chosen & (u < mask_prob), mask_id, ids)
    return torch.where(chosen & (u >= mask_prob) & (u < mask_prob + random_prob), other, out), chosen


def test_correct_answers_with_other_draws_pass():
    assert check_mask_tokens_by_hand(with_numpy)
    verdict = check_mask_tokens_by_hand(exactly_rate)  # right in every share, but not independent
    assert not verdict and "the number of chosen positions was always" in verdict.message, verdict.message
    for shift in range(5):  # other seeds: a correct answer must not fail by bad luck
        def shifted(ids, mask_id, vocab_size, seed, *probs, shift=shift):
            return with_numpy(ids, mask_id, vocab_size, seed + 100 * (shift + 1), *probs)

        assert check_mask_tokens_by_hand(shifted)


def test_the_checker_tests_shares_to_a_few_standard_deviations_on_long_sequences():
    assert 3 <= SDS <= 6
    assert max(case.args[0].numel() for case in _mask_cases()) >= 30_000
    assert any(case.args[5] == 0 and case.args[6] == 1 for case in _mask_cases())  # the random draw alone


def test_calling_mask_tokens_is_refused_by_name():
    def delegates(ids, mask_id, vocab_size, seed, rate, mask_prob, random_prob):
        return mask_tokens(ids, mask_id, vocab_size, rate, mask_prob, random_prob,
                           torch.Generator().manual_seed(seed))

    verdict = check_mask_tokens_by_hand(delegates)
    assert not verdict and "mask_tokens" in verdict.message


def test_corrupting_every_position_is_named():
    def everywhere(ids, mask_id, vocab_size, seed, rate, mask_prob, random_prob):
        inputs, _ = with_numpy(ids, mask_id, vocab_size, seed, 1.0, mask_prob, random_prob)
        return inputs, torch.ones_like(ids, dtype=torch.bool)

    verdict = check_mask_tokens_by_hand(everywhere)
    assert not verdict and "80/10/10 split applies to the chosen positions only" in verdict.message


def test_random_ids_that_can_be_the_mask_are_named():
    def any_id(ids, mask_id, vocab_size, seed, rate, mask_prob, random_prob):
        rng = np.random.default_rng(seed)
        x = ids.numpy()
        chosen = rng.random(x.shape) < rate
        u = rng.random(x.shape)
        other = rng.integers(0, vocab_size, x.shape)  # the mask id included
        out = np.where(chosen & (u < mask_prob), mask_id, x)
        out = np.where(chosen & (u >= mask_prob) & (u < mask_prob + random_prob), other, out)
        return torch.from_numpy(out), torch.from_numpy(chosen)

    verdict = check_mask_tokens_by_hand(any_id)
    assert not verdict and "never show the mask id" in verdict.message


def test_targets_on_every_position_are_named():
    def loss_everywhere(*args):
        inputs, _ = with_numpy(*args)
        return inputs, torch.ones_like(inputs, dtype=torch.bool)

    verdict = check_mask_tokens_by_hand(loss_everywhere)
    assert not verdict and "not every position" in verdict.message


def test_targets_only_where_the_input_changed_are_named():
    def changed_only(ids, *args):
        inputs, _ = with_numpy(ids, *args)
        return inputs, inputs != ids

    verdict = check_mask_tokens_by_hand(changed_only)
    assert not verdict and "kept their id" in verdict.message


def with_torch(ids, mask_id, vocab_size, seed, rate, mask_prob, random_prob, two_coins=False, skip_mask=True):
    """A torch answer, with one of two plausible slips switched on."""
    g = torch.Generator().manual_seed(seed)
    chosen = torch.rand(ids.shape, generator=g) < rate
    u = torch.rand(ids.shape, generator=g)
    to_mask = chosen & (u < mask_prob)
    to_random = chosen & (u >= mask_prob) & (u < mask_prob + random_prob)
    if two_coins:  # a coin for "random" of its own, overwriting the mask
        to_random = chosen & (torch.rand(ids.shape, generator=g) < random_prob)
    other = torch.randint(vocab_size - 1, ids.shape, generator=g)
    if skip_mask:
        other += (other >= mask_id).long()
    return torch.where(to_random, other, ids.masked_fill(to_mask, mask_id)), chosen


def test_independent_coins_for_mask_and_random_are_refused():
    assert check_mask_tokens_by_hand(with_torch)
    verdict = check_mask_tokens_by_hand(lambda *a: with_torch(*a, two_coins=True))
    assert not verdict and "standard deviations" in verdict.message


def test_random_ids_drawn_below_vocab_size_minus_one_are_refused():
    # The random id drawn from 0 .. vocab_size - 2 without stepping over the mask: the mask id can come up,
    # and the last id never does.
    assert not check_mask_tokens_by_hand(lambda *a: with_torch(*a, skip_mask=False))


def test_positions_not_chosen_must_keep_their_ids():
    def shuffles_the_rest(ids, *args):
        inputs, chosen = with_numpy(ids, *args)
        inputs = inputs.clone()
        inputs[~chosen] = inputs[~chosen].roll(1)
        return inputs, chosen

    verdict = check_mask_tokens_by_hand(shuffles_the_rest)
    assert not verdict and "not chosen have changed" in verdict.message


def test_the_pair_may_come_as_lists_or_one_stacked_array():
    assert check_mask_tokens_by_hand(lambda *a: tuple(t.tolist() for t in with_numpy(*a)))
    assert check_mask_tokens_by_hand(lambda *a: torch.stack([t.long() for t in with_numpy(*a)]))
    verdict = check_mask_tokens_by_hand(lambda *a: with_numpy(*a)[0])
    assert not verdict
