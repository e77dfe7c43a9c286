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

An exercise asks the learner to write something, so an answer that only calls the package's own
implementation of it proves nothing: a checker's ``forbidden`` functions are watched while the
learner's function runs (a profile hook sees every call, whatever name or alias it goes through), and an
answer that calls one is refused with a sentence naming it. Calls made inside the checker's own
``reference`` are not counted, so the reference must not itself be one of the forbidden functions.
"""

from __future__ import annotations

import copy
import importlib
import inspect
import linecache
import math
import signal
import sys
import threading
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

TIME_LIMIT = 20.0  # seconds per call of the learner's function: generous for every exercise, even under load


@dataclass(frozen=True)
class Verdict:
    """The outcome of a check. Shows as its message in a notebook; true when it passed."""

    passed: bool
    message: str
    attempted: bool = True

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
    hints; ``time_limit`` bounds each call, in seconds; ``forbidden`` lists the package's own
    implementations of what the exercise asks for (Python functions, or builtins such as a torch
    function): an answer that calls any of them is refused. An entry may also be a dotted name
    (``"torch.nn.functional.softmax"``), looked up when a check runs, so that a NumPy chapter's checker can
    refuse PyTorch's function without importing PyTorch itself; a name whose module is not installed is
    skipped (nobody can call it).
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

    def __post_init__(self) -> None:
        self.__doc__ = self.doc  # an instance attribute: help(), inspect.getdoc() and `?` read it
        if any(f is self.reference for f in self.forbidden):
            raise ValueError(f"checker {self.name}: the reference cannot be one of its forbidden functions; "
                             "wrap it in a function of the checker's module")

    def __repr__(self) -> str:
        contract = " ".join(self.doc.replace("``", "").split())  # one line, without the reST markup
        return f"<checker for {self.name}: {contract}>"

    def __call__(self, fn: Any) -> Verdict:
        if not callable(fn):
            return Verdict(False, f"{self.name}: expected a function, got {type(fn).__name__}.")
        forbidden = _resolve(self.forbidden)
        own = next((f for f in forbidden if inspect.unwrap(fn) is f), None)
        if own is not None:
            return Verdict(False, f"{self.name}: this is the package's own {_qualified(own)}, not an answer. "
                                  "Write the function yourself.")
        try:
            for case in self.cases:
                problem = self._check_case(fn, case, forbidden)
                if problem is None:
                    continue
                if problem == _NOT_ATTEMPTED:
                    return Verdict(
                        False,
                        f"{self.name}: not attempted yet (it raises NotImplementedError). "
                        "Replace the `raise` line with your code and run the cell again.",
                        attempted=False,
                    )
                return Verdict(False, f"{self.name}: {problem}")
        except Exception as exc:  # a bug of the checker itself: still a verdict, never a crash
            return Verdict(False, f"{self.name}: the checker could not judge this answer "
                                  f"({type(exc).__name__}: {_short(str(exc))}).")
        return Verdict(True, f"{self.name}: all {len(self.cases)} checks passed.")

    def _check_case(self, fn: Callable[..., Any], case: Case, forbidden: Sequence[Callable[..., Any]] = ()
                    ) -> str | None:
        expected = self.reference(*copy.deepcopy(case.args))
        given = copy.deepcopy(case.args)
        limit = TIME_LIMIT if self.time_limit is None else self.time_limit
        watch = _Watch(forbidden, self.reference)
        try:
            # NumPy's own warnings (division by zero, ...) would repeat what the verdict says.
            with np.errstate(all="ignore"):
                got = _call_with_time_limit(watch.wrap(fn), given, limit)
        except NotImplementedError as exc:
            if _raised_by_learner(exc, fn):
                return _NOT_ATTEMPTED
            return f"raised {_describe(exc)} (input: {case.label})."
        except _TimedOut:
            return (f"did not return within {limit:g} s (input: {case.label}); look for a loop that never "
                    "ends.")
        except SystemExit:
            return (f"called sys.exit() (input: {case.label}); return the answer instead of stopping "
                    "Python.")
        except Exception as exc:  # the learner's bug, reported rather than raised
            return f"raised {_describe(exc)} (input: {case.label})."
        if watch.called is not None:
            named = _qualified(watch.called)
            whose = "the package's own" if named.startswith("`attnbook") else "a library's ready-made"
            return (f"calls {named}, {whose} answer to this exercise (input: "
                    f"{case.label}). Write it yourself from the operations the chapter builds it from.")
        changed = _changed_argument(case.args, given, fn)
        if changed is not None:
            return (f"changed its input {changed} in place (input: {case.label}). Compute a new result "
                    "instead of writing into the arguments: the caller still needs them.")
        problem = _guarded_compare(expected, got, self.atol, self.rtol)
        if problem is None:
            return None
        message = f"{problem} (input: {case.label})."
        for mistake in self.mistakes:
            try:
                with np.errstate(all="ignore"):
                    typical = mistake.fn(*copy.deepcopy(case.args))
            except Exception:  # a typical mistake may crash where the learner's did not
                continue
            if _guarded_compare(typical, got, self.atol, self.rtol, equal_nan=True) is None:
                return f"{message} Hint: {mistake.hint}"
        return message


_NOT_ATTEMPTED = "not attempted"


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
    module = getattr(f, "__module__", None) or getattr(getattr(f, "__self__", None), "__name__", None)
    name = getattr(f, "__qualname__", None) or getattr(f, "__name__", repr(f))
    return f"`{module}.{name}`" if module else f"`{name}`"


class _Watch:
    """Notes the first call of a forbidden function made by the learner's function (not by the reference).

    A profile hook (``sys.setprofile``) sees the start of every Python frame and every call of a builtin,
    so an alias, a method or a call made deep inside the learner's helpers is seen all the same. It is
    set in the thread that runs the learner's function, for the duration of that call only.
    """

    def __init__(self, forbidden: Sequence[Callable[..., Any]], reference: Callable[..., Any]) -> None:
        self.codes = {getattr(inspect.unwrap(f), "__code__", None): f for f in forbidden} if forbidden else {}
        self.codes.pop(None, None)
        self.builtins = {id(f): f for f in forbidden if not hasattr(inspect.unwrap(f), "__code__")}
        self.reference = getattr(inspect.unwrap(reference), "__code__", None)
        self.inside_reference: set[int] = set()
        self.called: Callable[..., Any] | None = None

    def wrap(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        if not (self.codes or self.builtins):
            return fn

        def watched(*args: Any) -> Any:
            previous = sys.getprofile()
            sys.setprofile(self._hook)
            try:
                return fn(*args)
            finally:
                sys.setprofile(previous)

        return watched

    def _hook(self, frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            code = frame.f_code
            if code is self.reference:
                self.inside_reference.add(id(frame))
            elif code in self.codes and not self.inside_reference and self.called is None:
                self.called = self.codes[code]
        elif event == "return":
            self.inside_reference.discard(id(frame))
        elif event == "c_call" and self.builtins and id(arg) in self.builtins and not self.inside_reference:
            if self.called is None:
                self.called = self.builtins[id(arg)]

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


def _guarded_compare(expected: Any, got: Any, atol: float, rtol: float, equal_nan: bool = False) -> str | None:
    """``_compare``, turning any failure to compare into a sentence: the comparison never raises."""
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            return _compare(expected, got, atol, rtol, equal_nan)
    except _Rejected as rejected:
        return str(rejected)
    except Exception as exc:
        return f"returned {_describe_value(got)}, which cannot be compared with the answer ({_describe(exc)})"


def _fmt(x: np.ndarray) -> str:
    """Values for a message: integers and booleans as such, floats to 4 significant digits, one line."""
    if x.ndim == 0:
        v = x.item()
        return _show_int(v) if isinstance(v, int) and not isinstance(v, bool) else (
            str(v) if isinstance(v, bool) else f"{v:.4g}")
    if x.dtype.kind == "f":
        return _short(str(np.round(x, 4).tolist()), 300)
    return _short(str(x.tolist()), 300)


def _compare(expected: Any, got: Any, atol: float, rtol: float, equal_nan: bool = False) -> str | None:
    """``None`` when ``got`` matches ``expected``, else a sentence saying how it differs."""
    if got is None:
        return "returned None (is a `return` statement missing?)"
    if isinstance(expected, str):
        if isinstance(got, str) and got == expected:
            return None
        if isinstance(got, str):
            return f"returned {_short(repr(got))}, expected {expected!r}"
        return f"returned {_describe_value(got)}, expected the string {expected!r}"
    exp = _values(expected)
    if isinstance(got, (int, np.integer)) and not isinstance(got, bool) and abs(int(got)) >= 2**63:
        # Beyond int64: compare as Python integers, and show the integer as it is, not wrapped around.
        if exp.ndim:
            return f"returned the integer {_show_int(int(got))}, expected an array of shape {exp.shape}"
        try:
            close = math.isclose(float(got), float(exp), rel_tol=rtol, abs_tol=atol)
        except OverflowError:
            close = False
        if exp.dtype.kind in "biu":
            close = int(got) == int(exp)
        return None if close else f"wrong value: expected {_fmt(exp)}, got {_show_int(int(got))}"
    got_arr = _values(got)
    if got_arr.shape != exp.shape:
        extra = (f" (it is a tuple of {len(got)} items: return only the answer)"
                 if isinstance(got, tuple) and got_arr.ndim else "")
        return (
            f"returned shape {got_arr.shape}, expected shape {exp.shape}{extra}"
            if exp.ndim
            else f"returned an array of shape {got_arr.shape}, expected a single number{extra}"
        )
    exact = exp.dtype.kind in "biu"  # counts, ids and masks: no tolerance
    if got_arr.dtype.kind == "f":
        got_nan = np.isnan(got_arr)
        if got_nan.any() and not np.isnan(exp.astype(np.float64)).any():
            return f"returned NaN: {_fmt(got_arr)}"
    if exact:
        if np.array_equal(got_arr, exp):
            return None
    else:
        exp_f, got_f = exp.astype(np.float64), got_arr.astype(np.float64)
        if np.allclose(got_f, exp_f, atol=atol, rtol=rtol, equal_nan=equal_nan):
            return None
    if exp.size > 12:
        # A big array in full would bury the message: point at the worst entry instead.
        got_f, exp_f = got_arr.astype(np.float64), exp.astype(np.float64)
        diff = np.abs(got_f - exp_f)
        # NaN where one is NaN (the worst), or where both are the same infinity (no difference at all)
        diff = np.where(got_f == exp_f, 0.0, np.where(np.isnan(diff), np.inf, diff))
        worst = np.unravel_index(int(np.argmax(diff)), exp.shape)
        where = tuple(int(i) for i in worst)
        return f"wrong value at index {where}: expected {_fmt(exp[worst])}, got {_fmt(got_arr[worst])}"
    if exp.dtype.kind == "b" and got_arr.dtype.kind != "b":
        got_arr = got_arr.astype(bool) if np.isin(got_arr, (0, 1)).all() else got_arr
    return f"wrong value: expected {_fmt(exp)}, got {_fmt(got_arr)}"


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
