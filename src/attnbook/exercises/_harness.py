"""The machinery every exercise checker shares.

A checker runs the learner's function on fixed and random cases, compares each answer with the
package's reference implementation, and returns a ``Verdict`` whose text says what passed or, for the
first case that fails, what went wrong and on which input. It never raises on a wrong answer:
exceptions, wrong shapes, NaNs and ``NotImplementedError`` all become sentences.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np


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


@dataclass
class Checker:
    """Checks a learner's function against ``reference`` on ``cases``.

    ``name`` is the function's name as the exercise asks for it; ``atol`` and ``rtol`` are the
    tolerances for numeric answers; ``mistakes`` are recognised wrong answers with hints.
    """

    name: str
    reference: Callable[..., Any]
    cases: Sequence[Case]
    mistakes: Sequence[Mistake] = field(default_factory=tuple)
    atol: float = 1e-8
    rtol: float = 1e-6

    def __call__(self, fn: Any) -> Verdict:
        if not callable(fn):
            return Verdict(False, f"{self.name}: expected a function, got {type(fn).__name__}.")
        for case in self.cases:
            problem = self._check_case(fn, case)
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
        return Verdict(True, f"{self.name}: all {len(self.cases)} checks passed.")

    def _check_case(self, fn: Callable[..., Any], case: Case) -> str | None:
        expected = self.reference(*_copy(case.args))
        try:
            # NumPy's own warnings (division by zero, ...) would repeat what the verdict says.
            with np.errstate(all="ignore"):
                got = fn(*_copy(case.args))
        except NotImplementedError:
            return _NOT_ATTEMPTED
        except Exception as exc:  # the learner's bug, reported rather than raised
            return f"raised {type(exc).__name__}: {exc} (input: {case.label})."
        problem = _compare(expected, got, self.atol, self.rtol)
        if problem is None:
            return None
        message = f"{problem} (input: {case.label})."
        for mistake in self.mistakes:
            try:
                with np.errstate(all="ignore"):
                    typical = mistake.fn(*_copy(case.args))
            except Exception:  # a typical mistake may crash where the learner's did not
                continue
            if _compare(typical, got, self.atol, self.rtol, equal_nan=True) is None:
                return f"{message} Hint: {mistake.hint}"
        return message


_NOT_ATTEMPTED = "not attempted"


def _copy(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """Fresh copies, so a function that changes its input in place cannot spoil later cases."""
    def fresh(a: Any) -> Any:
        if isinstance(a, np.ndarray):
            return a.copy()
        if hasattr(a, "detach") and hasattr(a, "clone"):  # a torch tensor, without importing torch
            return a.detach().clone()
        return a

    return tuple(fresh(a) for a in args)


def _to_numpy(x: Any) -> Any:
    """Torch tensors (with or without gradients, on any device) become NumPy arrays for comparing."""
    if hasattr(x, "detach") and hasattr(x, "cpu"):
        return x.detach().cpu().numpy()
    return x


def _fmt(x: Any) -> str:
    if isinstance(x, np.ndarray):
        return str(np.round(x, 4).tolist())  # one line, however many dimensions
    if isinstance(x, float):
        return f"{x:.4g}"
    return repr(x)


def _compare(expected: Any, got: Any, atol: float, rtol: float, equal_nan: bool = False) -> str | None:
    """``None`` when ``got`` matches ``expected``, else a sentence saying how it differs."""
    if got is None:
        return "returned None (is a `return` statement missing?)"
    expected, got = _to_numpy(expected), _to_numpy(got)
    if isinstance(expected, str):
        if got == expected:
            return None
        return f"returned {got!r}, expected {expected!r}"
    try:
        got_arr = np.asarray(got, dtype=np.float64)
    except (TypeError, ValueError):
        return f"returned {type(got).__name__} {got!r}, expected a number or an array of numbers"
    exp_arr = np.asarray(expected, dtype=np.float64)
    if got_arr.shape != exp_arr.shape:
        return (
            f"returned shape {got_arr.shape}, expected shape {exp_arr.shape}"
            if exp_arr.ndim
            else f"returned an array of shape {got_arr.shape}, expected a single number"
        )
    if np.isnan(got_arr).any() and not np.isnan(exp_arr).any():
        return f"returned NaN: {_fmt(got_arr if got_arr.ndim else float(got_arr))}"
    if not np.allclose(got_arr, exp_arr, atol=atol, rtol=rtol, equal_nan=equal_nan):
        if exp_arr.size > 12:
            # A big array in full would bury the message: point at the worst entry instead.
            with np.errstate(invalid="ignore"):
                worst = np.unravel_index(np.nanargmax(np.abs(got_arr - exp_arr)), exp_arr.shape)
            where = tuple(int(i) for i in worst)
            if np.asarray(expected).dtype == bool:
                return f"wrong value at index {where}: expected {bool(exp_arr[worst])}, got {bool(got_arr[worst])}"
            return (
                f"wrong value at index {where}: expected {float(exp_arr[worst]):.4g}, "
                f"got {float(got_arr[worst]):.4g}"
            )
        kind = np.asarray(expected).dtype.kind
        if kind in "biu":  # show booleans and integers as such, not as 1.0 and 0.0
            cast = bool if kind == "b" else int
            return (f"wrong value: expected {exp_arr.astype(cast).tolist()}, "
                    f"got {np.asarray(got_arr).astype(cast).tolist()}")
        exp_show = exp_arr if exp_arr.ndim else float(exp_arr)
        got_show = got_arr if got_arr.ndim else float(got_arr)
        return f"wrong value: expected {_fmt(exp_show)}, got {_fmt(got_show)}"
    return None
