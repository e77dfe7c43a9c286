"""Checkers for the coding exercises of chapter 27 (fine-tuning and LoRA).

The count of an adapter's trainable parameters is checked against a GPT actually wrapped by ``add_lora``;
the gradient of ``A`` against autograd through the package's ``LoRALinear``. Answers that call those (or
autograd) are refused.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from attnbook.exercises._harness import Case, Checker, Mistake
from attnbook.torch.linear import Linear
from attnbook.torch.lora import GPT_LINEAR_NAMES, LoRALinear, add_lora, count_trainable
from attnbook.torch.transformer import GPT, GPTConfig

# --- how many numbers an adapter trains ---------------------------------------------------------------------------


def _count_by_wrapping(n_layers: int, d_model: int, d_ff: int, rank: int, targets: Sequence[str]) -> int:
    # The package's answer: build the GPT, wrap the named layers, count what requires a gradient.
    with torch.random.fork_rng(devices=[]):  # leaves the caller's random numbers as they were
        model = GPT(GPTConfig(vocab_size=3, block_size=2, n_layers=n_layers, n_heads=1, d_model=d_model, d_ff=d_ff))
        add_lora(model, rank, targets=tuple(targets))
    return count_trainable(model)


def _sizes(d_model: int, d_ff: int, square_ff: bool = False) -> dict[str, tuple[int, int]]:
    ff = (d_model, d_model) if square_ff else (d_model, d_ff)
    return {"q_proj": (d_model, d_model), "k_proj": (d_model, d_model), "v_proj": (d_model, d_model),
            "out_proj": (d_model, d_model), "fc1": ff, "fc2": ff[::-1]}


def _count_mistake(variant: str):
    def count(n_layers, d_model, d_ff, rank, targets):
        sizes = _sizes(d_model, d_ff, square_ff=variant == "square_ff")
        per_layer = 0
        for name in targets:
            d_in, d_out = sizes[name]
            per_layer += {"a_only": rank * d_in, "full": d_in * d_out}.get(variant, rank * (d_in + d_out))
        return per_layer * (1 if variant == "one_layer" else n_layers)

    count.__name__ = f"count_{variant}"
    return count


def _count_cases() -> list[Case]:
    cases = []
    for n_layers, d_model, d_ff, rank, targets in (
            (4, 128, 512, 1, ("q_proj", "v_proj")),
            (4, 128, 512, 16, GPT_LINEAR_NAMES),
            (2, 64, 256, 4, ("fc1",)),
            (1, 48, 100, 3, ("out_proj", "fc2")),
            (3, 32, 96, 8, ("k_proj", "fc1", "fc2")),
            (6, 384, 1536, 8, ("q_proj", "k_proj", "v_proj", "out_proj"))):
        cases.append(Case(f"{n_layers} layers, d_model {d_model}, d_ff {d_ff}, rank {rank}, targets {targets}",
                          (n_layers, d_model, d_ff, rank, targets)))
    return cases


check_lora_trainable_count = Checker(
    name="lora_trainable_count",
    doc="Check ``fn(n_layers, d_model, d_ff, rank, targets) -> int``: the number of parameters that train when "
        "``add_lora(model, rank, targets=targets)`` wraps the Linear layers named in ``targets`` (any of "
        "``q_proj``, ``k_proj``, ``v_proj``, ``out_proj``, ``fc1``, ``fc2``) of a GPT with ``n_layers`` blocks of "
        "width ``d_model`` and feed-forward width ``d_ff``, counted without building the model.",
    reference=_count_by_wrapping,
    cases=_count_cases(),
    mistakes=(
        Mistake(_count_mistake("full"), "that is the size of the frozen matrices the adapters sit beside: an "
                "adapter trains A (d_in by r) and B (r by d_out), not W."),
        Mistake(_count_mistake("a_only"), "B trains too: r numbers for each of the layer's d_out outputs."),
        Mistake(_count_mistake("one_layer"), "every block has its own q_proj, v_proj, ...: one adapter per block."),
        Mistake(_count_mistake("square_ff"), "fc1 maps d_model to d_ff and fc2 maps d_ff back to d_model: their "
                "adapters are r (d_model + d_ff) each, not r (d_model + d_model)."),
    ),
    forbidden=(add_lora, count_trainable, LoRALinear.__init__),
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
