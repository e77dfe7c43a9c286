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
    _NOT_ATTEMPTED,
    TIME_LIMIT,
    Case,
    Checker,
    Verdict,
    _call_with_time_limit,
    _TimedOut,
    _Watch,
)

# Only an answer that ran and returned values that differ gets a second look (not one that raised or hung).
_COMPARED = ("wrong value", "returned shape", "returned NaN", "returned an array of shape")

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
                    return Verdict(False, f"{self.name}: the part `{key}` disagrees: {text}")
            if self.name not in answer:
                known = ", ".join(repr(k) for k, _ in self.parts)
                return Verdict(False, f"{self.name}: the dict of parts has no {self.name!r} (the whole); expected "
                                      f"keys among {known} and {self.name!r}.")
            verdict = super().__call__(answer[self.name])
            if not verdict and verdict.attempted and any(key in answer for key, _ in self.parts):
                return Verdict(False, f"{verdict.message} Your parts each agree with the package's: look at how "
                                      f"{self.name} puts them together.")
            return verdict
        return super().__call__(answer)

    def _check_case(self, fn: Callable[..., Any], case: Case, forbidden: Sequence[Callable[..., Any]] = ()
                    ) -> str | None:
        problem = super()._check_case(fn, case, forbidden)
        if problem == _NOT_ATTEMPTED:
            return problem
        hook = self.diagnose if problem is not None else self.extra
        if hook is None or (problem is not None and not problem.startswith(_COMPARED)):
            return problem
        limit = TIME_LIMIT if self.time_limit is None else self.time_limit

        def call(*args: Any) -> Any:
            watch = _Watch(forbidden, self.reference)
            with np.errstate(all="ignore"):
                return _call_with_time_limit(watch.wrap(fn), args, limit)

        try:
            more = hook(fn, case, call)
        except (Exception, SystemExit, _TimedOut):  # a second look that fails adds nothing: the verdict stands
            more = None
        if more is None:
            return problem
        return more if problem is None else f"{problem} {more}"
