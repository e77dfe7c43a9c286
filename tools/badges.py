"""Write the "Open in Colab" badge and the Colab setup cell into every chapter and student version.

Both come from ``repository`` in ``_config.yml``: its ``url``, and its ``branch``, the one ref (a branch or a
tag) that the badge opens the notebook at and that the setup cell installs the package from, so that the
notebook and the package a reader runs in Colab are always the same version. The badge is the markdown
cell tagged ``colab-badge`` (inserted after the title cell if missing); the setup cell is the code cell
tagged ``colab-setup`` (inserted before the first code cell if missing), and carries the tag ``remove-cell``
so that the site leaves it out (it does nothing outside Colab).
Usage: ``python -m tools.badges [notebooks/NN_name.ipynb ...]`` (default: every chapter); the student
version of each chapter named is rewritten too.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat

from tools.notebooks import (
    ROOT,
    chapter_notebooks,
    colab_url,
    read,
    repository,
    student_path,
    tags,
    write,
)

BADGE_IMAGE = "https://colab.research.google.com/assets/colab-badge.svg"
SETUP_TAGS = ["colab-setup", "remove-cell"]  # remove-cell: MyST-NB leaves the cell out of the site


def install_spec() -> str:
    """What the setup cell gives pip: the package at the ref the badges open, ``attnbook @ git+URL@REF``."""
    url, ref = repository()
    return f"attnbook @ git+{url}@{ref}"


def badge_source(notebook: Path, student: bool) -> str:
    """Markdown of the badge cell for ``notebook``."""
    badge = f"[![Open In Colab]({BADGE_IMAGE})]({colab_url(notebook)})"
    if student:
        return f"{badge}\n\n*Exercise version: the solutions are removed. Fill in each exercise and run its check.*"
    exercises = colab_url(student_path(notebook))
    return f"{badge} &nbsp; [exercise version, without solutions]({exercises})"


def setup_source() -> str:
    """Code of the setup cell: installs the package, at the notebook's own ref, in Colab and only there."""
    return (
        "# Setup: in Google Colab this installs the attnbook package; anywhere else it does nothing\n"
        "# (locally, `make book` or `pip install -e .` has installed it already).\n"
        "import sys\n"
        "\n"
        'if "google.colab" in sys.modules:\n'
        f'    %pip install --quiet "{install_spec()}"'
    )


def _find(nb: nbformat.NotebookNode, tag: str) -> int | None:
    return next((i for i, c in enumerate(nb.cells) if tag in tags(c)), None)


def apply(nb: nbformat.NotebookNode, notebook: Path, student: bool) -> nbformat.NotebookNode:
    """Put the badge and setup cells into ``nb`` (which is saved at ``notebook``)."""
    i = _find(nb, "colab-badge")
    if i is None:
        nb.cells.insert(1, nbformat.v4.new_markdown_cell(metadata={"tags": ["colab-badge"]}))
        i = 1
    nb.cells[i].source = badge_source(notebook, student)
    j = _find(nb, "colab-setup")
    if j is None:
        j = next((k for k, c in enumerate(nb.cells) if c.cell_type == "code"), len(nb.cells))
        cell = nbformat.v4.new_code_cell(metadata={"tags": ["colab-setup"]})
        nb.cells.insert(j, cell)
    nb.cells[j].source = setup_source()
    nb.cells[j].metadata["tags"] = tags(nb.cells[j]) + [t for t in SETUP_TAGS if t not in tags(nb.cells[j])]
    return nb


def main(paths: list[str]) -> None:
    chapters = [Path(p).resolve() for p in paths] or chapter_notebooks()
    for chapter in chapters:
        write(apply(read(chapter), chapter, student=False), chapter)
        print(f"badges: {chapter.name}")
        student = student_path(chapter)
        if student.exists():
            write(apply(read(student), student, student=True), student)
            print(f"badges: {student.relative_to(ROOT)}")


if __name__ == "__main__":
    main(sys.argv[1:])
