"""Checkers for the coding exercises of chapter 24 (masked language modelling)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from attnbook.exercises._harness import Case, Checker, Mistake
from attnbook.training.mlm import masked_lm_loss


def _masked_loss(logits, targets, chosen):
    return float(masked_lm_loss(logits, targets, chosen))


def _every_position(logits, targets, chosen):
    return float(F.cross_entropy(logits.flatten(0, -2), targets.flatten()))


def _summed(logits, targets, chosen):
    return float(F.cross_entropy(logits[chosen], targets[chosen], reduction="sum"))


def _over_all_positions(logits, targets, chosen):
    per_position = F.cross_entropy(logits.flatten(0, -2), targets.flatten(), reduction="none")
    return float((per_position * chosen.flatten()).sum() / chosen.numel())


def _the_others(logits, targets, chosen):
    return float(F.cross_entropy(logits[~chosen], targets[~chosen]))


def _loss_cases() -> list[Case]:
    cases = [Case("logits [[[2, 0], [0, 2], [1, 1]]], targets [[0, 0, 1]], chosen [[False, True, True]]",
                  (torch.tensor([[[2.0, 0.0], [0.0, 2.0], [1.0, 1.0]]]), torch.tensor([[0, 0, 1]]),
                   torch.tensor([[False, True, True]])))]
    g = torch.Generator().manual_seed(2024)
    for B, T, V in ((2, 6, 5), (3, 16, 9)):
        chosen = torch.rand(B, T, generator=g) < 0.3
        chosen[0, 1] = True  # at least one chosen
        cases.append(Case(f"random logits ({B}, {T}, {V}), about 30% of positions chosen",
                          (torch.randn(B, T, V, generator=g), torch.randint(V, (B, T), generator=g), chosen)))
    return cases


check_masked_loss = Checker(
    name="masked_loss",
    doc="Check ``fn(logits, targets, chosen) -> float``: the mean cross-entropy over the chosen positions only.",
    reference=_masked_loss,
    cases=_loss_cases(),
    mistakes=(
        Mistake(_every_position, "that is the loss over every position: keep only the chosen ones, logits[chosen] "
                "and targets[chosen]."),
        Mistake(_summed, "that is the sum over the chosen positions: the loss is their mean."),
        Mistake(_over_all_positions, "that divides by every position: divide by the number of chosen positions."),
        Mistake(_the_others, "that takes the positions that were not chosen: chosen is True where the loss is taken."),
    ),
    atol=1e-6,
)

