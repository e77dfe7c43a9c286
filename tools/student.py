"""Write the student version of every chapter into ``notebooks/student/``.

A student version is its chapter with the solutions taken out and the outputs cleared:

- code between ``### BEGIN SOLUTION`` and ``### END SOLUTION`` becomes ``# YOUR CODE HERE`` and
  ``raise NotImplementedError``; such blocks sit inside a function body, so defining the function
  works and its checker reports "not attempted yet";
- the block's ``### HINT:`` lines leave the code: they go into a markdown cell just before it, folded
  in a ``<details>`` element, so that a learner opens a hint on purpose (it renders folded in Jupyter
  and in Colab); the hints of one block form one paragraph, each block's its own, its sentences
  capitalised (a sentence that opens with a name from the code, such as ``x`` or ``np.argsort``, keeps it);
- markdown cells holding a ``{solution}`` directive (or its gated ``solution-start`` and
  ``solution-end`` markers) and cells tagged ``solution`` are removed;
- the Colab badge points at the student file.

Usage: ``python -m tools.student [notebooks/NN_name.ipynb ...]`` (default: every chapter).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import nbformat

from tools import badges
from tools.notebooks import chapter_notebooks, read, student_path, tags, write

BEGIN, END, HINT = "### BEGIN SOLUTION", "### END SOLUTION", "### HINT:"
SOLUTION_DIRECTIVE = re.compile(r"^\s*(:{3,}|`{3,})\{solution(-start|-end)?\}", re.MULTILINE)
# The first word of a sentence (at the start, or after a full stop, question or exclamation mark and a space)
# when it is an English word: the article "a", or two or more lower-case letters that end the word. A name
# from the code (x, np.argsort, in_proj_weight, p(1), d/du, arctan2) is not one and keeps its case.
SENTENCE_START = re.compile(r"(^|[.?!]\s+)(a(?= )|[a-z]{2,}(?![\w.(/]))")


class SolutionMarkerError(ValueError):
    """A solution block that cannot be turned into an exercise stub."""


def strip_solutions(source: str, where: str) -> str:
    """Replace each marked solution block in ``source`` with a ``raise``; the hints leave the code."""
    out: list[str] = []
    block: list[str] | None = None
    indent = ""
    for line in source.splitlines():
        stripped = line.strip()
        if stripped == BEGIN:
            if block is not None:
                raise SolutionMarkerError(f"{where}: {BEGIN} inside another solution block")
            indent = line[: len(line) - len(line.lstrip())]
            if not indent:
                raise SolutionMarkerError(
                    f"{where}: a solution block must sit inside a function body; "
                    "tag a cell that is a solution as a whole with 'solution' instead"
                )
            block = []
        elif stripped == END:
            if block is None:
                raise SolutionMarkerError(f"{where}: {END} without {BEGIN}")
            out.append(f"{indent}# YOUR CODE HERE")
            out.append(f"{indent}raise NotImplementedError")
            block = None
        elif block is not None:
            block.append(line)
        else:
            out.append(line)
    if block is not None:
        raise SolutionMarkerError(f"{where}: {BEGIN} without {END}")
    return "\n".join(out)


def capitalise_sentences(text: str) -> str:
    """``text`` with the first word of each sentence capitalised, where that word is an English word."""
    return SENTENCE_START.sub(lambda m: m.group(1) + m.group(2)[0].upper() + m.group(2)[1:], text)


def solution_hints(source: str) -> list[str]:
    """The text of the ``### HINT:`` lines of each marked solution block, one paragraph per block, its sentences
    capitalised (the lines of a block are one text: a sentence may run over several)."""
    hints: list[str] = []
    block: list[str] | None = None
    for line in source.splitlines():
        stripped = line.strip()
        if stripped == BEGIN:
            block = []
        elif stripped == END and block is not None:
            if block:
                hints.append(capitalise_sentences(" ".join(block)))
            block = None
        elif block is not None and stripped.startswith(HINT):
            block.append(stripped[len(HINT):].strip())
    return hints


def hint_cell(hints: list[str], code_cell_id: str | None = None) -> nbformat.NotebookNode:
    """A markdown cell holding ``hints`` folded: the learner clicks *Hint* to read them.

    Its id is made from the id of the code cell it belongs to, so regenerating changes nothing.
    """
    body = "\n\n".join(hints)
    cell = nbformat.v4.new_markdown_cell(f"<details><summary>Hint</summary>\n\n{body}\n\n</details>")
    if code_cell_id:
        cell.id = f"{code_cell_id}-hint"
    else:
        cell.pop("id", None)
    return cell


def is_solution_cell(cell: nbformat.NotebookNode) -> bool:
    if "solution" in tags(cell):
        return True
    return cell.cell_type == "markdown" and bool(SOLUTION_DIRECTIVE.search(cell.source))


def make_student(chapter: Path) -> nbformat.NotebookNode:
    """The student version of ``chapter``, as a notebook object."""
    nb = read(chapter)
    cells = []
    for i, cell in enumerate(nb.cells):
        if is_solution_cell(cell):
            continue
        if cell.cell_type == "code":
            hints = solution_hints(cell.source)
            if hints:
                cells.append(hint_cell(hints, cell.get("id")))
            cell.source = strip_solutions(cell.source, f"{chapter.name}, cell {i}")
            cell.outputs = []
            cell.execution_count = None
        cells.append(cell)
    nb.cells = cells
    nb.metadata.pop("widgets", None)
    return badges.apply(nb, student_path(chapter), student=True)


def main(paths: list[str]) -> None:
    chapters = [Path(p).resolve() for p in paths] or chapter_notebooks()
    for chapter in chapters:
        write(make_student(chapter), student_path(chapter))
        print(f"student: {student_path(chapter).relative_to(chapter.parent.parent)}")


if __name__ == "__main__":
    main(sys.argv[1:])
