"""The machinery every exercise checker shares.

A checker runs the learner's function on fixed and random cases, compares each answer with the
package's reference implementation, and returns a ``Verdict`` whose text says what passed or, for the
first case that fails, what went wrong and on which input. It never raises on a wrong answer:
exceptions, ``sys.exit()``, a function that never returns, wrong shapes and types, NaNs, changed
inputs and ``NotImplementedError`` all become sentences.

What a checker accepts as an answer (``_values`` below): a Python number, a NumPy array or scalar, a
PyTorch tensor (any real dtype, bfloat16 included, on any real device, with or without gradients), or
a list or tuple of numbers (nested for several dimensions), and a string where the exercise asks for a
word. The values must match the reference: within ``atol``/``rtol`` for real numbers, exactly for
integers and booleans. Anything else is rejected with a sentence saying what arrived: ``None``,
strings where numbers are expected (``"0.5"`` is not ``0.5``), complex numbers (even with a zero
imaginary part), tensors on the meta device (they hold no values), integers too large for a float,
and containers of mixed or ragged items such as ``(output, weights)`` where one array is expected.

The learner's function gets deep copies of each case's inputs, so nothing it does can spoil a later
case or another checker; if it changes those copies in place, the verdict says so, since the caller
of such a function would find its data overwritten. Each call has a time limit (``time_limit``
seconds, ``TIME_LIMIT`` by default).

An exercise asks the learner to write something, so an answer that hands the work to a ready-made
implementation proves nothing. While the learner's function runs, a profile hook (``sys.setprofile``) sees
every call it makes, whatever name or alias it goes through, and a policy refuses, with a sentence naming
the call and the reason: any call into ``attnbook`` (the book's package, its checkers and their references
included), SciPy, scikit-learn, Hugging Face ``transformers``, ``torch.func`` and forward-mode automatic
differentiation, and the checker's ``forbidden`` functions (the PyTorch and NumPy functions that implement
the exercise). Three more refusals concern calls made by the answer's own code (not by PyTorch's code
calling its own parts): starting a thread or using a pool of threads or processes (the hook watches one
thread, so work handed to another would go unseen; a thread started before the call and fed through a queue
is the one route left); PyTorch's private and operator-level entry points (``torch.ops``,
``torch._softmax``, ``torch._C._nn.cross_entropy_loss``, autograd's ``_execution_engine``), which do what
the public functions an exercise refuses do; and, in the NumPy exercises of Part I (``numpy_only``, the
default for the checker modules of chapters 1 to 11), any call into PyTorch. The last one is a refusal
rather than a wider measurement because a NumPy exercise's checks are about NumPy: its memory budgets
(``BudgetChecker``) are measured by ``tracemalloc``, which sees NumPy's and Python's allocations but not
PyTorch's, and its ``forbidden`` lists name NumPy's ready-made routes, while PyTorch offers a softmax, a
cosine similarity or an attention in one call under many names. A checker with ``real_only`` also refuses
complex numbers in the answer's arguments and local variables (a complex-step derivative where the exercise
asks for one worked out).

What an exercise allows is declared in its checker (``allowed``) and printed in
the refusal; the functions and objects a check passes to the learner's function (a model, a step
function) are always allowed. The checker's own calls of its reference happen outside the watch.

The result is structured: a ``Verdict`` carries an ``Outcome`` (passed, wrong value, wrong shape, wrong
form, refused call, error, changed input, not attempted, cannot check), and ``_check_case`` returns a
``Problem`` with one, so that checkers built on this one read the outcome rather than the wording. A
check that cannot be carried out (a data set that cannot be loaded, a bug of the checker) says so and
does not pass.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import importlib
import inspect
import linecache
import math
import signal
import sys
import threading
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import numpy as np

TIME_LIMIT = 20.0  # seconds per call of the learner's function: generous for every exercise, even under load


class Outcome(Enum):
    """What a check found, for code that reads a verdict (the message is for the learner)."""

    PASSED = "passed"
    WRONG_VALUE = "wrong value"  # ran and returned numbers of the right shape that differ (NaN included)
    WRONG_SHAPE = "wrong shape"  # ran and returned numbers of another shape
    WRONG_FORM = "wrong form"  # None, text, complex numbers, a mixed container, not a function...
    REFUSED = "refused call"  # called something the exercise does not allow
    ERROR = "error"  # raised, did not return in time, or called sys.exit()
    CHANGED_INPUT = "changed input"  # wrote into its arguments
    NOT_ATTEMPTED = "not attempted"  # the stub's NotImplementedError
    CANNOT_CHECK = "cannot check"  # the checker could not carry out a check: never a pass


# Outcomes of an answer that ran and returned numbers to compare: only these get a second look (hints,
# a capstone's diagnosis of its parts).
COMPARED = frozenset({Outcome.WRONG_VALUE, Outcome.WRONG_SHAPE})


@dataclass(frozen=True)
class Problem:
    """What went wrong on one case: its ``outcome`` and the sentence that tells the learner."""

    outcome: Outcome
    text: str

    def __str__(self) -> str:
        return self.text

    def extended(self, more: str | None) -> Problem:
        return self if not more else Problem(self.outcome, f"{self.text} {more}")


@dataclass(frozen=True)
class Verdict:
    """The outcome of a check. Shows as its message in a notebook; true when it passed."""

    passed: bool
    message: str
    attempted: bool = True
    outcome: Outcome | None = None  # None: PASSED, NOT_ATTEMPTED or WRONG_VALUE, from the two flags

    def __post_init__(self) -> None:
        if self.outcome is None:
            implied = (Outcome.PASSED if self.passed else
                       Outcome.NOT_ATTEMPTED if not self.attempted else Outcome.WRONG_VALUE)
            object.__setattr__(self, "outcome", implied)
        if self.passed != (self.outcome is Outcome.PASSED):
            raise ValueError(f"a verdict that {'passed' if self.passed else 'failed'} cannot have the outcome "
                             f"{self.outcome}")

    def __bool__(self) -> bool:
        return self.passed

    def __repr__(self) -> str:
        return self.message


@dataclass(frozen=True)
class Case:
    """One input to try: ``args`` go to the function, ``label`` names them in messages."""

    label: str
    args: tuple[Any, ...]


@dataclass(frozen=True)
class Mistake:
    """A typical wrong answer: when the learner's output matches ``fn``'s, ``hint`` is shown."""

    fn: Callable[..., Any]
    hint: str


@dataclass(repr=False)
class Checker:
    """Checks a learner's function against ``reference`` on ``cases``: call it with the function.

    ``name`` is the function's name as the exercise asks for it; ``doc`` states the exercise's contract
    (``"Check ``fn(x) -> weights``: ..."``) and becomes the checker's own docstring, so that ``help()``
    and IPython's ``?`` show it; ``atol`` and ``rtol`` are the tolerances for real-valued answers
    (integer and boolean answers must match exactly); ``mistakes`` are recognised wrong answers with
    hints; ``time_limit`` bounds each call, in seconds; ``forbidden`` lists the implementations of what
    the exercise asks for (Python functions, or builtins such as a torch function) that the policy would
    not otherwise refuse, and the package's own ones whose refusal should say "the package's own answer".
    An entry may also be a dotted name (``"torch.nn.functional.softmax"``), looked up when a check runs,
    so that a NumPy chapter's checker can refuse PyTorch's function without importing PyTorch itself; a
    name whose module is not installed is skipped (nobody can call it). ``allowed`` lists what the
    exercise lets the learner call although the policy refuses it (``attnbook.numpy.softmax`` where the
    statement says "with the chapter's softmax"): functions, classes (all their methods) or dotted names.
    """

    name: str
    doc: str
    reference: Callable[..., Any]
    cases: Sequence[Case]
    mistakes: Sequence[Mistake] = field(default_factory=tuple)
    atol: float = 1e-8
    rtol: float = 1e-6
    time_limit: float | None = None  # None: TIME_LIMIT
    forbidden: Sequence[Callable[..., Any] | str] = field(default_factory=tuple)
    allowed: Sequence[Any] = field(default_factory=tuple)
    # (words of an exception, what it means here): a hint for an error raised by code the answer calls
    error_hints: Sequence[tuple[str, str]] = field(default_factory=tuple)
    # Refuse every call into PyTorch from the answer's own code: None means "by the chapter", true for the
    # checkers of Part I's NumPy chapters (1 to 11, by the module that builds the checker), false elsewhere.
    numpy_only: bool | None = None
    # Refuse an answer that computes with complex numbers (the complex-step derivative, where the exercise asks
    # for a derivative worked out by hand): seen in the arguments and local variables of its frames.
    real_only: bool = False

    def __post_init__(self) -> None:
        self.__doc__ = self.doc  # an instance attribute: help(), inspect.getdoc() and `?` read it
        if self.numpy_only is None:
            self.numpy_only = _numpy_chapter(sys._getframe(1))
        if any(f is self.reference for f in self.forbidden):
            raise ValueError(f"checker {self.name}: the reference cannot be one of its forbidden functions; "
                             "wrap it in a function of the checker's module")

    def __repr__(self) -> str:
        contract = " ".join(self.doc.replace("``", "").split())  # one line, without the reST markup
        return f"<checker for {self.name}: {contract}>"

    def allowances(self) -> str:
        """The sentence that says what this exercise lets an answer call."""
        named = [_qualified(f) for f in _resolve(self.allowed)]
        given = "the functions and objects the check passes to your function"
        ops = "and NumPy's array operations (this exercise is written in NumPy, not PyTorch)" if self.numpy_only \
            else "and tensor and array operations"
        if self.real_only:
            ops += ", in real numbers (no complex ones)"
        if not named:
            return f"Allowed here: {given}, {ops}."
        return f"Allowed here: {', '.join(named)}, {given}, {ops}."

    def __call__(self, fn: Any) -> Verdict:
        if not callable(fn):
            return Verdict(False, f"{self.name}: expected a function, got {type(fn).__name__}.",
                           outcome=Outcome.WRONG_FORM)
        forbidden = _resolve(self.forbidden)
        unwrapped = inspect.unwrap(fn)
        own = next((f for f in forbidden if unwrapped is f), None)
        if own is not None:
            return Verdict(False, f"{self.name}: this is the package's own {_qualified(own)}, not an answer. "
                                  "Write the function yourself.", outcome=Outcome.REFUSED)
        if unwrapped is inspect.unwrap(self.reference):
            return Verdict(False, f"{self.name}: this is the checker's own reference {_qualified(unwrapped)}, "
                                  "not an answer. Write the function yourself.", outcome=Outcome.REFUSED)
        try:
            for case in self.cases:
                problem = self._check_case(fn, case, forbidden)
                if problem is None:
                    continue
                if problem.outcome is Outcome.NOT_ATTEMPTED:
                    return Verdict(
                        False,
                        f"{self.name}: not attempted yet (it raises NotImplementedError). "
                        "Replace the `raise` line with your code and run the cell again.",
                        attempted=False,
                    )
                return Verdict(False, f"{self.name}: {problem.text}", outcome=problem.outcome)
        except Exception as exc:  # a bug of the checker itself: still a verdict, never a crash
            return Verdict(False, f"{self.name}: the checker could not judge this answer "
                                  f"({type(exc).__name__}: {_short(str(exc))}); this is not a pass.",
                           outcome=Outcome.CANNOT_CHECK)
        return Verdict(True, f"{self.name}: all {len(self.cases)} checks passed.")

    def watch(self, forbidden: Sequence[Callable[..., Any]], fn: Callable[..., Any], args: tuple[Any, ...]
              ) -> _Watch:
        """The watch for one call of ``fn(*args)``: the policy, this exercise's allowances and its inputs."""
        code = getattr(inspect.unwrap(fn), "__code__", None)
        trusted = any(inspect.unwrap(fn) is inspect.unwrap(m.fn)
                      or (code is not None and code is getattr(inspect.unwrap(m.fn), "__code__", None))
                      for m in self.mistakes)
        return _Watch(forbidden, self.reference, _resolve(self.allowed), args, trusted=trusted,
                      numpy_only=bool(self.numpy_only), real_only=self.real_only)

    def _run(self, fn: Callable[..., Any], args: tuple[Any, ...], label: str,
             forbidden: Sequence[Callable[..., Any]]) -> tuple[Any, Problem | None]:
        """``fn(*args)`` under the time limit and the watch: ``(answer, None)``, or ``(None, problem)``."""
        limit = TIME_LIMIT if self.time_limit is None else self.time_limit
        watch = self.watch(forbidden, fn, args)
        self._last_watch = watch  # read by a check that counts the answer's calls
        got, problem = None, None
        try:
            # NumPy's own warnings (division by zero, ...) would repeat what the verdict says.
            with np.errstate(all="ignore"):
                got = _call_with_time_limit(watch.wrap(fn), args, limit)
        except NotImplementedError as exc:
            problem = (Problem(Outcome.NOT_ATTEMPTED, _NOT_ATTEMPTED) if _raised_by_learner(exc, fn) else
                       Problem(Outcome.ERROR, f"raised {_describe(exc)} (input: {label})."))
        except _TimedOut:
            problem = Problem(Outcome.ERROR, f"did not return within {limit:g} s (input: {label}); look for a "
                                             "loop that never ends.")
        except SystemExit:
            problem = Problem(Outcome.ERROR, f"called sys.exit() (input: {label}); return the answer instead "
                                             "of stopping Python.")
        except Exception as exc:  # the learner's bug, reported rather than raised
            problem = Problem(Outcome.ERROR, f"raised {_describe(exc)} (input: {label}).")
        if watch.called is not None:  # a refused call counts first, whatever happened after it
            return None, Problem(Outcome.REFUSED, f"{watch.refusal()} (input: {label}). {self.allowances()}")
        return got, problem

    def _check_case(self, fn: Callable[..., Any], case: Case, forbidden: Sequence[Callable[..., Any]] = (),
                    hints: bool = True) -> Problem | None:
        """What is wrong with ``fn`` on ``case``, or ``None``; ``hints``: name a typical mistake it matches."""
        expected = self.reference(*copy.deepcopy(case.args))
        given = copy.deepcopy(case.args)
        got, problem = self._run(fn, given, case.label, forbidden)
        if problem is not None:
            if problem.outcome is Outcome.ERROR:
                hint = next((h for words, h in self.error_hints if words in problem.text), None)
                return problem.extended(None if hint is None else f"Hint: {hint}")
            return problem
        changed = _changed_argument(case.args, given, fn)
        if changed is not None:
            return Problem(Outcome.CHANGED_INPUT,
                           f"changed its input {changed} in place (input: {case.label}). Compute a new result "
                           "instead of writing into the arguments: the caller still needs them.")
        problem = _guarded_compare(expected, got, self.atol, self.rtol)
        if problem is None:
            return None
        problem = Problem(problem.outcome, f"{problem.text} (input: {case.label}).")
        for mistake in self.mistakes if hints else ():
            try:
                with np.errstate(all="ignore"):
                    typical = mistake.fn(*copy.deepcopy(case.args))
            except Exception:  # a typical mistake may crash where the learner's did not
                continue
            if _guarded_compare(typical, got, self.atol, self.rtol, equal_nan=True) is None:
                return problem.extended(f"Hint: {mistake.hint}")
        return problem


@dataclass(repr=False)
class BudgetChecker(Checker):
    """A ``Checker`` that, once the values are right, runs one large case (``big_case``) and measures the memory
    the answer holds at its peak (NumPy's and Python's allocations, through ``tracemalloc``): an answer above
    ``budget_bytes`` builds the large array the statement rules out, and ``budget_hint`` says which."""

    big_case: Case | None = None
    budget_bytes: int = 0
    budget_hint: str = ""
    calls_budget: int | None = None  # at most this many calls on the big case: a loop over its rows makes more
    calls_hint: str = ""

    def __call__(self, fn: Any) -> Verdict:
        verdict = super().__call__(fn)
        if not verdict or self.big_case is None:
            return verdict

        args = copy.deepcopy(self.big_case.args)
        if self.watch(_resolve(self.forbidden), fn, args).trusted:
            return verdict  # a typical mistake, or an answer built from the reference in the tests
        with traced_peak() as held:
            _, problem = self._run(fn, args, self.big_case.label, _resolve(self.forbidden))
        peak = held[0]
        if problem is not None:
            return Verdict(False, f"{self.name}: {problem.text}", outcome=problem.outcome)
        calls = self._last_watch.events
        if self.calls_budget is not None and calls > self.calls_budget:
            return Verdict(False, f"{self.name}: the values are right, but on {self.big_case.label} it made {calls} "
                                  f"calls, more than the {self.calls_budget} a vectorised answer needs: "
                                  f"{self.calls_hint}", outcome=Outcome.WRONG_VALUE)
        if self.budget_bytes and peak > self.budget_bytes:
            return Verdict(False, f"{self.name}: the values are right, but on {self.big_case.label} it held "
                                  f"{peak / 2**20:.1f} MiB at once, more than the {self.budget_bytes / 2**20:.0f} "
                                  f"MiB the computation needs: {self.budget_hint}", outcome=Outcome.WRONG_VALUE)
        return verdict


_NOT_ATTEMPTED = "not attempted"


@contextlib.contextmanager
def traced_peak() -> Iterator[list[int]]:
    """The most memory NumPy and Python held at once inside the ``with`` block, above what they held when it
    began (``tracemalloc``): the list it yields holds that peak in bytes once the block has run to its end."""
    import tracemalloc

    was_tracing = tracemalloc.is_tracing()
    if not was_tracing:
        tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    held = [0]
    try:
        yield held
        held[0] = tracemalloc.get_traced_memory()[1] - base
    finally:
        if not was_tracing:
            tracemalloc.stop()


def _recorded(fn: Callable[..., Any]) -> tuple[Callable[..., Any], dict[str, Any]]:
    """``fn`` wrapped so that what it returns is kept (under ``"answer"``) for a second look at it."""
    returned: dict[str, Any] = {}

    @functools.wraps(fn)
    def recorded(*args: Any) -> Any:
        returned["answer"] = fn(*args)
        return returned["answer"]

    return recorded, returned


# --- running the learner's function --------------------------------------------------------------

def _resolve(entries: Sequence[Callable[..., Any] | str]) -> list[Callable[..., Any]]:
    """The forbidden functions, dotted names looked up (those of a module that is not installed left out)."""
    found = []
    for entry in entries:
        if not isinstance(entry, str):
            found.append(entry)
            continue
        parts = entry.split(".")
        for cut in range(len(parts) - 1, 0, -1):  # the longest prefix that is a module, then attributes
            try:
                obj: Any = importlib.import_module(".".join(parts[:cut]))
            except ImportError:
                continue
            try:
                for name in parts[cut:]:
                    obj = getattr(obj, name)
            except AttributeError:
                break
            found.append(obj)
            break
    return found


def _qualified(f: Any) -> str:
    """``module.name`` of a function, as a learner would import it: ``attnbook.numpy.softmax.softmax``."""
    owner = getattr(f, "__self__", None)
    if isinstance(owner, np.ufunc):  # a ufunc's method: np.logaddexp.reduce
        return f"`numpy.{owner.__name__}.{f.__name__}`"
    module = getattr(f, "__module__", None) or getattr(owner, "__name__", None)
    name = getattr(f, "__qualname__", None) or getattr(f, "__name__", repr(f))
    return f"`{module}.{name}`" if module else f"`{name}`"


# What the policy refuses while the learner's function runs, by the module of the code called, and why.
_POLICY: tuple[tuple[str, str, str], ...] = (
    ("attnbook", "from the book's own package",
     "The package holds the chapters' implementations and the checkers' references, so an answer may call "
     "into `attnbook` only where the exercise allows it."),
    ("scipy", "from SciPy", "A library's ready-made function does what the exercise asks you to write."),
    ("sklearn", "from scikit-learn", "A library's ready-made function does what the exercise asks you to write."),
    ("transformers", "from Hugging Face transformers",
     "A ready-made model or function does what the exercise asks you to write."),
    ("torch.func", "from torch.func",
     "Its transforms (grad, jacfwd, jacrev, vjp, vmap) do for you what the exercise asks you to work out."),
    ("torch._functorch", "from torch.func",
     "Its transforms (grad, jacfwd, jacrev, vjp, vmap) do for you what the exercise asks you to work out."),
    ("torch.autograd.forward_ad", "forward-mode automatic differentiation",
     "It computes the derivatives the exercise asks you to derive."),
)
# Code in the package that is no answer to anything: imports on first use, and the harness's own plumbing
# (its timer's handler runs inside the learner's call).
_POLICY_EXEMPT = ("attnbook._lazy", "attnbook.exercises._harness")


def _policy(module: str) -> tuple[str, str] | None:
    for prefix, what, why in _POLICY:
        if module == prefix or module.startswith(prefix + "."):
            return what, why
    return None


def _class_codes(cls: type) -> set[Any]:
    """The code of every method (properties, static and class methods included) of ``cls`` and of its bases
    that the package defines."""
    codes = set()
    for klass in cls.__mro__:
        if not getattr(klass, "__module__", "").startswith("attnbook"):
            continue
        for value in vars(klass).values():
            for f in (value, getattr(value, "__func__", None), getattr(value, "fget", None),
                      getattr(value, "fset", None)):
                code = getattr(f, "__code__", None)
                if code is not None:
                    codes.add(code)
    return codes


def _allowed_codes(entries: Sequence[Any]) -> tuple[set[Any], set[int]]:
    """The code objects (and the ids of builtins) of what an exercise allows: functions, methods, classes."""
    codes: set[Any] = set()
    builtins: set[int] = set()
    for entry in entries:
        if isinstance(entry, type):
            codes |= _class_codes(entry)
            continue
        f = inspect.unwrap(getattr(entry, "__func__", entry))
        code = getattr(f, "__code__", None)
        if code is not None:
            codes.add(code)
        else:
            builtins.add(id(entry))
    return codes, builtins


def _given_codes(args: Any) -> set[Any]:
    """The package's code reachable from the arguments a check passes: a step function, a model and its
    submodules, an object and its methods. The learner's function may call all of it."""
    codes: set[Any] = set()
    seen: set[int] = set()

    def visit(x: Any, depth: int) -> None:
        if isinstance(x, np.ndarray) and type(x) is not np.ndarray:
            codes.update(_class_codes(type(x)))  # an array subclass of the package's (one that notes reads)
        if depth > 6 or id(x) in seen or x is None or isinstance(x, (str, bytes, int, float, complex, np.ndarray)):
            return
        seen.add(id(x))
        if _is_tensor(x) or isinstance(x, np.generic):
            codes.update(_class_codes(type(x)))  # a tensor subclass of the package's (float16 only, say)
            return
        if isinstance(x, (list, tuple, set, frozenset)):
            items = list(x)
            for item in items if len(items) <= 64 else items[:8]:
                visit(item, depth + 1)
            return
        if isinstance(x, dict):
            for item in list(x.values())[:256]:
                visit(item, depth + 1)
            return
        if isinstance(x, type):
            codes.update(_class_codes(x))
            return
        partial_func = getattr(x, "func", None)
        if callable(partial_func) and hasattr(x, "args"):  # functools.partial
            visit(partial_func, depth + 1)
            visit(x.args, depth + 1)
            visit(getattr(x, "keywords", None) or {}, depth + 1)
        code = getattr(inspect.unwrap(getattr(x, "__func__", x)), "__code__", None) if callable(x) else None
        if code is not None:
            codes.add(code)
            visit(getattr(x, "__self__", None), depth + 1)
            return
        if not type(x).__module__.startswith("attnbook"):
            return
        codes.update(_class_codes(type(x)))
        for item in list(getattr(x, "__dict__", {}).values())[:64]:  # its recorders, hooks and parts
            visit(item, depth + 1)
        modules = getattr(x, "modules", None)
        if callable(modules):
            try:
                for m in modules():
                    codes.update(_class_codes(type(m)))
                    for hooks in (getattr(m, "_forward_hooks", {}), getattr(m, "_forward_pre_hooks", {})):
                        visit(list(hooks.values()), depth + 1)
            except Exception:  # not a torch module after all
                pass

    visit(args, 0)
    return codes


class _Watch:
    """Notes the first call the learner's function makes that the policy refuses (see the module docstring).

    A profile hook (``sys.setprofile``) sees the start of every Python frame and every call of a builtin,
    so an alias, a method or a call made deep inside the learner's helpers is seen all the same. It is
    set in the thread that runs the learner's function, for the duration of that call only. Inside a
    frame of something allowed (the exercise's allowances, what the check passes in) nothing is counted.
    ``trusted``: the answer is one of the checker's own typical mistakes, run as the check runs it.
    """

    def __init__(self, forbidden: Sequence[Callable[..., Any]], reference: Callable[..., Any],
                 allowed: Sequence[Any] = (), args: Any = (), trusted: bool = False, numpy_only: bool = False,
                 real_only: bool = False) -> None:
        self.codes = {getattr(inspect.unwrap(f), "__code__", None): f for f in forbidden}
        self.codes.pop(None, None)
        self.builtins = {id(f): f for f in forbidden if not hasattr(inspect.unwrap(f), "__code__")}
        # A builtin method of an object (a ufunc's ``reduce``): each attribute access makes a new bound method,
        # so it is known by its object and its name.
        self.bound = {(id(f.__self__), f.__name__): f for f in forbidden
                      if not hasattr(inspect.unwrap(f), "__code__") and _bound_to_object(f)}
        self.numpy_only = numpy_only
        self.real_only = real_only
        self.reference = getattr(inspect.unwrap(reference), "__code__", None)
        self.allowed, self.allowed_builtins = _allowed_codes(allowed)
        self.explicitly_allowed = frozenset(self.allowed)
        self.allowed |= _given_codes(args)
        self.trusted = trusted
        self.inside_allowed: set[int] = set()
        self.called: tuple[str, str, str] | None = None  # (the call, what it is, why it is refused)
        self.general = False  # the refusal noted is the general one of a NumPy exercise (see ``_note``)
        self.events = 0  # the calls the answer made itself (not those inside something allowed)

    def wrap(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        if self.trusted:
            return fn

        def watched(*args: Any) -> Any:
            previous = sys.getprofile()
            sys.setprofile(self._hook)
            try:
                return fn(*args)
            finally:
                sys.setprofile(previous)

        return watched

    def refusal(self) -> str:
        """The sentence that names the refused call and says why (without the input)."""
        assert self.called is not None
        named, what, why = self.called
        return f"calls {named}, {what}. {why}" if named else f"{what}. {why}"

    def _note(self, named: str, what: str, why: str, general: bool = False) -> None:
        """Keep the first refused call; a ``general`` refusal (any PyTorch in a NumPy exercise) gives way to a
        later one that names what the exercise refuses in particular (``torch.nn.functional.conv1d``)."""
        if self.called is None or (self.general and not general):
            self.called = (named, what, why)
            self.general = general

    def _settled(self) -> bool:
        return self.called is not None and not self.general

    def _hook(self, frame: Any, event: str, arg: Any) -> None:
        if not self.inside_allowed and event in ("call", "c_call"):
            self.events += 1
            if self.real_only and not self._settled():
                held = _complex_local(frame)
                if held is not None:
                    self._note("", f"computes with complex numbers (`{held}` in {_frame_name(frame)})", _COMPLEX)
                    return
        if event == "call":
            if self.inside_allowed or self._settled():
                return
            code = frame.f_code
            if code in self.codes and code not in self.explicitly_allowed:  # even on an object passed in
                self._note(*_forbidden_reason(self.codes[code]))
                return
            if code in self.allowed:
                self.inside_allowed.add(id(frame))
                return
            if code is self.reference:
                self._note(_frame_name(frame), "the checker's own reference answer",
                           "An answer may not call the checker's code: write the function yourself.")
                return
            if code.co_name == "<module>":  # a module imported on first use: no call of anything
                return
            module = frame.f_globals.get("__name__") or ""
            if module.startswith(_POLICY_EXEMPT):
                return
            refused = _policy(module)
            if refused is not None:
                self._note(_frame_name(frame), *refused)
                return
            caller = frame.f_back
            if caller is None or _is_torch_module(caller.f_globals.get("__name__") or ""):
                return  # PyTorch's own code calling its own parts
            if code is _thread_start_code() or module.startswith(_THREAD_MODULES):
                self._note(_frame_name(frame), *_THREADS)
            elif _is_torch_module(module):
                if self.numpy_only:
                    self._note(_frame_name(frame), *_NUMPY_ONLY, general=True)
                elif module.startswith(_TORCH_PRIVATE_PYTHON):
                    self._note(_frame_name(frame), *_TORCH_PRIVATE)
        elif event == "return":
            self.inside_allowed.discard(id(frame))
        elif event == "c_call" and not self.inside_allowed and not self._settled():
            if id(arg) in self.builtins or (self.bound and _bound_key(arg) in self.bound):
                if id(arg) not in self.allowed_builtins:
                    self._note(*_forbidden_reason(self.builtins.get(id(arg)) or self.bound[_bound_key(arg)]))
                return
            if _is_torch_module(frame.f_globals.get("__name__") or ""):
                return  # PyTorch's own code calling its own parts
            if id(arg) in self.allowed_builtins:
                return
            if id(arg) in _thread_start_builtins():
                self._note(_builtin_name(arg), *_THREADS)
            elif _is_torch_builtin(arg):
                if self.numpy_only:
                    self._note(_builtin_name(arg), *_NUMPY_ONLY, general=True)
                elif _is_private_torch_builtin(arg):
                    self._note(_builtin_name(arg), *_TORCH_PRIVATE)


# Beyond the modules of ``_POLICY``, three refusals that depend on who makes the call: only a call made by the
# answer's own code (not by PyTorch's code calling its own parts) is refused.
_THREADS = ("work handed to another thread",
            "The check watches the calls your function makes in its own thread only: compute the answer there.")
_NUMPY_ONLY = ("from PyTorch",
               "This exercise is written in NumPy: its statement and its checks (the memory an answer holds "
               "included) are about NumPy's array operations.")
_TORCH_PRIVATE = ("a private or operator-level entry point of PyTorch",
                  "Private or operator-level entry points of PyTorch (`torch.ops`, `torch._C`, names that start "
                  "with `_`) do what the public functions the exercise refuses do.")
_COMPLEX = ("The exercise asks for the derivative worked out by hand: a complex step (or any complex arithmetic) "
            "makes the computer find it.")
# PyTorch's Python packages that hold its operators and their decompositions, not a public API.
_TORCH_PRIVATE_PYTHON = ("torch._ops", "torch._refs", "torch._prims", "torch._decomp", "torch._prims_common",
                         "torch._higher_order_ops")
# Threads are started through these, whatever library starts them (``concurrent.futures``, ``multiprocessing``'s
# thread pools, ``threading``).
_THREAD_BUILTIN_NAMES = ("start_new_thread", "start_joinable_thread", "start_new")
# Pools hand a task to a thread or a process they may have started before the call: any use of them is refused.
_THREAD_MODULES = ("concurrent.futures", "multiprocessing")


def _complex_local(frame: Any) -> str | None:
    """The name of an argument or local variable of ``frame`` that holds complex numbers, or ``None``."""
    for name, value in frame.f_locals.items():
        if isinstance(value, (complex, np.complexfloating)) or (
                isinstance(value, np.ndarray) and value.dtype.kind == "c"):
            return name
    return None


def _builtin_name(f: Any) -> str:
    """A builtin as it is called: ``torch.from_numpy``, ``torch.Tensor.softmax``, ``torch._C._nn.linear``."""
    name = getattr(f, "__name__", repr(f))
    module = getattr(f, "__module__", None)
    if module:
        return f"`{module}.{name}`"
    owner = getattr(f, "__self__", None)
    if inspect.ismodule(owner):
        return f"`{owner.__name__}.{name}`"
    kind = owner if isinstance(owner, type) else type(owner)
    return f"`{kind.__module__}.{kind.__qualname__}.{name}`"


def _is_torch_module(module: str) -> bool:
    return module == "torch" or module.startswith(("torch.", "functorch"))


@functools.cache
def _thread_start_code() -> Any:
    return threading.Thread.start.__code__


@functools.cache
def _thread_start_builtins() -> frozenset[int]:
    import _thread

    return frozenset(id(getattr(_thread, n)) for n in _THREAD_BUILTIN_NAMES if hasattr(_thread, n))


def _bound_to_object(f: Any) -> bool:
    """Whether ``f`` is a builtin method bound to an object other than a module (``np.logaddexp.reduce``)."""
    owner = getattr(f, "__self__", None)
    return owner is not None and not inspect.ismodule(owner) and not isinstance(owner, type)


def _bound_key(f: Any) -> tuple[int, str] | None:
    owner = getattr(f, "__self__", None)
    return None if owner is None else (id(owner), getattr(f, "__name__", ""))


def _is_torch_builtin(f: Any) -> bool:
    """A builtin of PyTorch: a function of one of its modules, or a method of one of its objects (a tensor)."""
    module = getattr(f, "__module__", None) or ""
    if _is_torch_module(module):
        return True
    owner = getattr(f, "__self__", None)
    if owner is None or inspect.ismodule(owner):
        return _is_torch_module(getattr(owner, "__name__", "") or "")
    kind = owner if isinstance(owner, type) else type(owner)
    return _is_torch_module(getattr(kind, "__module__", "") or "")


@functools.cache
def _public_torch_builtins() -> frozenset[int]:
    """The builtins PyTorch offers under a public name, in its public namespaces (``torch.nn.functional.linear``
    is ``torch._C._nn.linear``, public; ``torch._C._nn.cross_entropy_loss`` is not offered there)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return frozenset()
    found: set[int] = set()
    for name in ("torch", "torch.nn.functional", "torch.linalg", "torch.special", "torch.fft", "torch.nn.init",
                 "torch.autograd", "torch.random", "torch.sparse", "torch.nested", "torch.cuda", "torch.testing"):
        namespace = sys.modules.get(name)
        for key, value in vars(namespace).items() if namespace is not None else ():
            if not key.startswith("_") and callable(value):
                found.add(id(value))
    return frozenset(found)


def _is_private_torch_builtin(f: Any) -> bool:
    """A builtin of PyTorch reached through a private name: its own name starts with ``_`` (``torch._softmax``),
    it belongs to a private object (autograd's ``_execution_engine``), or it lives in a private module
    (``torch._C._nn``) and no public namespace offers it."""
    name = getattr(f, "__name__", "") or ""
    if name.startswith("_") and not (name.startswith("__") and name.endswith("__")):
        return True
    owner = getattr(f, "__self__", None)
    if owner is not None and not inspect.ismodule(owner):
        kind = owner if isinstance(owner, type) else type(owner)
        if kind.__name__.startswith("_") and _is_torch_module(getattr(kind, "__module__", "") or ""):
            return True
    module = getattr(f, "__module__", None) or getattr(owner, "__name__", None) or ""
    private_module = any(part.startswith("_") for part in module.split(".")[1:])
    return private_module and id(f) not in _public_torch_builtins()


def _numpy_chapter(frame: Any) -> bool:
    """Whether the checker being built comes from a checker module of chapters 1 to 11 (Part I, in NumPy)."""
    while frame is not None:
        module = frame.f_globals.get("__name__") or ""
        prefix = "attnbook.exercises.ch"
        if module.startswith(prefix) and module[len(prefix):].isdigit():
            return int(module[len(prefix):]) <= 11
        frame = frame.f_back
    return False


def _frame_name(frame: Any) -> str:
    module = frame.f_globals.get("__name__") or ""
    name = getattr(frame.f_code, "co_qualname", frame.f_code.co_name)
    owner = frame.f_locals.get("self") if frame.f_code.co_argcount else None
    if "<locals>" in name and owner is not None:  # a method a dataclass wrote: name it by its class
        cls = type(owner)
        return f"`{cls.__module__}.{cls.__qualname__}.{frame.f_code.co_name}`"
    return f"`{module}.{name}`" if module else f"`{name}`"


def _forbidden_reason(f: Any) -> tuple[str, str, str]:
    named = _qualified(f)
    whose = "the package's own" if named.startswith("`attnbook") else "a library's ready-made"
    return (named, f"{whose} answer to this exercise",
            "Write it yourself from the operations the chapter builds it from.")


class _TimedOut(BaseException):
    """Raised inside the learner's function when its time is up. A ``BaseException``, so that an
    ``except Exception`` in the learner's code does not swallow it."""


def _call_with_time_limit(fn: Callable[..., Any], args: tuple[Any, ...], limit: float) -> Any:
    """``fn(*args)``, or ``_TimedOut`` after ``limit`` seconds.

    In the main thread on a system with ``SIGALRM`` (Linux, macOS; a Jupyter kernel runs cells there)
    an interval timer interrupts the function itself. Elsewhere (Windows, another thread) the function
    runs in a daemon thread that is abandoned if it overruns: Python cannot stop a thread.
    """
    if hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread():
        return _call_with_alarm(fn, args, limit)
    return _call_in_thread(fn, args, limit)


def _call_with_alarm(fn: Callable[..., Any], args: tuple[Any, ...], limit: float) -> Any:
    armed = [True]

    def on_alarm(signum: int, frame: Any) -> None:
        if armed[0]:
            raise _TimedOut

    previous = signal.signal(signal.SIGALRM, on_alarm)
    # The timer repeats, so code that catches the first interruption with a bare `except:` gets another.
    signal.setitimer(signal.ITIMER_REAL, limit, 0.25)
    try:
        return fn(*args)
    finally:
        while True:  # an alarm arriving during the clean-up must not leave the timer running
            try:
                armed[0] = False
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, previous)
                break
            except _TimedOut:
                continue


def _call_in_thread(fn: Callable[..., Any], args: tuple[Any, ...], limit: float) -> Any:
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            with np.errstate(all="ignore"):
                outcome["value"] = fn(*args)
        except BaseException as exc:  # SystemExit included: carried back to the checker's thread
            outcome["error"] = exc

    worker = threading.Thread(target=run, daemon=True, name="attnbook-checker")
    worker.start()
    worker.join(limit)
    if worker.is_alive():
        raise _TimedOut
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def _raised_by_learner(exc: BaseException, fn: Callable[..., Any]) -> bool:
    """Whether a ``NotImplementedError`` comes from a ``raise`` in the learner's own code (the exercise's
    stub) rather than from a library it called (PyTorch raises it for operations it lacks)."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is None:
        return False
    filename = tb.tb_frame.f_code.co_filename
    code = getattr(inspect.unwrap(fn), "__code__", None)
    if code is not None and filename != code.co_filename:
        return False  # raised in another file: a library's
    line = linecache.getline(filename, tb.tb_lineno).strip()
    if line:
        return line.startswith("raise")
    return code is not None and tb.tb_frame.f_code is code  # no source to read: trust the frame


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {_short(str(exc), 200)}"


# --- inputs changed in place ----------------------------------------------------------------------

def _changed_argument(original: tuple[Any, ...], given: tuple[Any, ...], fn: Callable[..., Any]) -> str | None:
    """The name (or position) of the first argument the learner's function changed, or ``None``."""
    for i, (a, b) in enumerate(zip(original, given, strict=True)):
        if not _same(a, b):
            try:
                names = list(inspect.signature(fn).parameters)
            except (TypeError, ValueError):
                names = []
            return f"`{names[i]}`" if i < len(names) else f"number {i + 1}"
    return None


def _same(a: Any, b: Any) -> bool:
    """Whether ``b`` still equals ``a``: same type, shape, dtype and values (NaN equals NaN)."""
    if _is_tensor(a):
        if not _is_tensor(b) or a.shape != b.shape or a.dtype != b.dtype:
            return False
        a, b = a.detach().cpu(), b.detach().cpu()
        if a.is_floating_point():
            return bool(((a == b) | (a.isnan() & b.isnan())).all())
        return bool(a.equal(b))
    if isinstance(a, np.ndarray):
        return (isinstance(b, np.ndarray) and a.shape == b.shape and a.dtype == b.dtype
                and bool(np.array_equal(a, b, equal_nan=a.dtype.kind in "fc")))
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    try:
        return bool(a == b) or (a != a and b != b)  # NaN equals NaN here
    except Exception:
        return a is b


# --- comparing answers ------------------------------------------------------------------------------

def _is_tensor(x: Any) -> bool:
    """A torch tensor, recognised without importing torch (NumPy chapters never load it)."""
    return type(x).__module__.startswith("torch") and hasattr(x, "detach") and hasattr(x, "is_meta")


def _short(text: str, limit: int = 80) -> str:
    """``text`` cut to ``limit`` characters, so a huge answer cannot bury the verdict."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _show_int(n: int) -> str:
    digits = str(n)
    return digits if len(digits) <= 30 else f"{digits[:12]}…{digits[-6:]} ({len(digits.lstrip('-'))} digits)"


def _describe_value(x: Any) -> str:
    """A short description of what came back: its type and the start of its repr."""
    return f"{type(x).__name__} {_short(repr(x))}"


class _Rejected(Exception):
    """An answer of a kind no checker accepts; the message says what arrived."""


def _values(x: Any) -> np.ndarray:
    """The numbers in an answer, as a NumPy array of booleans, integers or floats (see module docstring)."""
    if _is_tensor(x):
        if x.is_meta or x.device.type == "meta":
            raise _Rejected(f"returned a tensor on the meta device, shape {tuple(x.shape)}: it has a shape but "
                            "no values; compute on a real device (the default, the CPU)")
        if x.is_complex():
            raise _Rejected(f"returned a complex tensor (dtype {x.dtype}); expected real numbers")
        torch = sys.modules["torch"]
        x = x.detach()
        if x.layout != torch.strided:
            x = x.to_dense()  # a sparse answer counts by its values
        x = x.cpu()
        if x.is_floating_point():
            x = x.double()  # bfloat16 and float8 have no NumPy dtype
        elif x.dtype != torch.bool:
            x = x.long()
        return x.numpy()
    if isinstance(x, (str, bytes)):
        raise _Rejected(f"returned {type(x).__name__} {_short(repr(x))}, expected a number or an array of "
                        "numbers, not text (return 0.5 rather than '0.5')")
    if isinstance(x, bool):
        return np.asarray(x)
    if isinstance(x, int):
        if abs(x) >= 2**63:
            raise _Rejected(f"returned the integer {_show_int(x)}, beyond the 64-bit range of any answer here")
        return np.asarray(x, dtype=np.int64)
    if isinstance(x, complex):
        raise _Rejected(f"returned the complex number {x!r}; expected a real number")
    if isinstance(x, (list, tuple)):
        items = [_values(item) for item in x]
        shapes = {item.shape for item in items}
        if len(shapes) > 1:
            raise _Rejected(f"returned a {type(x).__name__} of {len(x)} items of different shapes "
                            f"({', '.join(str(item.shape) for item in items[:4])}{', …' if len(items) > 4 else ''}); "
                            "expected one array (did you return more than the answer, such as (output, weights)?)")
        return np.asarray(items) if items else np.zeros(0)
    arr = np.asarray(x)  # NumPy arrays and scalars, and anything that converts itself
    kind = arr.dtype.kind
    if kind in "US":
        raise _Rejected(f"returned text {_describe_value(x)}, expected a number or an array of numbers, "
                        "not strings")
    if kind == "c":
        raise _Rejected(f"returned complex numbers (dtype {arr.dtype}); expected real numbers")
    if kind not in "biuf":
        raise _Rejected(f"returned {_describe_value(x)}; expected a number or an array of numbers")
    return arr


def _guarded_compare(expected: Any, got: Any, atol: float, rtol: float, equal_nan: bool = False
                     ) -> Problem | None:
    """``_compare``, turning any failure to compare into a sentence: the comparison never raises."""
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            return _compare(expected, got, atol, rtol, equal_nan)
    except _Rejected as rejected:
        return Problem(Outcome.WRONG_FORM, str(rejected))
    except Exception as exc:
        return Problem(Outcome.WRONG_FORM, f"returned {_describe_value(got)}, which cannot be compared with the "
                                           f"answer ({_describe(exc)})")


def _fmt(x: np.ndarray, digits: int = 4) -> str:
    """Values for a message, on one line: integers and booleans as such, a float to ``digits`` significant
    digits, an array of floats to ``digits`` decimals."""
    if x.ndim == 0:
        v = x.item()
        return _show_int(v) if isinstance(v, int) and not isinstance(v, bool) else (
            str(v) if isinstance(v, bool) else f"{v:.{digits}g}")
    if x.dtype.kind == "f":
        return _short(str(np.round(x, digits).tolist()), 300)
    return _short(str(x.tolist()), 300)


def _fmt_pair(exp: np.ndarray, got: np.ndarray) -> tuple[str, str]:
    """``expected`` and ``got`` for a message, with enough significant digits (4 at least, 17 at most) that
    two different values never print the same."""
    for digits in (4, 6, 8, 10, 12, 17):
        shown = _fmt(exp, digits), _fmt(got, digits)
        if shown[0] != shown[1]:
            return shown
    return shown


def _single_precision(x: Any) -> bool:
    """Whether ``x`` holds floats of 32 bits or fewer (float32, float16, bfloat16): a tensor, an array, a scalar."""
    if _is_tensor(x):
        return x.is_floating_point() and x.element_size() <= 4
    dtype = getattr(x, "dtype", None)
    return isinstance(dtype, np.dtype) and dtype.kind == "f" and dtype.itemsize <= 4


def _passed_through_float32(exp: np.ndarray, got: np.ndarray) -> bool:
    """Whether a float64 answer was computed in float32 and converted back: each of its values is a float32 number,
    while the expected ones are not (a value of float64 falls on float32's grid by chance about once in 5e8)."""
    if got.dtype != np.float64 or exp.dtype.kind != "f" or got.size == 0 or not np.isfinite(got).all():
        return False
    on_grid = got.astype(np.float32).astype(np.float64) == got
    return bool(on_grid.all()) and not bool((exp.astype(np.float32).astype(np.float64) == exp).all())


def _tolerance_note(exp: np.ndarray, got: np.ndarray, atol: float, rtol: float, single: bool = False) -> str:
    """For a near miss of real numbers, the largest difference against what the check allows there; ``single``:
    the answer or the expected one (which has the inputs' dtype) is in float32 or narrower, so that a relative
    error near 1e-7 is named as float32's rounding (never said of a computation in float64)."""
    if exp.dtype.kind != "f" and got.dtype.kind != "f":
        return ""
    e, g = exp.astype(np.float64), got.astype(np.float64)
    with np.errstate(all="ignore"):
        diff = np.where(e == g, 0.0, np.abs(g - e))
        allowed = atol + rtol * np.abs(e)
    if not np.isfinite(diff).all() or diff.size == 0:
        return ""
    worst = int(np.argmax(diff - allowed))
    d, ok = float(diff.reshape(-1)[worst]), float(allowed.reshape(-1)[worst])
    if d > 1000 * ok:
        return ""  # plainly wrong: the values say enough
    scale = float(np.abs(e).reshape(-1)[worst])
    note = f"; the difference, {d:.3g}, is above the {ok:.3g} this check allows there"
    if single and scale > 0 and 1e-8 < d / scale < 1e-5:
        note += (" (a relative error near 1e-7 is float32's rounding: compute in the inputs' dtype, float64 "
                 "where they are float64)")
    return note


def _list_difference(exp: np.ndarray, got: np.ndarray, short: int = 12) -> str:
    """For two 1-D answers of different lengths (a list of ids, a list of positions), where they part: the
    first index at which they differ, or where the shorter one ends, and both lists when they are short."""
    if exp.ndim != 1 or got.ndim != 1:
        return ""
    n = min(len(exp), len(got))
    if exp.dtype.kind == "f" or got.dtype.kind == "f":
        same = np.isclose(got[:n].astype(np.float64), exp[:n].astype(np.float64), rtol=1e-6, atol=1e-8)
    else:
        same = got[:n] == exp[:n]
    i = int(np.argmin(same)) if n and not same.all() else n
    if i < n:
        shown_exp, shown_got = _fmt_pair(np.asarray(exp[i]), np.asarray(got[i]))
        where = f"first difference at index {i}: expected {shown_exp}, got {shown_got}"
    else:
        longer, rest = ("the answer", got) if len(got) > n else ("the expected list", exp)
        where = f"the first {n} entries agree, and {longer} goes on with {_fmt(np.asarray(rest[n]))}"
    lists = (f"; expected {_fmt(exp)}, got {_fmt(got)}" if max(len(exp), len(got)) <= short else "")
    return f" ({where}){lists}"


def _compare(expected: Any, got: Any, atol: float, rtol: float, equal_nan: bool = False) -> Problem | None:
    """``None`` when ``got`` matches ``expected``, else what kind of difference, and a sentence saying how."""
    if got is None:
        return Problem(Outcome.WRONG_FORM, "returned None (is a `return` statement missing?)")
    if isinstance(expected, str):
        if isinstance(got, str) and got == expected:
            return None
        if isinstance(got, str):
            return Problem(Outcome.WRONG_VALUE, f"returned {_short(repr(got))}, expected {expected!r}")
        return Problem(Outcome.WRONG_FORM, f"returned {_describe_value(got)}, expected the string {expected!r}")
    exp = _values(expected)
    if isinstance(got, (int, np.integer)) and not isinstance(got, bool) and abs(int(got)) >= 2**63:
        # Beyond int64: compare as Python integers, and show the integer as it is, not wrapped around.
        if exp.ndim:
            return Problem(Outcome.WRONG_SHAPE,
                           f"returned the integer {_show_int(int(got))}, expected an array of shape {exp.shape}")
        try:
            close = math.isclose(float(got), float(exp), rel_tol=rtol, abs_tol=atol)
        except OverflowError:
            close = False
        if exp.dtype.kind in "biu":
            close = int(got) == int(exp)
        return None if close else Problem(Outcome.WRONG_VALUE,
                                          f"wrong value: expected {_fmt(exp)}, got {_show_int(int(got))}")
    got_arr = _values(got)
    if got_arr.shape != exp.shape:
        extra = (f" (it is a tuple of {len(got)} items: return only the answer)"
                 if isinstance(got, tuple) and got_arr.ndim else "")
        return Problem(Outcome.WRONG_SHAPE,
                       f"returned shape {got_arr.shape}, expected shape {exp.shape}{_list_difference(exp, got_arr)}"
                       f"{extra}"
                       if exp.ndim
                       else f"returned an array of shape {got_arr.shape}, expected a single number{extra}")
    exact = exp.dtype.kind in "biu"  # counts, ids and masks: no tolerance
    if got_arr.dtype.kind == "f":
        got_nan = np.isnan(got_arr)
        if got_nan.any() and not np.isnan(exp.astype(np.float64)).any():
            return Problem(Outcome.WRONG_VALUE, f"returned NaN: {_fmt(got_arr)}")
    if exact:
        if np.array_equal(got_arr, exp):
            return None
    else:
        exp_f, got_f = exp.astype(np.float64), got_arr.astype(np.float64)
        if np.allclose(got_f, exp_f, atol=atol, rtol=rtol, equal_nan=equal_nan):
            return None
    single = _single_precision(got) or _single_precision(expected) or _passed_through_float32(exp, got_arr)
    note = "" if exact else _tolerance_note(exp, got_arr, atol, rtol, single)
    if exp.size > 12:
        # A big array in full would bury the message: point at the worst entry instead.
        got_f, exp_f = got_arr.astype(np.float64), exp.astype(np.float64)
        diff = np.abs(got_f - exp_f)
        # NaN where one is NaN (the worst), or where both are the same infinity (no difference at all)
        diff = np.where(got_f == exp_f, 0.0, np.where(np.isnan(diff), np.inf, diff))
        worst = np.unravel_index(int(np.argmax(diff)), exp.shape)
        where = tuple(int(i) for i in worst)
        shown_exp, shown_got = _fmt_pair(np.asarray(exp[worst]), np.asarray(got_arr[worst]))
        return Problem(Outcome.WRONG_VALUE, f"wrong value at index {where}: expected {shown_exp}, got {shown_got}"
                                            f"{note}")
    if exp.dtype.kind == "b" and got_arr.dtype.kind != "b":
        got_arr = got_arr.astype(bool) if np.isin(got_arr, (0, 1)).all() else got_arr
    shown_exp, shown_got = _fmt_pair(exp, got_arr)
    return Problem(Outcome.WRONG_VALUE, f"wrong value: expected {shown_exp}, got {shown_got}{note}")


def chapter_checkers() -> list[tuple[str, Checker, bool]]:
    """Every checker of the chapters' modules (``attnbook.exercises.chNN``), once each, in chapter order:
    ``(\"chNN.name\", checker, private)``; ``private`` for one a module keeps under a leading underscore (a
    capstone's checks of its parts). A module that imports another chapter's checker does not list it again."""
    import pkgutil

    import attnbook.exercises as exercises

    found: list[tuple[str, Checker]] = []
    private: set[int] = set()
    for info in sorted(pkgutil.iter_modules(exercises.__path__), key=lambda m: m.name):
        if not info.name.startswith("ch"):
            continue
        module = importlib.import_module(f"attnbook.exercises.{info.name}")
        seen = {id(c) for _, c in found}
        found += [(f"{info.name}.{c.name}", c) for c in vars(module).values()
                  if isinstance(c, Checker) and id(c) not in seen]
        private |= {id(c) for key, c in vars(module).items() if isinstance(c, Checker) and key.startswith("_")}
    return [(name, c, id(c) in private) for name, c in found]
