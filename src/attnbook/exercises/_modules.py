"""A checker for an exercise whose answer is a ``torch.nn.Module`` class, and the modules its references share.

``ModuleChecker`` is called with the learner's **class** (``check_parallel_block(ParallelBlock)``). For each of
its cases it builds that class with the case's constructor arguments (positionally, in the order the exercise's
signature gives) and the exercise's reference module with the same arguments, copies the reference's weights
into the learner's module **by name** with ``load_state_dict`` (after saying which names are missing, which are
unexpected and which shapes differ, if any), and compares the outputs of ``forward`` on the case's inputs, then
the gradient of every parameter of a fixed scalar loss of the output. When an output differs it runs both
modules again with forward hooks on every submodule of the same name and names the first one whose input or
output disagrees.

The learner's ``__init__`` and ``forward`` run under the harness's watch (``_Watch``: the policy that refuses
any call into ``attnbook``, SciPy, scikit-learn, ``transformers``, ``torch.func``), with PyTorch's ready-made
Transformer layers refused as well (``TRANSFORMER_LAYERS``). Since a submodule built in ``__init__`` is
delegation too, the module tree is checked once the class is built: a submodule whose class comes from
``attnbook`` or ``transformers``, or is one of ``torch.nn``'s Transformer layers, is refused unless the exercise
allows that class (``allowed``).
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from attnbook.exercises._harness import (
    TIME_LIMIT,
    Outcome,
    Problem,
    Verdict,
    _call_with_time_limit,
    _describe,
    _guarded_compare,
    _qualified,
    _raised_by_learner,
    _resolve,
    _TimedOut,
    _Watch,
)
from attnbook.torch.attention import scaled_dot_product_attention

# PyTorch's ready-made Transformer layers and the functions that compute attention in one call: refused in every
# module exercise (an exercise may allow one by listing it in ``allowed``).
TORCH_LAYERS: tuple[type, ...] = (nn.MultiheadAttention, nn.TransformerEncoderLayer, nn.TransformerDecoderLayer,
                                  nn.TransformerEncoder, nn.TransformerDecoder, nn.Transformer)
TRANSFORMER_LAYERS: tuple[Any, ...] = (
    *(layer.forward for layer in TORCH_LAYERS),
    F.multi_head_attention_forward,
    F.scaled_dot_product_attention,
)


@dataclass(frozen=True)
class ModuleCase:
    """One check: the constructor's arguments ``init``, the inputs of ``forward``, and a ``label`` naming them.

    The modules are cast to the dtype of the first floating-point input."""

    label: str
    init: tuple[Any, ...]
    inputs: tuple[Any, ...]


@dataclass(repr=False)
class ModuleChecker:
    """Checks a learner's ``nn.Module`` class against ``reference`` (a class with the same constructor) on
    ``cases``: call it with the class.

    ``name`` is the class's name as the exercise asks for it; ``doc`` states the contract (constructor, parameter
    names and shapes, ``forward``) and becomes the checker's docstring. ``prepare(reference_module, generator)``
    (optional) sets the reference's weights for a check, for instance norms and gates away from their
    initial values, so that each of them counts. ``allowed`` lists the functions and module classes of the
    package (or PyTorch's layers) that the exercise lets the answer call or hold; ``forbidden`` adds functions to
    ``TRANSFORMER_LAYERS``. Tolerances: ``atol``/``rtol`` in float64, ``atol32``/``rtol32`` in float32.
    """

    name: str
    doc: str
    reference: type[nn.Module]
    cases: Sequence[ModuleCase]
    prepare: Callable[[nn.Module, torch.Generator], None] | None = None
    allowed: Sequence[Any] = field(default_factory=tuple)
    forbidden: Sequence[Any] = field(default_factory=tuple)
    atol: float = 1e-8
    rtol: float = 1e-6
    atol32: float = 1e-5
    rtol32: float = 1e-4
    time_limit: float | None = None  # None: TIME_LIMIT, per call of __init__ or forward
    seed: int = 0

    def __post_init__(self) -> None:
        self.__doc__ = self.doc

    def __repr__(self) -> str:
        contract = " ".join(self.doc.replace("``", "").split())
        return f"<module checker for {self.name}: {contract}>"

    def allowances(self) -> str:
        """The sentence that says what this exercise lets an answer call."""
        named = [_qualified(f) for f in _resolve(self.allowed)]
        base = "torch.nn's building blocks (nn.Linear, nn.LayerNorm, nn.Dropout, nn.GELU, ...), and tensor operations"
        return f"Allowed here: {', '.join(named)}, {base}." if named else f"Allowed here: {base}."

    # --- the check ---------------------------------------------------------------------------------------------

    def __call__(self, cls: Any) -> Verdict:
        if not (isinstance(cls, type) and issubclass(cls, nn.Module)):
            what = "an instance" if isinstance(cls, nn.Module) else type(cls).__name__
            return Verdict(False, f"{self.name}: expected a class derived from torch.nn.Module (pass the class, "
                                  f"{self.name}, not an object built from it), got {what}.",
                           outcome=Outcome.WRONG_FORM)
        if cls is self.reference:
            return Verdict(False, f"{self.name}: this is the checker's own reference {_qualified(cls)}, not an "
                                  "answer. Write the class yourself.", outcome=Outcome.REFUSED)
        try:
            for index, case in enumerate(self.cases):
                problem = self._check_case(cls, case, index)
                if problem is None:
                    continue
                if problem.outcome is Outcome.NOT_ATTEMPTED:
                    return Verdict(False, f"{self.name}: not attempted yet (it raises NotImplementedError). "
                                          "Replace the `raise` lines with your code and run the cell again.",
                                   attempted=False)
                return Verdict(False, f"{self.name}: {problem.text}", outcome=problem.outcome)
        except Exception as exc:  # a bug of the checker itself: still a verdict, never a crash
            return Verdict(False, f"{self.name}: the checker could not judge this answer ({_describe(exc)}); "
                                  "this is not a pass.", outcome=Outcome.CANNOT_CHECK)
        return Verdict(True, f"{self.name}: all {len(self.cases)} checks passed (outputs, and the gradient of "
                             "every parameter).")

    def _watch(self, args: Any) -> _Watch:
        forbidden = _resolve([*TRANSFORMER_LAYERS, *self.forbidden])
        allowed = _resolve(self.allowed)
        forbidden = [f for f in forbidden if not any(f is a for a in allowed)]
        return _Watch(forbidden, self.reference.forward, allowed, args)

    def _run(self, fn: Callable[..., Any], args: tuple[Any, ...], what: str, label: str,
             extra_allowed: Sequence[Any] = ()) -> tuple[Any, Problem | None]:
        """``fn(*args)`` under the time limit and the watch: ``(result, None)`` or ``(None, problem)``."""
        limit = TIME_LIMIT if self.time_limit is None else self.time_limit
        watch = self._watch(args)
        for f in extra_allowed:  # the checker's own hooks run inside the learner's call
            watch.allowed.add(f.__code__)
        got, problem = None, None
        try:
            with np.errstate(all="ignore"):
                got = _call_with_time_limit(watch.wrap(fn), args, limit)
        except NotImplementedError as exc:
            code_of = fn.forward if isinstance(fn, nn.Module) else fn.__init__
            problem = (Problem(Outcome.NOT_ATTEMPTED, "not attempted") if _raised_by_learner(exc, code_of) else
                       Problem(Outcome.ERROR, f"{what} raised {_describe(exc)} ({label})."))
        except _TimedOut:
            problem = Problem(Outcome.ERROR, f"{what} did not return within {limit:g} s ({label}).")
        except SystemExit:
            problem = Problem(Outcome.ERROR, f"{what} called sys.exit() ({label}).")
        except Exception as exc:
            problem = Problem(Outcome.ERROR, f"{what} raised {_describe(exc)} ({label}).")
        if watch.called is not None:
            return None, Problem(Outcome.REFUSED, f"{what} {watch.refusal()} ({label}). {self.allowances()}")
        return got, problem

    def _build(self, cls: type[nn.Module], case: ModuleCase, index: int
               ) -> tuple[nn.Module | None, nn.Module | None, Problem | None]:
        """The reference and the learner's module for ``case``, in the inputs' dtype, the weights copied."""
        dtype = next((x.dtype for x in case.inputs if isinstance(x, torch.Tensor) and x.is_floating_point()),
                     torch.float64)
        with torch.random.fork_rng():
            torch.manual_seed(self.seed + index)
            reference = self.reference(*case.init)
            if self.prepare is not None:
                self.prepare(reference, torch.Generator().manual_seed(self.seed + index))
        reference = reference.to(dtype).eval()
        call = f"{self.name}{_args(case.init)}"
        with torch.random.fork_rng():
            mine, problem = self._run(cls, copy.deepcopy(case.init), f"{call}", "while it is built")
        if problem is not None:
            return None, None, problem
        if not isinstance(mine, nn.Module):
            return None, None, Problem(Outcome.WRONG_FORM, f"{call} built {type(mine).__name__}, not a module.")
        refused = _refused_submodule(mine, self.allowed)
        if refused is not None:
            return None, None, Problem(Outcome.REFUSED, f"{refused} {self.allowances()}")
        mine = mine.to(dtype).eval()
        problem = _fit(reference, mine, call)
        if problem is not None:
            return None, None, problem
        mine.load_state_dict(reference.state_dict(), strict=False)  # _fit has checked every parameter's name
        return reference, mine, None

    def _check_case(self, cls: type[nn.Module], case: ModuleCase, index: int) -> Problem | None:
        reference, mine, problem = self._build(cls, case, index)
        if problem is not None:
            return problem
        assert reference is not None and mine is not None
        f64 = any(isinstance(x, torch.Tensor) and x.dtype == torch.float64 for x in case.inputs)
        atol, rtol = (self.atol, self.rtol) if f64 else (self.atol32, self.rtol32)
        label = f"{self.name}{_args(case.init)}, {case.label}"
        expected = reference(*copy.deepcopy(case.inputs))
        given = copy.deepcopy(case.inputs)
        got, problem = self._run(mine, given, "forward", label)
        if problem is not None:
            return problem
        if any(not _same_tensor(a, b) for a, b in zip(case.inputs, given, strict=True)):
            return Problem(Outcome.CHANGED_INPUT, f"forward changed its input in place ({label}); compute a new "
                                                  "tensor instead of writing into the arguments.")
        problem = _guarded_compare(expected.detach(), got, atol, rtol)
        if problem is not None:
            text = f"the output differs ({label}): {problem.text}."
            if problem.outcome is Outcome.WRONG_VALUE:
                where = self._diagnose(reference, mine, case, atol, rtol)
                if where:
                    text += f" {where}"
            return Problem(problem.outcome, text)
        return self._check_gradients(reference, mine, case, expected, got, label, atol, rtol)

    def _check_gradients(self, reference: nn.Module, mine: nn.Module, case: ModuleCase, expected: torch.Tensor,
                         got: torch.Tensor, label: str, atol: float, rtol: float) -> Problem | None:
        if not (isinstance(got, torch.Tensor) and got.requires_grad):
            return Problem(Outcome.WRONG_VALUE, f"the output agrees ({label}), but it carries no gradient: is it "
                                                "computed under torch.no_grad(), or detached?")
        g = torch.Generator().manual_seed(self.seed + 1000)
        weights = torch.randn(expected.shape, generator=g, dtype=torch.float64).to(expected.dtype)
        (expected * weights).sum().backward()
        try:
            (got * weights).sum().backward()
        except Exception as exc:
            return Problem(Outcome.ERROR, f"the output agrees ({label}), but its backward pass raised "
                                          f"{_describe(exc)}.")
        theirs = dict(mine.named_parameters())
        for pname, p in reference.named_parameters():
            q = theirs[pname]
            if p.grad is None:
                continue
            if q.grad is None:
                return Problem(Outcome.WRONG_VALUE, f"the output agrees ({label}), but `{pname}` gets no gradient: "
                                                    "it does not reach the output (is it used in forward, or "
                                                    "detached?).")
            problem = _guarded_compare(p.grad, q.grad, atol, rtol)
            if problem is not None:
                return Problem(Outcome.WRONG_VALUE, f"the output agrees ({label}), but the gradient of `{pname}` "
                                                    f"differs: {problem.text}.")
        return None

    def _diagnose(self, reference: nn.Module, mine: nn.Module, case: ModuleCase, atol: float, rtol: float
                  ) -> str | None:
        """A sentence naming the first submodule (in the order the reference's finish) whose input or output
        differs from the reference's, found with forward hooks; ``None`` when it cannot tell."""
        ref_seen = _record(reference)
        mine_seen = _record(mine)
        try:
            with torch.no_grad():
                reference(*copy.deepcopy(case.inputs))
            with torch.no_grad():
                _, problem = self._run(mine, copy.deepcopy(case.inputs), "forward", case.label,
                                       extra_allowed=(_Recorder.__call__,))
        finally:
            ref_seen.remove()
            mine_seen.remove()
        if problem is not None:
            return None
        agreed: list[str] = []
        for name in ref_seen.order:
            if name not in mine_seen.seen:
                return (f"Your module has no submodule `{name}` that forward calls, where the reference's does"
                        + (f" (after {_listing(agreed)}, which agree)." if agreed else "."))
            ref_in, ref_out = ref_seen.seen[name]
            my_in, my_out = mine_seen.seen[name]
            before = f"Your {_listing(agreed)} agree" + ("s" if len(agreed) == 1 else "") + "; " if agreed else ""
            if ref_in is not None and _guarded_compare(ref_in, my_in, atol, rtol) is not None:
                parent = name.rpartition(".")[0]
                inside = f"`{parent}`'s forward" if parent else "your forward"
                return (f"{before}the input of your `{name}` differs, so the difference arises in {inside}, before "
                        f"it calls `{name}`.")
            problem = _guarded_compare(ref_out, my_out, atol, rtol)
            if problem is not None:
                return f"{before}your `{name}` gets the same input but its output differs: {problem.text}."
            agreed.append(f"`{name}`")
        if agreed:
            return (f"Every submodule agrees ({_listing(agreed)}): the difference is in how your forward combines "
                    "their outputs.")
        return None


# --- helpers ---------------------------------------------------------------------------------------------------


def _args(init: tuple[Any, ...]) -> str:
    return "(" + ", ".join(repr(a) for a in init) + ")"


def _listing(names: list[str]) -> str:
    if len(names) > 4:
        return ", ".join(names[:2]) + f", ... ({len(names) - 3} more), " + names[-1]
    return ", ".join(names)


def _same_tensor(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.shape == b.shape and a.dtype == b.dtype and bool(
            torch.equal(a, b) or (a.is_floating_point() and ((a == b) | (a.isnan() & b.isnan())).all()))
    return True


def _first_tensor(x: Any) -> torch.Tensor | None:
    if isinstance(x, torch.Tensor):
        return x.detach()
    if isinstance(x, (tuple, list)):
        for item in x:
            t = _first_tensor(item)
            if t is not None:
                return t
    return None


class _Recorder:
    """Forward hooks on every submodule of a module: the first input and output of each submodule's first call,
    by name, and the order in which the calls finished."""

    def __init__(self) -> None:
        self.seen: dict[str, tuple[torch.Tensor | None, torch.Tensor | None]] = {}
        self.order: list[str] = []
        self.handles: list[Any] = []

    def __call__(self, name: str, module: nn.Module, inputs: Any, output: Any) -> None:
        if name not in self.seen:
            self.seen[name] = (_first_tensor(inputs), _first_tensor(output))
            self.order.append(name)

    def remove(self) -> None:
        for handle in self.handles:
            handle.remove()


def _record(module: nn.Module) -> _Recorder:
    recorder = _Recorder()
    for name, sub in module.named_modules():
        if name:
            recorder.handles.append(sub.register_forward_hook(_bound(recorder, name)))
    return recorder


def _bound(recorder: _Recorder, name: str) -> Any:
    # a partial, not a closure: the watch allows the recorder's __call__ by its code, and a partial adds no frame
    return functools.partial(recorder, name)


def _fit(reference: nn.Module, mine: nn.Module, call: str) -> Problem | None:
    """Whether the learner's parameters have the reference's names and shapes; if not, a sentence saying which."""
    expected = {n: tuple(p.shape) for n, p in reference.named_parameters()}
    got = {n: tuple(p.shape) for n, p in mine.named_parameters()}
    missing = [n for n in expected if n not in got]
    unexpected = [n for n in got if n not in expected]
    shapes = [n for n in expected if n in got and got[n] != expected[n]]
    if not (missing or unexpected or shapes):
        return None
    parts = []
    if missing:
        parts.append("missing " + ", ".join(f"`{n}` {expected[n]}" for n in missing))
    if unexpected:
        parts.append("unexpected " + ", ".join(f"`{n}` {got[n]}" for n in unexpected))
    if shapes:
        parts.append("wrong shapes: " + ", ".join(f"`{n}` is {got[n]}, expected {expected[n]}" for n in shapes))
    outcome = Outcome.WRONG_SHAPE if not (missing or unexpected) else Outcome.WRONG_FORM
    return Problem(outcome, f"the parameters of {call} do not fit the exercise's names and shapes, so the "
                            f"reference's weights cannot be loaded into it: {'; '.join(parts)}. The exercise lists "
                            "the names and shapes it expects.")


@dataclass(frozen=True)
class ReadyMade:
    """A submodule of a learner's model that is someone else's implementation: its dotted ``name`` ("" for the
    model itself), ``verb`` ("is" or "derives from"), ``owner`` ("attnbook", "transformers", "peft" or
    "torch") and ``what``, the offending class's full name in backquotes."""

    name: str
    verb: str
    owner: str
    what: str


def ready_made_submodule(module: nn.Module, allowed: Sequence[Any] = (),
                         owners: tuple[str, ...] = ("attnbook", "transformers")) -> ReadyMade | None:
    """The first submodule of ``module`` (itself first, then depth first) whose class is, or derives from, a
    class of one of the packages ``owners`` or one of PyTorch's ``TORCH_LAYERS``; ``None`` if there is none.
    A submodule of a class listed in ``allowed`` is accepted with whatever it holds. The one walk every
    module-building exercise uses, so that a subclass or a held submodule cannot pass where the class itself
    is refused."""
    allowed_classes = tuple(a for a in _resolve(allowed) if isinstance(a, type))

    def visit(name: str, m: nn.Module) -> ReadyMade | None:
        if isinstance(m, allowed_classes) and type(m) in allowed_classes:
            return None  # an allowed class, with whatever it holds
        for klass in type(m).__mro__:
            module_name = getattr(klass, "__module__", "") or ""
            verb = "is" if klass is type(m) else "derives from"
            owner = module_name.split(".")[0]
            if owner in owners:
                return ReadyMade(name, verb, owner, f"`{module_name}.{klass.__qualname__}`")
            if klass in TORCH_LAYERS:
                return ReadyMade(name, verb, "torch", f"`torch.nn.{klass.__name__}`")
        for child_name, child in m.named_children():
            found = visit(f"{name}.{child_name}" if name else child_name, child)
            if found:
                return found
        return None

    return visit("", module)


def _refused_submodule(module: nn.Module, allowed: Sequence[Any]) -> str | None:
    """A sentence refusing the first submodule (the module itself included) that is a ready-made answer:
    a class of ``attnbook`` or ``transformers``, or a Transformer layer of ``torch.nn``; ``None`` if none is."""
    found = ready_made_submodule(module, allowed)
    if found is None:
        return None
    who = f"your `{found.name}`" if found.name else "your class"
    if found.owner == "attnbook":
        return (f"{who} {found.verb} the package's {found.what}: an answer built from the package's modules proves "
                "nothing. Write it from the parts the exercise allows.")
    if found.owner == "transformers":
        return f"{who} {found.verb} Hugging Face's {found.what}, a ready-made model or layer."
    return f"{who} {found.verb} PyTorch's ready-made {found.what}, which does what the exercise asks you to write."


# --- the modules the references share ----------------------------------------------------------------------------


class ReferenceAttention(nn.Module):
    """Multi-head attention under the names the module exercises use: ``w_q``, ``w_k``, ``w_v``, ``w_o``, each an
    ``nn.Linear`` (weight ``(d_out, d_in)``, bias ``(d_out,)``). ``n_kv_heads`` key and value heads (1: multi-query
    attention), each shared by ``n_heads / n_kv_heads`` query heads. ``forward(x_q, x_kv=None, mask=None)``:
    ``x_q`` ``(B, T_q, d_model)``, ``x_kv`` ``(B, T_k, d_model)`` (``x_q`` when omitted), ``mask`` boolean,
    True where allowed, broadcastable to ``(B, T_q, T_k)``; returns ``(B, T_q, d_model)``. The attention itself is
    the package's ``scaled_dot_product_attention`` (a query with no allowed key gets a zero head)."""

    def __init__(self, d_model: int, n_heads: int, n_kv_heads: int | None = None) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
        d_head = d_model // n_heads
        self.w_q = nn.Linear(d_model, d_model)
        self.w_k = nn.Linear(d_model, self.n_kv_heads * d_head)
        self.w_v = nn.Linear(d_model, self.n_kv_heads * d_head)
        self.w_o = nn.Linear(d_model, d_model)

    def forward(self, x_q: torch.Tensor, x_kv: torch.Tensor | None = None, mask: torch.Tensor | None = None
                ) -> torch.Tensor:
        x_kv = x_q if x_kv is None else x_kv
        B, T_q, d = x_q.shape
        q = self.w_q(x_q).unflatten(-1, (self.n_heads, -1)).transpose(1, 2)  # (B, h, T_q, d_head)
        k, v = (w(x_kv).unflatten(-1, (self.n_kv_heads, -1)).transpose(1, 2) for w in (self.w_k, self.w_v))
        group = self.n_heads // self.n_kv_heads
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)  # (B, h, T_k, d_head)
        if mask is not None:
            mask = mask.unsqueeze(-3) if mask.dim() >= 3 else mask  # a head axis
        heads, _ = scaled_dot_product_attention(q, k, v, mask=mask)
        return self.w_o(heads.transpose(1, 2).reshape(B, T_q, d))


def away_from_init(module: nn.Module, generator: torch.Generator) -> None:
    """Move every vector parameter (biases, norms' scales and shifts, gates) by a random 0.3 so that each counts
    in a check (a scale of exactly 1 or a shift of 0 would hide a mistake that leaves it out)."""
    with torch.no_grad():
        for p in module.parameters():
            if p.dim() <= 1:
                p.add_(0.3 * torch.randn(p.shape, generator=generator, dtype=p.dtype))


def causal_mask(T: int) -> torch.Tensor:
    """``(T, T)``, True on and below the diagonal (the cases' causal masks)."""
    return torch.ones(T, T, dtype=torch.bool).tril()


def lengths_mask(lengths: Sequence[int], T: int) -> torch.Tensor:
    """``(B, T)``, True at the first ``lengths[b]`` positions of row ``b`` (the cases' padding masks)."""
    return torch.arange(T)[None, :] < torch.tensor(list(lengths))[:, None]


def module_checkers() -> list[tuple[str, ModuleChecker]]:
    """Every module checker of the chapters' modules, as ``("chNN.name", checker)``, in chapter order."""
    import importlib
    import pkgutil

    import attnbook.exercises as exercises

    found: list[tuple[str, ModuleChecker]] = []
    for info in sorted(pkgutil.iter_modules(exercises.__path__), key=lambda m: m.name):
        if info.name.startswith("ch"):
            module = importlib.import_module(f"attnbook.exercises.{info.name}")
            found += [(f"{info.name}.{c.name}", c) for c in vars(module).values() if isinstance(c, ModuleChecker)]
    return found


