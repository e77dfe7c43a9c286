"""Chapter 16's checkers: answers computed another way pass, the package's own function is refused, and
plausible wrong answers beyond the listed mistakes fail."""

import copy
import heapq
import math

import pytest
import torch

from attnbook.data.tasks import BOS, EOS, PAD
from attnbook.exercises import check_beam_search, check_smoothed_masked_loss, check_warmup_cosine
from attnbook.exercises.ch16 import _beam_search
from attnbook.torch import greedy_decode
from attnbook.training import lr_at, sequence_loss


def loss_by_mixture(logits, tgt, eps):
    # the smoothed target as a distribution, then its cross-entropy, position by position
    V = logits.shape[-1]
    q = torch.full(logits.shape, eps / V).scatter_add(-1, tgt[..., None], torch.full(tgt[..., None].shape, 1 - eps))
    per_position = -(q * torch.log_softmax(logits, -1)).sum(-1)
    real = tgt != PAD
    return float(per_position[real].sum() / real.sum())


def test_smoothed_masked_loss_accepts_the_mixture_written_out():
    assert check_smoothed_masked_loss(loss_by_mixture)


def test_smoothed_masked_loss_refuses_the_package_loss():
    verdict = check_smoothed_masked_loss(lambda logits, tgt, eps: sequence_loss(logits, tgt, PAD, eps))
    assert not verdict and "sequence_loss" in verdict.message
    verdict = check_smoothed_masked_loss(
        lambda logits, tgt, eps: torch.nn.functional.cross_entropy(logits.flatten(0, 1), tgt.flatten(),
                                                                   ignore_index=PAD, label_smoothing=eps))
    assert not verdict and "cross_entropy" in verdict.message


def test_smoothed_masked_loss_refuses_smoothing_of_the_probabilities():
    def smoothed_probabilities(logits, tgt, eps):
        # mixes the model's probabilities with the uniform instead of the targets
        V = logits.shape[-1]
        p = (1 - eps) * torch.softmax(logits, -1) + eps / V
        real = tgt != PAD
        return float(-p.log().gather(-1, tgt[..., None])[..., 0][real].mean())

    assert not check_smoothed_masked_loss(smoothed_probabilities)


def schedule(step, peak, warmup, total):
    if step < warmup:
        return peak * (step + 1) / warmup
    return peak * math.sin(math.pi / 2 * (total - 1 - step) / (total - 1 - warmup)) ** 2  # cos² (x/2) = (1 + cos x) / 2


def test_warmup_cosine_accepts_the_half_angle_form_and_refuses_lr_at():
    assert check_warmup_cosine(schedule)
    verdict = check_warmup_cosine(lambda step, peak, warmup, total: lr_at(step, peak, warmup, total))
    assert not verdict and "lr_at" in verdict.message


def test_warmup_cosine_shows_the_denominator_mistake_on_a_short_run():
    def over_total_minus_warmup(step, peak, warmup, total):
        if step < warmup:
            return peak * (step + 1) / warmup
        return peak * 0.5 * (1 + math.cos(math.pi * (step - warmup) / (total - warmup)))

    verdict = check_warmup_cosine(over_total_minus_warmup)
    assert not verdict and "step=9, peak=1.0, warmup=2, total=10" in verdict.message and "total - 1" in verdict.message


def test_warmup_cosine_refuses_a_warmup_line_from_zero_to_the_peak():
    # read from the description as a line from 0 at step 0 to peak at step warmup - 1: step 0 would not train
    def from_zero_to_peak(step, peak, warmup, total):
        return peak * step / (warmup - 1) if step < warmup else schedule(step, peak, warmup, total)

    verdict = check_warmup_cosine(from_zero_to_peak)
    assert not verdict and "step=0," in verdict.message


def test_warmup_cosine_refuses_a_linear_decay():
    def linear(step, peak, warmup, total):
        return peak * (step + 1) / warmup if step < warmup else peak * (total - 1 - step) / (total - 1 - warmup)

    assert not check_warmup_cosine(linear)


# --- beam search --------------------------------------------------------------------------------------

def _best_first(h):
    return -h[0], h[1]


def _heap_search(model, src, beam_width, max_len, key=_best_first):
    # finished and live hypotheses in one pool, one prefix decoded at a time, the best few picked by a heap
    memory, src_mask = model.encode(src)
    pool = [(0.0, (), ())]
    for _ in range(max_len):
        if all(tokens and tokens[-1] == EOS for _, tokens, _ in pool):
            break
        candidates = []
        for score, tokens, steps in pool:
            if tokens and tokens[-1] == EOS:
                candidates.append((score, tokens, steps))
                continue
            with torch.no_grad():
                logits = model.decode(torch.tensor([[BOS, *tokens]]), memory, src_mask)[0, -1]
            for tok, lp in enumerate(torch.log_softmax(logits, -1).tolist()):
                candidates.append((score + lp, (*tokens, tok), (*steps, lp)))
        pool = heapq.nsmallest(beam_width, candidates, key=key)
    best = pool[0]
    return torch.tensor(best[1]), torch.tensor(best[2])


def beam_by_heap(model, src, beam_width, max_len):
    return _heap_search(model, src, beam_width, max_len)


def test_beam_search_accepts_a_search_written_another_way():
    verdict = check_beam_search(_beam_search)
    assert not verdict and "the checker's own reference" in verdict.message
    assert check_beam_search(beam_by_heap)


def test_beam_search_accepts_log_probabilities_in_float32():
    # a learner's model runs in float32: the cases have no near ties that its rounding could flip
    def in_float32(model, src, beam_width, max_len):
        tokens, steps = beam_by_heap(model, src, beam_width, max_len)
        return tokens.tolist(), steps.float().tolist()

    assert check_beam_search(in_float32)


def test_beam_search_of_width_one_is_greedy_decoding_and_a_wider_beam_finds_likelier_sequences():
    for case in check_beam_search.cases:
        model, src, _, max_len = copy.deepcopy(case.args)
        greedy = greedy_decode(model, src, BOS, EOS, max_len + 1)[0, 1:].tolist()
        greedy = greedy[:greedy.index(EOS) + 1] if EOS in greedy else greedy
        assert _beam_search(model, src, 1, max_len)[0] == greedy, case.label
    assert any(c.args[2] == 1 for c in check_beam_search.cases)
    better = [sum(_beam_search(*copy.deepcopy(c.args))[1])
              > sum(_beam_search(*copy.deepcopy(c.args[:2]), 1, c.args[3])[1]) + 1e-3
              for c in check_beam_search.cases if c.args[2] > 1]
    assert sum(better) >= 3


@pytest.mark.parametrize("mistake", check_beam_search.mistakes, ids=lambda m: m.fn.__name__)
def test_beam_search_names_each_mistake(mistake):
    verdict = check_beam_search(mistake.fn)
    assert not verdict and mistake.hint in verdict.message


def test_beam_search_refuses_greedy_decoding():
    def delegating(model, src, beam_width, max_len):
        if beam_width == 1:  # width 1 is greedy decoding, so hand it to the package
            out = greedy_decode(model, src, BOS, EOS, max_len + 1)[0, 1:].tolist()
            return out, [0.0] * len(out)
        return beam_by_heap(model, src, beam_width, max_len)

    verdict = check_beam_search(delegating)
    assert not verdict and "greedy_decode" in verdict.message


def test_beam_search_refuses_length_normalisation_and_ties_to_the_larger_sequence():
    def length_normalised(model, src, beam_width, max_len):  # the mean log-probability per token
        return _heap_search(model, src, beam_width, max_len, key=lambda h: (-h[0] / max(len(h[1]), 1), h[1]))

    def ties_to_the_larger(model, src, beam_width, max_len):
        return _heap_search(model, src, beam_width, max_len, key=lambda h: (-h[0], [-t for t in h[1]]))

    verdict = check_beam_search(length_normalised)
    assert not verdict and "but the best hypothesis is" in verdict.message
    verdict = check_beam_search(ties_to_the_larger)
    assert not verdict and "4 and 5 tie" in verdict.message and "[5, 2]" in verdict.message


def test_beam_search_asks_for_each_tokens_log_probability_rather_than_the_total():
    def total_only(model, src, beam_width, max_len):
        tokens, steps = beam_by_heap(model, src, beam_width, max_len)
        return tokens.tolist(), float(steps.sum())

    verdict = check_beam_search(total_only)
    assert not verdict and "the log-probability of each token" in verdict.message
