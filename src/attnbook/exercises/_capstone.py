"""A checker for an exercise that assembles parts into a whole and says which part disagrees.

``PartsChecker`` is a ``Checker`` of the whole (its reference, cases and mistakes as usual) with two
additions. It accepts, besides a function, a dict of the learner's parts keyed by name (``{"my_softmax":
..., "my_mha": ...}``): each part found there is checked by its own checker first, and the first that
fails is named. And when the whole disagrees with the reference, its ``diagnose`` (given the learner's
function, the case, and a way to call the function under the harness's time limit and watch) may look
deeper, for instance at intermediate results the learner records, and add a sentence naming the part.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from attnbook.exercises._harness import (
    COMPARED,
    TIME_LIMIT,
    Case,
    Checker,
    Outcome,
    Problem,
    Verdict,
    _call_with_time_limit,
    _short,
    _TimedOut,
)

# diagnose(fn, case, call) -> a sentence or None; call(*args) runs fn under the time limit and the watch.
Diagnose = Callable[[Callable[..., Any], Case, Callable[..., Any]], "str | None"]


@dataclass(repr=False)
class PartsChecker(Checker):
    """A ``Checker`` of an assembled whole that can check its parts one by one and name the one that disagrees.

    ``parts`` pairs a key of a dict answer with the checker of that part; ``diagnose`` (optional) adds a
    sentence when the whole disagrees; ``extra`` (optional) is a further test run once the whole agrees
    on a case, returning a sentence when it fails (``extra(fn, case, call)``).
    """

    parts: Sequence[tuple[str, Checker]] = field(default_factory=tuple)
    diagnose: Diagnose | None = None
    extra: Diagnose | None = None
    extra_time_limit: float | None = None  # for a further test longer than a case (a training run); None: time_limit

    def __call__(self, answer: Any) -> Verdict:
        if isinstance(answer, Mapping):
            for key, checker in self.parts:
                if key not in answer:
                    continue
                verdict = checker(answer[key])
                if not verdict.attempted:
                    return Verdict(False, f"{self.name}: the part `{key}` is not attempted yet (it raises "
                                          "NotImplementedError). Replace its `raise` line with your code and run "
                                          "the cell again.", attempted=False)
                if not verdict:
                    text = verdict.message.split(": ", 1)[-1]
                    return Verdict(False, f"{self.name}: the part `{key}` disagrees: {text}",
                                   outcome=verdict.outcome)
            if self.name not in answer:
                known = ", ".join(repr(k) for k, _ in self.parts)
                return Verdict(False, f"{self.name}: the dict of parts has no {self.name!r} (the whole); expected "
                                      f"keys among {known} and {self.name!r}.", outcome=Outcome.WRONG_FORM)
            verdict = super().__call__(answer[self.name])
            if not verdict and verdict.attempted and any(key in answer for key, _ in self.parts):
                return Verdict(False, f"{verdict.message} Your parts each agree with the package's: look at how "
                                      f"{self.name} puts them together.", outcome=verdict.outcome)
            return verdict
        return super().__call__(answer)

    def _check_case(self, fn: Callable[..., Any], case: Case, forbidden: Sequence[Callable[..., Any]] = (),
                    hints: bool = True) -> Problem | None:
        problem = super()._check_case(fn, case, forbidden, hints)
        hook = self.diagnose if problem is not None else self.extra
        if hook is None or (problem is not None and problem.outcome not in COMPARED):
            return problem
        limit = TIME_LIMIT if self.time_limit is None else self.time_limit
        if problem is None and self.extra_time_limit is not None:
            limit = self.extra_time_limit

        def call(*args: Any) -> Any:
            watch = self.watch(forbidden, fn, args)
            try:
                with np.errstate(all="ignore"):
                    got = _call_with_time_limit(watch.wrap(fn), args, limit)
            except _TimedOut:
                failed: BaseException | None = _LearnerFailed(f"did not return within {limit:g} s")
            except (Exception, SystemExit) as exc:
                failed = _LearnerFailed(f"raised {type(exc).__name__}: {_short(str(exc), 200)}")
            else:
                failed = None
            if watch.called is not None:
                raise _Refused(watch.refusal())
            if failed is not None:
                raise failed
            return got

        try:
            more = hook(fn, case, call)
        except _Refused as refused:
            return Problem(Outcome.REFUSED, f"{refused} (input: {case.label}). {self.allowances()}")
        except _LearnerFailed as failed:
            if problem is not None:
                return problem
            return Problem(Outcome.ERROR, f"agrees on {case.label}, but on a further test it {failed}.")
        except CannotCheck as reason:
            if problem is not None:
                return problem
            return Problem(Outcome.CANNOT_CHECK, f"agrees on {case.label}, but {reason}; this is not a pass.")
        except (Exception, SystemExit, _TimedOut):
            if problem is not None:  # a second look that fails adds nothing: the verdict stands
                return problem
            raise  # a further test that fails to run: the checker cannot judge (never a silent pass)
        if more is None:
            return problem
        if problem is None:
            return Problem(Outcome.WRONG_VALUE, more)
        return problem.extended(more)


class _LearnerFailed(Exception):
    """The learner's function raised, or did not return, during a diagnosis or a further test."""


class _Refused(Exception):
    """A call the policy refuses, made by the learner's function during a diagnosis or a further test."""


class CannotCheck(Exception):  # noqa: N818 (it is a reason, raised by a further test that cannot run)
    """Raised by a further test (``extra``) that cannot be carried out here (a data set that cannot be loaded):
    the verdict says so, and does not pass."""
