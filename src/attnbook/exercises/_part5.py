"""The capstone of Part V (chapter 27): a Vision Transformer from the learner's own parts, adapted with the
learner's own LoRA.

The learner writes a ViT class built as ``MyViT(config)`` from a ``ViTConfig``, a function ``load_vit(model,
state_dict)`` that copies the package's ``ViT`` state dict into it, and a function ``add_lora_qv(model, rank,
alpha)`` that wraps the query and value projections of every block in the learner's own adapter (``A`` of shape
``(d_in, r)``, ``B`` of shape ``(r, d_out)``, scale ``alpha / r``, a ``merge()`` method) and returns the adapters.
``check_vit_with_lora(MyViT, load_vit, add_lora_qv)`` builds small random package ViTs (mean pooling and a class
token, one and two blocks, 8 x 8 and 16 x 16 images), and on each compares, in float32 to within ``1e-5``: the
logits; the logits once the adapters are added (``B = 0``: unchanged) and the number of trainable parameters; the
logits and the gradients that reach every ``A`` and ``B`` once both models' adapters hold the same random values;
and the logits after ``merge()``. A disagreement is traced to its part: to the first entry of the learner's
``trace`` (``patches``, ``tokens``, ``block0``, ..., ``final_norm``, ``logits``) that differs from the package's,
or to the adapter that wraps the wrong projection, scales by the wrong factor or merges the wrong change.

It is not a ``Checker`` (it takes three answers, not one function), but it returns the same ``Verdict``s and runs
each call of the learner's code under the same watch: calls into ``attnbook``, Hugging Face ``transformers`` and
``peft`` are refused, and so is a model whose module tree holds one of the package's modules, a ``peft`` or
``transformers`` layer, or ``torch.nn``'s attention and Transformer layers.
"""

from __future__ import annotations

import copy
import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from attnbook.exercises._harness import (
    TIME_LIMIT,
    Outcome,
    Problem,
    Verdict,
    _call_with_time_limit,
    _describe,
    _frame_name,
    _guarded_compare,
    _raised_by_learner,
    _resolve,
    _TimedOut,
    _Watch,
)
from attnbook.exercises._modules import ready_made_submodule
from attnbook.torch.lora import LoRALinear, add_lora, count_trainable, lora_layers
from attnbook.torch.vit import ViT, ViTConfig

NAME = "vit_with_lora"
ATOL = RTOL = 1e-5  # float32 logits: the fused kernels and a hand-written attention differ by rounding only
GRAD_ATOL, GRAD_RTOL = 1e-5, 1e-4  # gradients sum over more terms
TRACE_TOL = 1e-4  # a part that is right agrees to this; a wrong one differs by far more

# PyTorch's ready-made pieces that would do a part of the exercise (the package's are refused by the policy).
FORBIDDEN = ("torch.nn.functional.scaled_dot_product_attention", "torch.nn.functional.multi_head_attention_forward",
             "torch.nn.MultiheadAttention.forward", "torch.nn.TransformerEncoderLayer.forward",
             "torch.nn.TransformerEncoder.forward", "torch.nn.functional.unfold", "torch.nn.Unfold.forward",
             "torch.nn.functional.conv2d", "torch.nn.Conv2d.forward")
_REFUSED_MODULES = ("attnbook", "peft", "transformers")

PART_HINTS = {
    "patches": "cut each image into p x p patches numbered row by row (left to right, then top to bottom), "
               "flatten each one channel first, then its rows, then its columns, and map it by the patch "
               "embedding's x W + b (the package's patch.proj.W is (C p^2, d_model)).",
    "tokens": "the class token (pool='cls') goes in front of the patches first; then the table of positions, "
              "one row per token, is added to every token, the class token included (it gets row 0).",
    "block": "each block is pre-norm: x + attention(norm1(x)), then x + fc2(GELU(fc1(norm2(x)))) with the exact "
             "GELU; attention splits h W + b into n_heads heads of d_model / n_heads columns, takes "
             "softmax(q k^T / sqrt(d_head)) v without a mask, puts the heads side by side and applies out_proj.",
    "final_norm": "the last block's output goes through the final layer norm (norm.gamma, norm.beta, eps 1e-5) "
                  "before it is pooled.",
    "logits": "pool after the final norm: the class token's vector (position 0) for pool='cls', the mean of the "
              "patches' vectors for pool='mean'; then the head, x W + b.",
}


def trace_names(n_layers: int) -> list[str]:
    """The keys of a ViT's trace, in the order its forward pass computes them."""
    return ["patches", "tokens", *(f"block{i}" for i in range(n_layers)), "final_norm", "logits"]


@dataclass(frozen=True)
class _Case:
    config: ViTConfig
    seed: int
    batch: int
    rank: int
    alpha: float

    @property
    def label(self) -> str:
        c = self.config
        return (f"a ViT of {c.image_size} x {c.image_size} images with {c.in_channels} channel(s), patches of "
                f"{c.patch_size}, pool '{c.pool}', {c.n_layers} block(s), d_model {c.d_model}, {c.n_heads} heads; "
                f"adapters of rank {self.rank}, alpha {self.alpha:g}")


CASES = (
    _Case(ViTConfig(image_size=8, patch_size=2, in_channels=1, n_classes=5, d_model=16, n_heads=2, n_layers=1,
                    d_ff=32, pool="mean"), 2701, 3, 2, 6.0),
    _Case(ViTConfig(image_size=16, patch_size=4, in_channels=3, n_classes=7, d_model=24, n_heads=3, n_layers=2,
                    d_ff=40, pool="cls"), 2702, 2, 4, 2.0),
    _Case(ViTConfig(image_size=8, patch_size=4, in_channels=2, n_classes=3, d_model=8, n_heads=2, n_layers=1,
                    d_ff=16, pool="cls"), 2703, 4, 1, 3.0),
    _Case(ViTConfig(image_size=16, patch_size=2, in_channels=1, n_classes=4, d_model=16, n_heads=4, n_layers=2,
                    d_ff=24, pool="mean"), 2704, 2, 3, 12.0),
)
CHECKS_PER_CASE = 6  # logits; B = 0 logits; trainable count; adapted logits; adapter gradients; merged logits


def random_vit(config: ViTConfig, seed: int) -> ViT:
    """The package's ViT with random values everywhere (class token, positions, biases, norms), float32."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = ViT(config)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=g)
            if name.endswith("gamma"):
                p.copy_(1 + 0.1 * noise)
            elif name == "cls" or name.startswith("pos"):
                p.copy_(0.5 * noise)
            elif p.dim() == 1:  # biases and the norms' shifts
                p.copy_(0.1 * noise)
            else:  # a matrix: outputs of about the size of its inputs
                p.copy_(noise / math.sqrt(p.shape[0]))
    return model.eval()


def package_trace(model: ViT, images: torch.Tensor) -> dict[str, torch.Tensor]:
    """The package's intermediate results, under the keys of ``trace_names``."""
    seen: dict[str, torch.Tensor] = {}
    handles = [model.patch.register_forward_hook(lambda m, a, out: seen.__setitem__("patches", out)),
               model.norm.register_forward_hook(lambda m, a, out: seen.__setitem__("final_norm", out))]
    for i, block in enumerate(model.blocks):
        handles.append(block.register_forward_hook(lambda m, a, out, i=i: seen.__setitem__(f"block{i}", out)))
    try:
        with torch.no_grad():
            seen["logits"] = model(images)
            seen["tokens"] = model.tokens(images)
    finally:
        for handle in handles:
            handle.remove()
    return {key: seen[key] for key in trace_names(len(model.blocks))}


class _Stop(Exception):  # noqa: N818 (it carries the verdict out of the check)
    def __init__(self, verdict: Verdict) -> None:
        super().__init__(verdict.message)
        self.verdict = verdict


class _PolicyWatch(_Watch):
    """The harness's watch, refusing calls into Hugging Face ``peft`` as well."""

    def _hook(self, frame: Any, event: str, arg: Any) -> None:
        if event == "call" and not self.inside_allowed and self.called is None:
            module = frame.f_globals.get("__name__") or ""
            if module == "peft" or module.startswith("peft."):
                self._note(_frame_name(frame), "from Hugging Face peft",
                           "Its LoRA layers are what the exercise asks you to write.")
                return
        super()._hook(frame, event, arg)


def _delegated(model: nn.Module) -> str | None:
    """The first module of ``model`` that does a part of the exercise for it, named, or ``None``."""
    found = ready_made_submodule(model, owners=_REFUSED_MODULES)
    if found is None:
        return None
    where = f"your model's module `{found.name}`" if found.name else "your model itself"
    return (f"{where} {found.verb} {found.what}: the model must be built from your own modules (torch.nn's "
            "Linear and LayerNorm inside them are fine), its attention written by hand")


def _values(x: Any) -> torch.Tensor:
    return torch.as_tensor(np.asarray(x.detach().cpu() if torch.is_tensor(x) else x), dtype=torch.float64)


def _close(got: Any, want: torch.Tensor, atol: float, rtol: float) -> bool:
    try:
        value = _values(got)
        return value.shape == want.shape and torch.allclose(value, want.double(), atol=atol, rtol=rtol)
    except (TypeError, ValueError, RuntimeError):
        return False


class ViTLoRAChecker:
    """Checks a ViT class, its ``load_vit`` and its ``add_lora_qv`` against the package's ``ViT`` and
    ``add_lora`` (see the module docstring); call it with the three. Its verdicts are the harness's."""

    def __init__(self, cases: Sequence[_Case] = CASES) -> None:
        self.name = NAME
        self.cases = tuple(cases)
        self.doc = self.__doc__ = (
            "Check ``fn(MyViT, load_vit, add_lora_qv)``: ``MyViT(config)`` (a ``ViTConfig`` with learned positions) "
            "is a Vision Transformer from your own modules, ``forward(images, trace=None) -> (B, n_classes)``, "
            "filling ``trace`` with ``trace_names(n_layers)``; ``load_vit(model, state_dict)`` copies the "
            "package's ViT state dict into it; ``add_lora_qv(model, rank, alpha)`` freezes the model, wraps the "
            "query and value projections of every block in your adapter (``A`` ``(d_in, r)`` random, ``B`` "
            "``(r, d_out)`` zero, scale ``alpha / r``, ``merge()``) and returns the adapters, block by block, the "
            "query's before the value's. Logits, gradients of the adapters and merged logits must agree with "
            "the package's to 1e-5 (float32).")

    def __repr__(self) -> str:
        return f"<checker for {self.name}: " + " ".join(self.doc.replace("``", "").split()) + ">"

    @staticmethod
    def allowances() -> str:
        return ("Allowed here: torch's tensor operations and torch.nn's Linear, LayerNorm, Parameter and "
                "containers, the config the check passes, and your own functions and modules.")

    def __call__(self, vit_class: Any, load_vit: Any = None, add_lora_qv: Any = None) -> Verdict:
        for what, thing in (("MyViT", vit_class), ("load_vit", load_vit), ("add_lora_qv", add_lora_qv)):
            if not callable(thing):
                return Verdict(False, f"{self.name}: expected check_{self.name}(MyViT, load_vit, add_lora_qv); "
                                      f"{what} is {type(thing).__name__}, not a class or function.",
                               outcome=Outcome.WRONG_FORM)
        self._forbidden = _resolve(FORBIDDEN)
        try:
            with torch.random.fork_rng(devices=[]):  # the notebook's random numbers stay as they were
                torch.manual_seed(2727)
                for case in self.cases:
                    self._check_case(vit_class, load_vit, add_lora_qv, case)
        except _Stop as stop:
            return stop.verdict
        except Exception as exc:  # a bug of the checker itself: still a verdict, never a crash
            return Verdict(False, f"{self.name}: the checker could not judge this answer ({_describe(exc)}); "
                                  "this is not a pass.", outcome=Outcome.CANNOT_CHECK)
        n = CHECKS_PER_CASE * len(self.cases)
        return Verdict(True, f"{self.name}: all {n} checks passed ({len(self.cases)} ViTs: logits, adapters at "
                             "zero, trainable parameters, adapted logits, the adapters' gradients, merged logits).")

    # --- calling the learner's code ----------------------------------------------------------------------------

    def _fail(self, outcome: Outcome, text: str, label: str, more: str | None = None) -> _Stop:
        """The verdict that stops the check: what is wrong, on which input, then (``more``) which part."""
        more = f" {more[0].upper()}{more[1:]}" if more else ""
        return _Stop(Verdict(False, f"{self.name}: {text} (input: {label}).{more}", outcome=outcome))

    def _call(self, what: str, fn: Callable[..., Any], args: tuple[Any, ...], label: str) -> Any:
        """``fn(*args)`` under the time limit and the watch; a failure stops the check with its verdict."""
        watch = _PolicyWatch(self._forbidden, random_vit, (), args)
        try:
            with np.errstate(all="ignore"):
                got = _call_with_time_limit(watch.wrap(fn), args, TIME_LIMIT)
        except NotImplementedError as exc:
            if watch.called is None and _raised_by_learner(exc, fn):
                raise _Stop(Verdict(False, f"{self.name}: not attempted yet ({what} raises NotImplementedError). "
                                           "Replace each `raise` line with your code and run the cell again.",
                                    attempted=False)) from None
            failed: str | None = f"raised {_describe(exc)}"
        except _TimedOut:
            failed = f"did not return within {TIME_LIMIT:g} s"
        except SystemExit:
            failed = "called sys.exit()"
        except Exception as exc:  # the learner's bug, reported rather than raised
            failed = f"raised {_describe(exc)}"
        else:
            failed = None
        if watch.called is not None:
            named, kind, why = watch.called
            raise self._fail(Outcome.REFUSED, f"{what} calls {named}, {kind}", label, f"{why} {self.allowances()}")
        if failed is not None:
            raise self._fail(Outcome.ERROR, f"{what} {failed}", label)
        return got

    def _compare(self, what: str, want: torch.Tensor, got: Any, label: str, atol: float = ATOL,
                 rtol: float = RTOL) -> Problem | None:
        problem = _guarded_compare(want, got, atol, rtol)
        return None if problem is None else Problem(problem.outcome, f"{what}: {problem.text}")

    # --- one case ---------------------------------------------------------------------------------------------

    def _check_case(self, vit_class: Any, load_vit: Any, add_lora_qv: Any, case: _Case) -> None:
        c, label = case.config, case.label
        g = torch.Generator().manual_seed(case.seed)
        images = torch.randn(case.batch, c.in_channels, c.image_size, c.image_size, generator=g)
        reference = random_vit(c, case.seed)
        expected = package_trace(reference, images)

        # 1. the ViT, loaded with the package's weights
        model = self._call("MyViT(config)", vit_class, (copy.deepcopy(c),), label)
        if not isinstance(model, nn.Module):
            raise self._fail(Outcome.WRONG_FORM, f"MyViT(config) gave a {type(model).__name__}, not a "
                             "torch.nn.Module", label)
        self._refuse_delegation(model, label)
        state = {k: v.clone() for k, v in reference.state_dict().items()}
        self._call("load_vit", load_vit, (model, state), label)
        model.eval()
        got = self._call("your model", model, (images.clone(),), label)
        problem = self._compare("the logits", expected["logits"], got, label)
        if problem is not None:
            raise self._fail(problem.outcome, problem.text, label, self._first_part(model, images, expected, label))

        # 2. the adapters, at B = 0
        adapted = copy.deepcopy(reference)
        with torch.random.fork_rng(devices=[]):
            add_lora(adapted, case.rank, case.alpha, targets=("q_proj", "v_proj"))
        theirs = lora_layers(adapted)  # block by block, q_proj before v_proj
        attentions = [block.attn for block in adapted.blocks]
        mine = self._call("add_lora_qv", add_lora_qv, (model, case.rank, case.alpha), label)
        mine = self._check_adapters(mine, theirs, model, label)
        fault = functools.partial(self._adapter_fault, mine, theirs, attentions, label)
        self._refuse_delegation(model, label)
        got = self._call("your model with its adapters", model, (images.clone(),), label)
        problem = self._compare("with B = 0 the adapted model must give the base model's logits; the logits",
                                expected["logits"], got, label)
        if problem is not None:
            raise self._fail(problem.outcome, problem.text, label, fault())
        trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
        if trainable != count_trainable(adapted):
            raise self._fail(Outcome.WRONG_VALUE, f"after add_lora_qv {trainable} parameters require gradients, the "
                             f"package's adapted ViT {count_trainable(adapted)}: only A and B of the "
                             f"{len(theirs)} adapters train, r (d_in + d_out) numbers each, and every other "
                             "parameter (the class token and the positions included) is frozen", label)

        # 3. the same random adapters in both: logits and the gradients that reach A and B
        with torch.no_grad():
            for ours, layer in zip(mine, theirs, strict=True):
                layer.A.copy_(torch.randn(layer.A.shape, generator=g) / math.sqrt(layer.A.shape[0]))
                layer.B.copy_(0.5 * torch.randn(layer.B.shape, generator=g))
                ours.A.copy_(layer.A)
                ours.B.copy_(layer.B)
        weights = torch.randn(case.batch, c.n_classes, generator=g)  # the loss: sum(logits * weights)
        want = adapted(images)
        (want * weights).sum().backward()
        want = want.detach()
        for p in model.parameters():
            p.grad = None
        got = self._call("your model with its adapters", model, (images.clone(),), label)
        problem = self._compare("with the same random A and B in both models' adapters, the logits", want, got,
                                label)
        if problem is not None:
            raise self._fail(problem.outcome, problem.text, label, fault())
        if not (torch.is_tensor(got) and got.requires_grad):
            raise self._fail(Outcome.WRONG_VALUE, "the adapted model's logits carry no gradient: A and B must "
                             "require gradients and the forward pass must not detach them", label)
        (got * weights).sum().backward()
        for i, (ours, layer) in enumerate(zip(mine, theirs, strict=True)):
            for factor in ("A", "B"):
                grad = getattr(ours, factor).grad
                if grad is None or not _close(grad, getattr(layer, factor).grad, GRAD_ATOL, GRAD_RTOL):
                    problem = self._compare(f"the gradient of the loss sum(logits * w) with respect to {factor} of "
                                            f"{self._adapter_name(i)}", getattr(layer, factor).grad,
                                            grad, label, GRAD_ATOL, GRAD_RTOL)
                    text = problem.text if problem is not None else f"no gradient reached {factor}"
                    raise self._fail(Outcome.WRONG_VALUE, text, label, fault())

        # 4. merged
        for i, ours in enumerate(mine):
            self._call(f"merge() of {self._adapter_name(i)}", ours.merge, (), label)
        with torch.no_grad():
            got = self._call("your model with its adapters merged", model, (images.clone(),), label)
        problem = self._compare("after merge() of every adapter the logits must stay those of the adapted model; "
                                "the logits", want, got, label)
        if problem is not None:
            raise self._fail(problem.outcome, problem.text, label, self._merge_fault(mine, theirs, label))

    # --- checks of form and policy ------------------------------------------------------------------------------

    def _refuse_delegation(self, model: nn.Module, label: str) -> None:
        reason = _delegated(model)
        if reason is not None:
            raise self._fail(Outcome.REFUSED, reason, label, self.allowances())

    @staticmethod
    def _adapter_name(i: int) -> str:
        return f"block {i // 2}'s {'query' if i % 2 == 0 else 'value'} adapter"

    def _check_adapters(self, mine: Any, theirs: list[LoRALinear], model: nn.Module, label: str) -> list[Any]:
        if not isinstance(mine, (list, tuple)) or len(mine) != len(theirs):
            got = f"a {type(mine).__name__}" + (f" of {len(mine)}" if isinstance(mine, (list, tuple)) else "")
            raise self._fail(Outcome.WRONG_FORM, f"add_lora_qv must return the {len(theirs)} adapters it made, "
                             f"block by block, the query's before the value's; got {got}", label)
        inside = {id(p) for p in model.parameters()}
        for i, (ours, layer) in enumerate(zip(mine, theirs, strict=True)):
            name = self._adapter_name(i)
            A, B = getattr(ours, "A", None), getattr(ours, "B", None)
            if not (isinstance(ours, nn.Module) and isinstance(A, nn.Parameter) and isinstance(B, nn.Parameter)):
                raise self._fail(Outcome.WRONG_FORM, f"{name} must be a torch.nn.Module with parameters A and B",
                                 label)
            if A.shape != layer.A.shape or B.shape != layer.B.shape:
                raise self._fail(Outcome.WRONG_SHAPE, f"{name} has A of shape {tuple(A.shape)} and B of shape "
                                 f"{tuple(B.shape)}; expected (d_in, r) = {tuple(layer.A.shape)} and (r, d_out) = "
                                 f"{tuple(layer.B.shape)}, the book's row convention", label)
            if not callable(getattr(ours, "merge", None)):
                raise self._fail(Outcome.WRONG_FORM, f"{name} has no merge() method", label)
            if id(A) not in inside or id(B) not in inside:
                raise self._fail(Outcome.WRONG_FORM, f"{name}'s A and B are not parameters of the model: put the "
                                 "adapter in the place of the projection it wraps", label)
            if bool((B != 0).any()):
                raise self._fail(Outcome.WRONG_VALUE, f"{name} starts with B != 0: B starts at zero, so that the "
                                 "adapted model starts as the base model", label)
            if not bool((A != 0).any()):
                raise self._fail(Outcome.WRONG_VALUE, f"{name} starts with A = 0: A starts random (with A = B = 0 "
                                 "neither ever receives a gradient)", label)
            if not (A.requires_grad and B.requires_grad):
                raise self._fail(Outcome.WRONG_VALUE, f"{name}'s A and B must require gradients", label)
        return list(mine)

    # --- naming the part that disagrees -------------------------------------------------------------------------

    def _first_part(self, model: nn.Module, images: torch.Tensor, expected: dict[str, torch.Tensor],
                    label: str) -> str:
        trace: dict[str, Any] = {}
        with torch.no_grad():
            self._call("your model", model, (images.clone(), trace), label)
        if not isinstance(trace, dict) or not trace:
            return ("To find the part that disagrees, fill the dict passed as `trace` (keys patches, tokens, "
                    "block0, ..., final_norm, logits).")
        for key, want in expected.items():
            if key in trace and not _close(trace[key], want, TRACE_TOL, TRACE_TOL):
                part = "block" if key.startswith("block") else key
                return f"The first part that disagrees is {key}: {PART_HINTS[part]}"
        return "Every traced part agrees with the package's: trace the parts you left out."

    def _probe(self, i: int, ours: Any, x: torch.Tensor, label: str) -> torch.Tensor:
        with torch.no_grad():
            return self._call(self._adapter_name(i), ours, (x.clone(),), label)

    def _adapter_fault(self, mine: list[Any], theirs: list[LoRALinear], attentions: list[nn.Module],
                       label: str) -> str:
        """Which adapter is wrong, and how: the projection it wraps, or the change it adds."""
        g = torch.Generator().manual_seed(27)
        for i, (ours, layer) in enumerate(zip(mine, theirs, strict=True)):
            x = torch.randn(5, layer.d_in, generator=g)
            y = self._probe(i, ours, x, label)
            with torch.no_grad():
                saved = ours.B.detach().clone()
                ours.B.zero_()
                try:
                    y0 = self._probe(i, ours, x, label)
                finally:
                    ours.B.copy_(saved)
                base = layer.base(x)
                wrapped = self._wrapped_projection(i, y0, layer, attentions[i // 2], x)
                if wrapped is not None:
                    return f"{self._adapter_name(i)} wraps {wrapped}."
                if not _close(y0, base, ATOL, RTOL):
                    return f"{self._adapter_name(i)} with B = 0 does not give its projection's output x W + b."
                change = (x @ layer.A) @ layer.B
                if _close(y, base + layer.scaling * change, ATOL, RTOL):
                    continue
                if layer.scaling != 1 and _close(y, base + change, ATOL, RTOL):
                    return (f"{self._adapter_name(i)} adds x A B without its scale: it adds (alpha / r) x A B, "
                            f"{layer.scaling:g} here.")
                if _close(y, base + layer.alpha * change, ATOL, RTOL):
                    return (f"{self._adapter_name(i)} scales x A B by alpha = {layer.alpha:g}; the scale is "
                            f"alpha / r = {layer.scaling:g}.")
                return f"{self._adapter_name(i)} does not add (alpha / r) x A B to its projection's output."
        return "Every adapter, alone, agrees with the package's: look at where the model calls them."

    @staticmethod
    def _wrapped_projection(i: int, y0: Any, layer: LoRALinear, attention: nn.Module, x: torch.Tensor) -> str | None:
        """Which other projection of the block the adapter wraps, when it is not the one it should."""
        if _close(y0, layer.base(x), ATOL, RTOL):
            return None
        for name, what in (("q_proj", "query"), ("k_proj", "key"), ("v_proj", "value"), ("out_proj", "output")):
            proj = getattr(attention, name)
            proj = proj.base if isinstance(proj, LoRALinear) else proj
            if _close(y0, proj(x), ATOL, RTOL):
                return f"the {what} projection; it should wrap the {'query' if i % 2 == 0 else 'value'} projection"
        return None

    def _merge_fault(self, mine: list[Any], theirs: list[LoRALinear], label: str) -> str:
        g = torch.Generator().manual_seed(28)
        for i, (ours, layer) in enumerate(zip(mine, theirs, strict=True)):
            x = torch.randn(5, layer.d_in, generator=g)
            y = self._probe(i, ours, x, label)
            with torch.no_grad():
                base, change = layer.base(x), (x @ layer.A) @ layer.B
                if _close(y, base + layer.scaling * change, ATOL, RTOL):
                    continue
                if _close(y, base + 2 * layer.scaling * change, ATOL, RTOL):
                    return (f"After merge(), {self._adapter_name(i)} adds its change twice: once merged into W, "
                            "once more in forward; a merged adapter's forward is the plain projection.")
                if _close(y, base + change, ATOL, RTOL) or _close(y, base + (1 + layer.scaling) * change, ATOL,
                                                                  RTOL):
                    return (f"The merge() of {self._adapter_name(i)} forgets the scale: it adds (alpha / r) A B, "
                            f"{layer.scaling:g} A B here, into W.")
                return f"After merge(), {self._adapter_name(i)} no longer gives x W + b + (alpha / r) x A B."
        return "Every adapter, alone, agrees with the package's after merge(): look at where the model calls them."



check_vit_with_lora = ViTLoRAChecker()
