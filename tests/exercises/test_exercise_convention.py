"""Every chapter's exercises follow the convention in CONTRIBUTING.md, and its student version folds the hints.

The convention: each exercise title ends with its difficulty, ``(easy)``, ``(medium)`` or ``(hard)``; the
exercises run from easy to hard; at least one exercise has a folded prose solution (a ``{solution}``
directive, the kind an exercise to derive, predict, debug or extend gets). In the student version the
hints are not comments in the code but a folded ``<details>`` cell just before the code cell.
"""

from __future__ import annotations

import re

import nbformat
import pytest

from tools import student
from tools.notebooks import chapter_notebooks, read, student_path

CHAPTERS = chapter_notebooks()
IDS = [p.stem for p in CHAPTERS]

EXERCISE = re.compile(r"^\s*:{3,}\{exercise\}\s*(?P<title>.*?)\s*$", re.MULTILINE)
DIFFICULTY = re.compile(r"\((easy|medium|hard)\)$")
RANK = {"easy": 0, "medium": 1, "hard": 2}
PROSE_SOLUTION = re.compile(r"^\s*:{3,}\{solution\}\s*(\S+)", re.MULTILINE)
LABEL = re.compile(r"^:label:\s*(\S+)", re.MULTILINE)
HINT_COMMENT = re.compile(r"^\s*#\s*Hint:", re.MULTILINE | re.IGNORECASE)
FOLDED_HINT = re.compile(r"^<details><summary>Hint</summary>\n\n.+\n\n</details>$", re.DOTALL)


def exercise_titles(nb: nbformat.NotebookNode) -> list[str]:
    return [m["title"] for c in nb.cells if c.cell_type == "markdown" for m in EXERCISE.finditer(c.source)]


def difficulties(titles: list[str]) -> list[str]:
    found = [DIFFICULTY.search(t) for t in titles]
    missing = [t for t, m in zip(titles, found, strict=True) if m is None]
    assert not missing, f"exercise titles without a difficulty at their end: {missing}"
    return [m.group(1) for m in found]


@pytest.mark.parametrize("path", CHAPTERS, ids=IDS)
def test_exercises_show_their_difficulty_and_run_from_easy_to_hard(path):
    titles = exercise_titles(read(path))
    assert len(titles) >= 3, titles
    levels = difficulties(titles)
    ranks = [RANK[level] for level in levels]
    assert ranks == sorted(ranks), f"not ordered easy to hard: {list(zip(titles, levels, strict=True))}"


@pytest.mark.parametrize("path", CHAPTERS, ids=IDS)
def test_some_exercise_has_a_folded_prose_solution(path):
    nb = read(path)
    labels = {m for c in nb.cells if c.cell_type == "markdown" and EXERCISE.search(c.source)
              for m in LABEL.findall(c.source)}
    prose = [(m.group(1), c.source) for c in nb.cells if c.cell_type == "markdown"
             for m in PROSE_SOLUTION.finditer(c.source)]
    assert prose, "no exercise with a prose solution"
    assert all(label in labels for label, _ in prose), [label for label, _ in prose]
    assert all(":class: dropdown" in source for _, source in prose)


@pytest.mark.parametrize("path", CHAPTERS, ids=IDS)
def test_student_version_folds_its_hints(path):
    chapter, nb = read(path), read(student_path(path))
    n_hints = sum(bool(student.solution_hints(c.source)) for c in chapter.cells if c.cell_type == "code")
    assert not any(HINT_COMMENT.search(c.source) for c in nb.cells if c.cell_type == "code")
    folded = [i for i, c in enumerate(nb.cells) if c.cell_type == "markdown" and c.source.startswith("<details>")]
    assert len(folded) == n_hints
    for i in folded:
        assert FOLDED_HINT.match(nb.cells[i].source), nb.cells[i].source
        after = nb.cells[i + 1]
        assert after.cell_type == "code" and "raise NotImplementedError" in after.source


def test_hints_become_one_folded_cell_before_their_code():
    source = (
        "def f(x):\n    ### BEGIN SOLUTION\n    ### HINT: think of the square,\n"
        "    ### HINT: not the double.\n    return x * x\n    ### END SOLUTION\n"
        "\n\ndef g(x):\n    ### BEGIN SOLUTION\n    return -x\n    ### END SOLUTION\n"
    )
    assert student.solution_hints(source) == ["Think of the square, not the double."]
    stub = student.strip_solutions(source, "t")
    assert "Hint" not in stub and "HINT" not in stub
    assert stub.count("raise NotImplementedError") == 2
    cell = student.hint_cell(["first.", "second."], "abc123")
    assert cell.cell_type == "markdown" and cell.id == "abc123-hint"
    assert cell.source == "<details><summary>Hint</summary>\n\nfirst.\n\nsecond.\n\n</details>"
    assert FOLDED_HINT.match(cell.source)


def test_student_version_puts_the_hint_cell_just_before_its_code(tmp_path, monkeypatch):
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("# 99. A chapter"),
        nbformat.v4.new_code_cell("def f(x):\n    ### BEGIN SOLUTION\n    ### HINT: a square.\n"
                                  "    return x * x\n    ### END SOLUTION"),
        nbformat.v4.new_code_cell("print(1)"),
    ]
    path = tmp_path / "99_chapter.ipynb"
    nbformat.write(nb, path)
    monkeypatch.setattr(student.badges, "apply", lambda nb, *args, **kwargs: nb)
    out = student.make_student(path)
    sources = [c.source for c in out.cells]
    assert sources[1] == "<details><summary>Hint</summary>\n\nA square.\n\n</details>"
    assert sources[2] == "def f(x):\n    # YOUR CODE HERE\n    raise NotImplementedError"
    assert sources[3] == "print(1)"
    assert out.cells[1].id == f"{nb.cells[1].id}-hint"
