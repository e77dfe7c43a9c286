"""Every checker of every chapter: it accepts its reference's values (with the watch off: the reference
itself is refused as an answer), and each typical mistake it lists is rejected with that mistake's hint
(so a hint can never become unreachable)."""

import inspect
import pydoc

import pytest
from _answers import accepts_reference

import attnbook.exercises as exercises
from attnbook.exercises._harness import Case, Checker, chapter_checkers
from attnbook.exercises._modules import ModuleChecker, module_checkers

FOUND = chapter_checkers()
CHECKERS = [(name, c) for name, c, _ in FOUND]
PRIVATE = {id(c) for _, c, private in FOUND if private}  # a capstone's checks of its parts


def test_every_chapter_with_exercises_has_checkers():
    chapters = {name.split(".")[0] for name, _ in CHECKERS}
    assert len(chapters) >= 16 and len(CHECKERS) >= 30


@pytest.mark.parametrize("name, checker", CHECKERS, ids=[n for n, _ in CHECKERS])
def test_checker_accepts_reference_and_names_each_mistake(name, checker):
    assert accepts_reference(checker), accepts_reference(checker).message
    assert len(checker.mistakes) >= 1
    for mistake in checker.mistakes:
        verdict = checker(mistake.fn)
        assert not verdict, f"{name} accepts the mistake meant for: {mistake.hint}"
        assert mistake.hint in verdict.message, verdict.message


# --- the public checkers: documented objects, one per exercise ----------------------------------------

PUBLIC = [name for name in exercises.__all__ if name.startswith("check_")]


def test_every_checker_is_exported_under_its_public_name():
    exported = {id(getattr(exercises, name)) for name in PUBLIC}
    public = [checker for _, checker in CHECKERS if id(checker) not in PRIVATE]
    public += [checker for _, checker in module_checkers()]  # the exercises that ask for a module's class
    assert exported == {id(checker) for checker in public}
    assert len(PUBLIC) == len(public)


@pytest.mark.parametrize("name", PUBLIC)
def test_public_checker_is_a_checker_whose_docstring_states_the_contract(name):
    check = getattr(exercises, name)
    if isinstance(check, ModuleChecker):  # an exercise that asks for a class: the verdict names the class
        assert name == "check_" + "".join(f"_{c.lower()}" if c.isupper() else c for c in check.name).lstrip("_")
        assert check.__doc__ == check.doc and check.doc.startswith(f"Check the class ``{check.name}(")
        assert inspect.getdoc(check) == check.doc
        text = repr(check)
        assert "\n" not in text and text.startswith(f"<module checker for {check.name}: Check the class")
        return
    assert isinstance(check, Checker)
    assert name == f"check_{check.name}"  # the verdict names the function the exercise asks for
    assert check.__doc__ == check.doc and check.doc.startswith("Check ``fn(")
    assert inspect.getdoc(check) == check.doc  # what IPython's `check_x?` shows
    assert check.doc in pydoc.render_doc(check, renderer=pydoc.plaintext)  # what help(check_x) shows
    text = repr(check)
    assert "\n" not in text and text.startswith(f"<checker for {check.name}: Check fn(") and text.endswith(">")


def test_repr_of_a_checker_is_one_line_whatever_its_docstring():
    check = Checker(name="double", doc="Check ``fn(x) -> 2 x``:\n    twice ``x``,\n    elementwise.",
                    reference=lambda x: 2 * x, cases=[Case("x=1", (1,))])
    assert repr(check) == "<checker for double: Check fn(x) -> 2 x: twice x, elementwise.>"
    assert check.__doc__ == check.doc
    assert Checker(name="other", doc="Check ``fn()``.", reference=lambda: 0, cases=[]).__doc__ == "Check ``fn()``."
