"""Chapter 18's checkers: answers computed another way pass, the package's own functions are refused, and
plausible wrong answers beyond the listed mistakes fail."""

import math

import torch

import attnbook.torch as at
from attnbook.exercises import check_normalised_entropy, check_offset_profile


def profile_by_loops(weights, max_back):
    h, T, _ = weights.shape
    out = torch.zeros(h, max_back + 1, dtype=weights.dtype)
    for k in range(max_back + 1):
        for t in range(k, T):
            out[:, k] += weights[:, t, t - k] / (T - k)
    return out


def test_offset_profile_accepts_loops_and_refuses_the_package_scores():
    assert check_offset_profile(profile_by_loops)
    verdict = check_offset_profile(
        lambda w, k: torch.stack([at.offset_score(w, -j) for j in range(k + 1)], dim=-1))
    assert not verdict and "offset_score" in verdict.message
    verdict = check_offset_profile(lambda w, k: torch.stack(
        [at.weight_on(w, (torch.arange(w.shape[-1]) - j).clamp_min(-1)) for j in range(k + 1)], dim=-1))
    assert not verdict and "weight_on" in verdict.message


def test_offset_profile_refuses_offsets_one_too_far():
    # k = 1 .. max_back + 1: the weight on the token itself forgotten
    assert not check_offset_profile(lambda w, k: profile_by_loops(w, k + 1)[:, 1:])


def normalised_by_loops(weights):
    h, T, _ = weights.shape
    total = torch.zeros(h, dtype=weights.dtype)
    for t in range(1, T):
        row = weights[:, t, : t + 1]
        entropy = -torch.where(row > 0, row * row.log(), torch.zeros_like(row)).sum(-1)
        total += entropy / math.log(t + 1)
    return total / (T - 1)


def test_normalised_entropy_accepts_loops_and_refuses_the_package_entropy():
    assert check_normalised_entropy(normalised_by_loops)
    verdict = check_normalised_entropy(lambda w: at.attention_entropy(w) / math.log(w.shape[-1]))
    assert not verdict and "attention_entropy" in verdict.message


def test_normalised_entropy_refuses_bits_over_nats():
    # the entropy in bits (log2) divided by a largest entropy in nats
    assert not check_normalised_entropy(lambda w: normalised_by_loops(w) / math.log(2))


def test_normalised_entropy_refuses_log_of_t_instead_of_t_plus_one():
    def off_by_one(weights):
        h, T, _ = weights.shape
        per_query = -(weights * weights.clamp_min(1e-300).log()).sum(-1)
        return (per_query[:, 2:] / torch.log(torch.arange(2, T, dtype=weights.dtype))).mean(-1)

    assert not check_normalised_entropy(off_by_one)
