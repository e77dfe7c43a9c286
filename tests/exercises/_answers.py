"""Helpers for the exercise tests: answers built from a checker's own reference.

A checker refuses an answer that calls into ``attnbook`` (its own reference included), so a test that
builds its submissions from the reference (the battery's tensors, lists and near misses of the right
values) runs them with the watch off, through ``unwatched()``. The policy itself is tested with the watch
on (``test_checker_policy.py`` and each chapter's tests).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from attnbook.exercises._harness import Checker


@contextlib.contextmanager
def unwatched() -> Iterator[None]:
    """Checks run inside this block do not watch the answer's calls (the policy is off)."""
    original = Checker.watch

    def watch(self: Checker, forbidden: Any, fn: Any, args: Any) -> Any:
        w = original(self, forbidden, fn, args)
        w.trusted = True
        return w

    Checker.watch = watch  # type: ignore[method-assign]
    try:
        yield
    finally:
        Checker.watch = original  # type: ignore[method-assign]


def reference_answer(checker: Checker) -> Callable[..., Any]:
    """An answer that returns the reference's values (the reference itself is refused as an answer)."""
    ref = checker.reference

    def answer(*args: Any) -> Any:
        return ref(*args)

    return answer


def accepts_reference(checker: Checker) -> Any:
    """The verdict on the reference's values, with the watch off."""
    with unwatched():
        return checker(reference_answer(checker))
