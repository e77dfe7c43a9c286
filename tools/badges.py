"""Write the "Open in Colab" badge and the Colab setup cell into every chapter notebook.

Both come from the repository URL in ``_config.yml``. The badge is the markdown cell tagged
``colab-badge`` (inserted after the title cell if missing); the setup cell is the code cell tagged
``colab-setup`` (inserted before the first code cell if missing). Usage: ``python -m tools.badges``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat

from tools.notebooks import (
    chapter_notebooks,
    colab_url,
    read,
    repository,
    student_path,
    tags,
    write,
)

BADGE_IMAGE = "https://colab.research.google.com/assets/colab-badge.svg"


def badge_source(notebook: Path, student: bool) -> str:
    """Markdown of the badge cell for ``notebook``."""
    badge = f"[![Open In Colab]({BADGE_IMAGE})]({colab_url(notebook)})"
    if student:
        return f"{badge}\n\n*Exercise version: the solutions are removed. Fill in each exercise and run its check.*"
    exercises = colab_url(student_path(notebook))
    return f"{badge} &nbsp; [exercise version, without solutions]({exercises})"


def setup_source() -> str:
    """Code of the setup cell: installs the package in Colab, and only there."""
    url, branch = repository()
    return (
        "# Setup: in Google Colab this installs the attnbook package; anywhere else it does nothing\n"
        "# (locally, `make book` or `pip install -e .` has installed it already).\n"
        "import sys\n"
        "\n"
        'if "google.colab" in sys.modules:\n'
        f'    %pip install --quiet "attnbook @ git+{url}@{branch}"'
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
    return nb


def main(paths: list[str]) -> None:
    chapters = [Path(p).resolve() for p in paths] or chapter_notebooks()
    for chapter in chapters:
        write(apply(read(chapter), chapter, student=False), chapter)
        print(f"badges: {chapter.name}")


if __name__ == "__main__":
    main(sys.argv[1:])
