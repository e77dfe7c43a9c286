"""An exercise statement that points at a cell ("the cell below", "the next cell", "the cell after the check",
"the cell after it") points at a cell the exercise version keeps, and none points at a cell after its solution.

The exercise version drops every solution, the cells tagged ``solution`` among them, so a statement that sends
the learner to a cell of the chapter that is a solution would send them to nothing. The check runs on the
committed exercise versions (``notebooks/student/``), which ``tests/book/test_notebooks.py`` keeps current.
"""

from __future__ import annotations

import re

import nbformat
import pytest

from tools.notebooks import chapter_notebooks, read, student_path

CHAPTERS = chapter_notebooks()
IDS = [p.stem for p in CHAPTERS]

EXERCISE = re.compile(r"^\s*:{3,}\{exercise\}", re.MULTILINE)
LABEL = re.compile(r"^:label:\s*(\S+)", re.MULTILINE)
HINT = "<details><summary>Hint</summary>"
CHECK_CALL = re.compile(r"^\s*check_\w+\(", re.MULTILINE)

# What each phrase points at, from the statement's cell on.
BELOW = re.compile(r"\b(?:the\s+cell\s+below|the\s+next\s+cell)\b", re.IGNORECASE)
AFTER_CHECK = re.compile(r"\bthe\s+cell\s+after\s+the\s+check(?:er)?\b", re.IGNORECASE)
AFTER_IT = re.compile(r"\bthe\s+cell\s+after\s+it\b", re.IGNORECASE)
# The exercise version has no solution: a cell placed by it is nowhere there.
AFTER_SOLUTION = re.compile(r"\bthe\s+cells?\s+(?:after|below)\s+the\s+solution\b", re.IGNORECASE)


def _is_code(cell: nbformat.NotebookNode) -> bool:
    return cell.cell_type == "code" and cell.source.strip() != ""


def _next_kept(cells: list[nbformat.NotebookNode], start: int) -> int | None:
    """The index of the first cell from ``start`` on that is not a folded hint, or None past the end."""
    for i in range(start, len(cells)):
        if not (cells[i].cell_type == "markdown" and cells[i].source.lstrip().startswith(HINT)):
            return i
    return None


def pointer_problems(nb: nbformat.NotebookNode) -> list[str]:
    """Each pointer of an exercise statement in ``nb`` whose cell is missing, as a sentence."""
    cells, problems = nb.cells, []
    for i, cell in enumerate(cells):
        if cell.cell_type != "markdown" or not EXERCISE.search(cell.source):
            continue
        label = next(iter(LABEL.findall(cell.source)), f"cell {i}")
        text = " ".join(cell.source.split())
        if BELOW.search(text):
            j = _next_kept(cells, i + 1)
            if j is None or not _is_code(cells[j]):
                problems.append(f"{label}: says 'the cell below', and no code cell follows it")
        if AFTER_CHECK.search(text):
            check = next((j for j in range(i + 1, len(cells))
                          if cells[j].cell_type == "code" and CHECK_CALL.search(cells[j].source)), None)
            after = None if check is None else _next_kept(cells, check + 1)
            if after is None or not _is_code(cells[after]):
                problems.append(f"{label}: says 'the cell after the check', and no code cell follows the check")
        if AFTER_SOLUTION.search(text):
            problems.append(f"{label}: points at a cell after the solution, which the exercise version leaves out")
        if AFTER_IT.search(text):
            first = _next_kept(cells, i + 1)
            after = None if first is None or not _is_code(cells[first]) else _next_kept(cells, first + 1)
            if after is None or not _is_code(cells[after]):
                problems.append(f"{label}: says 'the cell after it', and no second code cell follows it")
    return problems


@pytest.mark.parametrize("path", CHAPTERS, ids=IDS)
def test_every_cell_an_exercise_points_at_is_in_the_exercise_version(path):
    assert pointer_problems(read(student_path(path))) == []


def _nb(*cells: tuple[str, str, list[str]]) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    for kind, source, tags in cells:
        cell = nbformat.v4.new_code_cell(source) if kind == "code" else nbformat.v4.new_markdown_cell(source)
        cell.metadata["tags"] = tags
        nb.cells.append(cell)
    return nb


STATEMENT = ":::{{exercise}} A thing (easy)\n:label: ex-00-thing\n\n*Apply.* {} Write `thing(x)`.\n:::"


def test_a_pointer_to_a_cell_the_exercise_version_dropped_is_found():
    # The exercise version of a chapter whose cell after the check was tagged solution: the check is last.
    dropped = _nb(("markdown", STATEMENT.format("Then run the cell after the check."), []),
                  ("markdown", f"{HINT}\n\nA hint.\n\n</details>", []),
                  ("code", "def thing(x):\n    raise NotImplementedError", []),
                  ("code", "check_thing(thing)", []),
                  ("markdown", "## Summary", []))
    assert pointer_problems(dropped) == ["ex-00-thing: says 'the cell after the check', and no code cell follows "
                                         "the check"]
    kept = _nb(*[(c.cell_type, c.source, []) for c in dropped.cells[:4]], ("code", "print(thing(1))", []))
    assert pointer_problems(kept) == []


def test_the_cell_below_skips_the_folded_hint_and_must_be_code():
    below = STATEMENT.format("Check your guess with the cell below.")
    assert pointer_problems(_nb(("markdown", below, []), ("markdown", f"{HINT}\n\nA hint.\n\n</details>", []),
                                ("code", "x = 1", []))) == []
    assert pointer_problems(_nb(("markdown", below, []), ("markdown", "## Summary", []))) != []
    after_it = STATEMENT.format("A colleague's code is below; the cell after it compares.")
    assert pointer_problems(_nb(("markdown", after_it, []), ("code", "def f(): ...", []))) != []
    assert pointer_problems(_nb(("markdown", after_it, []), ("code", "def f(): ...", []),
                                ("code", "f()", []))) == []
    after_solution = STATEMENT.format("Predict it before the cell after the solution computes it.")
    assert pointer_problems(_nb(("markdown", after_solution, []), ("code", "print(1)", []))) != []
