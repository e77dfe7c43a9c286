"""Checkers for the coding exercises of chapter 27 (fine-tuning and LoRA).

The adapter closest to a fully fine-tuned matrix is checked against the package's
``closest_low_rank_weight``; the gradient of ``A`` against autograd through the package's ``LoRALinear``.
Answers that call those (or autograd, or torch's randomised low-rank factorisations) are refused. The debugged
adapter's three stages (as built, with its factors set, merged) are checked against ``LoRALinear``'s, and a
verdict that fails names the first stage, the symptom, that still differs; the package and ``peft`` are refused.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

import torch

from attnbook.exercises._harness import (
    Case,
    Checker,
    Mistake,
    Outcome,
    Problem,
    _guarded_compare,
    _resolve,
    _values,
    _Watch,
)
from attnbook.exercises._part5 import _PolicyWatch
from attnbook.torch.linear import Linear
from attnbook.torch.lora import LoRALinear, closest_low_rank_weight

# --- the adapter closest to full fine-tuning -----------------------------------------------------------------------


def _closest_mistake(variant: str):
    def closest(before, after, rank):
        target = after if variant == "truncate_after" else after - before
        U, S, Vh = torch.linalg.svd(target, full_matrices=False)
        keep = slice(len(S) - rank, len(S)) if variant == "smallest" else slice(0, rank)
        scale = torch.ones_like(S[keep]) if variant == "no_values" else S[keep]
        low = (U[:, keep] * scale) @ Vh[keep]
        return low if variant in ("truncate_after", "change_only") else before + low

    closest.__name__ = f"closest_{variant}"
    return closest


def _closest_cases() -> list[Case]:
    g = torch.Generator().manual_seed(2728)

    def r(*shape):
        return torch.randn(*shape, generator=g, dtype=torch.float64)

    cases = []
    for d_in, d_out, rank in ((6, 4, 2), (5, 8, 3), (10, 10, 1), (12, 7, 4)):
        before = r(d_in, d_out)
        cases.append(Case(f"a {d_in} by {d_out} matrix and a change of full rank, rank {rank}",
                          (before, before + 0.3 * r(d_in, d_out), rank)))
    before = r(8, 6)
    cases.append(Case("a change of rank 2 exactly, rank 2: the answer is the fine-tuned matrix itself",
                      (before, before + r(8, 2) @ r(2, 6), 2)))
    before = r(4, 9)
    cases.append(Case("rank 4 = min(d_in, d_out): nothing is cut", (before, before + r(4, 9), 4)))
    return cases


def _closest_by_svd(before: torch.Tensor, after: torch.Tensor, rank: int) -> torch.Tensor:
    # The package's answer, wrapped so that the learner's call of it can be refused.
    return closest_low_rank_weight(before, after, rank)


check_lora_closest_weight = Checker(
    name="lora_closest_weight",
    doc="Check ``fn(before, after, rank) -> W`` ``(d_in, d_out)``: the merged weight ``before + (alpha / r) A B`` "
        "of the rank-``rank`` adapter that comes closest, in the Frobenius norm, to the fully fine-tuned matrix "
        "``after``. The package's ``closest_low_rank_weight`` and torch's randomised ``svd_lowrank`` and "
        "``pca_lowrank`` are refused.",
    reference=_closest_by_svd,
    cases=_closest_cases(),
    mistakes=(
        Mistake(_closest_mistake("truncate_after"), "the adapter adds a change to the frozen weight, which it "
                "keeps whole: cut the change after - before to rank r, not the fine-tuned matrix."),
        Mistake(_closest_mistake("change_only"), "that is the adapter's change alone: the merged weight is the "
                "frozen weight plus that change."),
        Mistake(_closest_mistake("smallest"), "keep the directions with the largest singular values: they hold "
                "the most of the change (torch.linalg.svd returns them in descending order)."),
        Mistake(_closest_mistake("no_values"), "each kept direction u_i v_i^T is weighted by its singular value "
                "sigma_i."),
    ),
    atol=1e-9,
    forbidden=(closest_low_rank_weight, "torch.svd_lowrank", "torch.pca_lowrank"),
)


# --- the gradient of A ---------------------------------------------------------------------------------------------

_AUTOGRAD = ("torch.autograd.backward", "torch.autograd.grad", "torch.autograd.functional.vjp",
             "torch.autograd.functional.jacobian", "torch.func.grad", "torch.func.vjp", "torch.func.jacrev")


def _grad_a_by_autograd(x: torch.Tensor, A: torch.Tensor, B: torch.Tensor, scaling: float,
                        dy: torch.Tensor) -> torch.Tensor:
    # The package's layer around a random weight (it does not reach dA), alpha chosen to give this scaling.
    rank = A.shape[1]
    with torch.random.fork_rng(devices=[]):  # leaves the caller's random numbers as they were
        layer = LoRALinear(Linear(A.shape[0], B.shape[1]).to(x.dtype), rank, alpha=scaling * rank)
    with torch.no_grad():
        layer.A.copy_(A)
        layer.B.copy_(B)
    (grad,) = torch.autograd.grad((layer(x) * dy).sum(), layer.A)
    return grad


def _grad_a_mistake(variant: str):
    def grad(x, A, B, scaling, dy):
        X, G = x.reshape(-1, x.shape[-1]), dy.reshape(-1, dy.shape[-1])  # (N, d_in), (N, d_out)
        if variant == "last_row":
            X, G = X[-1:], G[-1:]
        s = {"no_scaling": 1.0, "scaling_twice": scaling * scaling}.get(variant, scaling)
        out = s * X.T @ (G @ B.T)
        return out / len(X) if variant == "mean" else out

    grad.__name__ = f"grad_a_{variant}"
    return grad


def _grad_cases() -> list[Case]:
    g = torch.Generator().manual_seed(2727)

    def r(*shape):
        return torch.randn(*shape, generator=g, dtype=torch.float64)

    cases = []
    for x_shape, d_out, rank, scaling, what in (
            ((5, 6), 4, 2, 1.0, "5 rows, scaling 1"),
            ((2, 7, 8), 3, 4, 2.0, "a batch of 2 sequences of 7, scaling 2"),
            ((3, 4, 5, 6), 6, 1, 0.5, "batch dimensions (3, 4), rank 1"),
            ((1, 10), 12, 3, 16 / 3, "one row, alpha 16 over rank 3")):
        d_in = x_shape[-1]
        x, A, B, dy = r(*x_shape), r(d_in, rank), r(rank, d_out), r(*x_shape[:-1], d_out)
        cases.append(Case(f"x of shape {x_shape}, d_out {d_out}, rank {rank}, {what}", (x, A, B, scaling, dy)))
    x, A, dy = r(4, 6), r(6, 2), r(4, 5)
    cases.append(Case("B = 0, as at the first step", (x, A, torch.zeros(2, 5, dtype=torch.float64), 1.0, dy)))
    return cases


check_lora_grad_a = Checker(
    name="lora_grad_a",
    doc="Check ``fn(x, A, B, scaling, dy) -> dA`` ``(d_in, r)``: the gradient with respect to ``A`` of "
        "``sum(dy * y)`` for the adapted layer ``y = x W + b + scaling * x A B``, with ``x`` ``(..., d_in)``, "
        "``A`` ``(d_in, r)``, ``B`` ``(r, d_out)`` and ``dy`` ``(..., d_out)``, by hand (autograd is refused).",
    reference=_grad_a_by_autograd,
    cases=_grad_cases(),
    mistakes=(
        Mistake(_grad_a_mistake("no_scaling"), "the adapter's output is multiplied by scaling = alpha / r, and so "
                "is everything that flows back through it."),
        Mistake(_grad_a_mistake("scaling_twice"), "scaling multiplies the output once: it enters the gradient "
                "once, not squared."),
        Mistake(_grad_a_mistake("mean"), "the loss here is a sum over the rows, not a mean: add up the rows' "
                "contributions without dividing by their number."),
        Mistake(_grad_a_mistake("last_row"), "A is shared by every row of x: its gradient adds the contribution "
                "of every row (flatten the batch dimensions into one)."),
    ),
    atol=1e-9,
    forbidden=_AUTOGRAD,
)
# --- debugging an adapter: its three stages ------------------------------------------------------------------------

# What each stage should show, as the chapter measures it: the symptom named when that stage differs.
_SYMPTOMS = (
    "as built, before any training, the adapted layer's output differs from the frozen layer's x W + b; a new "
    "adapter must leave the layer it wraps unchanged",
    "with A and B set, its output differs from x W + b + (alpha / r) x A B; look at the cases where alpha != r",
    "after merge(), its output differs from its output before merging; merging moves the change into W, and the "
    "output must stay what it was",
)


def _stages_of_the_package(x: torch.Tensor, W: torch.Tensor, b: torch.Tensor, rank: int, alpha: float,
                           A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
    # The package's LoRALinear around a Linear holding W and b: as built, with A and B set, merged.
    with torch.random.fork_rng(devices=[]):  # leaves the caller's random numbers as they were
        base = Linear(W.shape[0], W.shape[1]).to(W.dtype)
        layer = LoRALinear(base, rank, alpha)
    with torch.no_grad():
        base.W.copy_(W)
        base.b.copy_(b)
        start = layer(x)
        layer.A.copy_(A)
        layer.B.copy_(B)
        trained = layer(x)
        layer.merge()
        return torch.stack([start, trained, layer(x)])


def _stages_mistake(variant: str):
    def stages(x, W, b, rank, alpha, A, B):
        scaling = rank / alpha if variant == "inverted" else alpha / rank
        start = x @ W + b  # B = 0: the frozen layer's output
        trained = x @ W + b + scaling * (x @ A) @ B
        merged_scaling = 1.0 if variant == "merge_unscaled" else scaling
        merged = x @ (W + merged_scaling * A @ B) + b
        if variant == "counted_twice":  # forward still adds the adapter after merge()
            merged = merged + scaling * (x @ A) @ B
        return torch.stack([start, trained, merged])

    stages.__name__ = f"stages_{variant}"
    return stages


def _stages_cases() -> list[Case]:
    g = torch.Generator().manual_seed(2729)

    def r(*shape):
        return torch.randn(*shape, generator=g, dtype=torch.float64)

    cases = []
    for x_shape, d_out, rank, alpha in (((5, 6), 4, 2, 4.0), ((2, 3, 8), 8, 4, 4.0), ((3, 5), 7, 1, 16.0),
                                        ((2, 4, 12), 10, 3, 1.5)):
        d_in = x_shape[-1]
        label = f"x of shape {x_shape}, d_out {d_out}, rank {rank}, alpha {alpha:g}"
        cases.append(Case(label, (r(*x_shape), r(d_in, d_out), r(d_out), rank, alpha, r(d_in, rank), r(rank, d_out))))
    return cases


class _StagesChecker(Checker):
    """A ``Checker`` whose answer returns three stages stacked on a first axis: a wrong value names the first
    stage that differs with its symptom, and calls into Hugging Face ``peft`` are refused too."""

    def watch(self, forbidden: Sequence[Callable[..., Any]], fn: Callable[..., Any], args: tuple[Any, ...]
              ) -> _Watch:
        plain = super().watch(forbidden, fn, args)  # the harness's watch: its allowances and trust
        return _PolicyWatch(forbidden, self.reference, _resolve(self.allowed), args, trusted=plain.trusted)

    def _check_case(self, fn: Callable[..., Any], case: Case, forbidden: Sequence[Callable[..., Any]] = (),
                    hints: bool = True) -> Problem | None:
        problem = super()._check_case(fn, case, forbidden, hints)
        if problem is None or problem.outcome is not Outcome.WRONG_VALUE:
            return problem
        got, again = self._run(fn, copy.deepcopy(case.args), case.label, forbidden)
        if again is not None:
            return problem
        expected = self.reference(*copy.deepcopy(case.args))
        try:
            values = _values(got)
        except Exception:
            return problem
        for k, symptom in enumerate(_SYMPTOMS):
            if _guarded_compare(expected[k], values[k], self.atol, self.rtol) is not None:
                return Problem(problem.outcome, f"stage {k + 1} of 3: {symptom}. {problem.text}")
        return problem


check_lora_stages = _StagesChecker(
    name="lora_stages",
    doc="Check ``fn(x, W, b, rank, alpha, A, B) -> (3, ..., d_out)``: the outputs on ``x`` ``(..., d_in)`` of a "
        "LoRA layer around the frozen weight ``W`` ``(d_in, d_out)`` and bias ``b`` ``(d_out,)``, stacked: as "
        "built (before any training), with its factors set to ``A`` ``(d_in, r)`` and ``B`` ``(r, d_out)``, and "
        "after merging them into its weight. The package's ``LoRALinear`` and ``add_lora`` and Hugging Face "
        "``peft`` are refused.",
    reference=_stages_of_the_package,
    cases=_stages_cases(),
    mistakes=(
        Mistake(_stages_mistake("inverted"), "the scale is alpha / r, not r / alpha: the two agree only where "
                "alpha = r."),
        Mistake(_stages_mistake("counted_twice"), "after merge() the change is inside W: forward must then stop "
                "adding the adapter's term, or it counts the change twice."),
        Mistake(_stages_mistake("merge_unscaled"), "merge() adds the change the forward pass adds, (alpha / r) A "
                "B, scaling included."),
    ),
    atol=1e-9,
    forbidden=(LoRALinear.forward, LoRALinear.merge),
)


from attnbook.exercises._part5 import check_vit_with_lora, trace_names  # noqa: E402,F401  (Part V capstone)
