"""Every checker of every chapter: it accepts its reference, and each typical mistake it lists is
rejected with that mistake's hint (so a hint can never become unreachable)."""

import importlib
import pkgutil

import pytest

import attnbook.exercises as exercises
from attnbook.exercises._harness import Checker

CHECKERS = []
for info in pkgutil.iter_modules(exercises.__path__):
    if info.name.startswith("ch"):
        module = importlib.import_module(f"attnbook.exercises.{info.name}")
        CHECKERS += [(f"{info.name}.{c.name}", c) for c in vars(module).values() if isinstance(c, Checker)]


def test_every_chapter_with_exercises_has_checkers():
    chapters = {name.split(".")[0] for name, _ in CHECKERS}
    assert len(chapters) >= 16 and len(CHECKERS) >= 30


@pytest.mark.parametrize("name, checker", CHECKERS, ids=[n for n, _ in CHECKERS])
def test_checker_accepts_reference_and_names_each_mistake(name, checker):
    assert checker(checker.reference), checker(checker.reference).message
    assert len(checker.mistakes) >= 1
    for mistake in checker.mistakes:
        verdict = checker(mistake.fn)
        assert not verdict, f"{name} accepts the mistake meant for: {mistake.hint}"
        assert mistake.hint in verdict.message, verdict.message
