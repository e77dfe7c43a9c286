"""What the authoring tools share: where the chapters are, the book's configuration, Colab links."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import yaml

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
STUDENT = NOTEBOOKS / "student"
CHAPTER_NAME = re.compile(r"^\d\d_[a-z0-9_]+\.ipynb$")


def chapter_notebooks() -> list[Path]:
    """The chapter notebooks, ``notebooks/NN_name.ipynb``, in order."""
    return sorted(p for p in NOTEBOOKS.glob("*.ipynb") if CHAPTER_NAME.match(p.name))


def student_path(chapter: Path) -> Path:
    """Where the student version of a chapter lives."""
    return STUDENT / chapter.name


def config() -> dict:
    """The book's ``_config.yml``."""
    return yaml.safe_load((ROOT / "_config.yml").read_text())


def repository() -> tuple[str, str]:
    """``(url, ref)`` of the book's repository, from ``_config.yml``'s ``repository.url`` and ``.branch``.

    The ref (a branch, or a tag) is the one version both halves of a chapter in Colab come from: its badge opens
    the notebook at that ref, and its setup cell installs the package from the same ref.
    """
    repo = config()["repository"]
    return repo["url"].rstrip("/"), repo.get("branch", "main")


def colab_url(notebook: Path) -> str:
    """The address that opens ``notebook`` (a path inside the repository) in Google Colab."""
    url, branch = repository()
    github = url.removeprefix("https://github.com/")
    relative = notebook.resolve().relative_to(ROOT).as_posix()
    return f"https://colab.research.google.com/github/{github}/blob/{branch}/{relative}"


def read(path: Path) -> nbformat.NotebookNode:
    return nbformat.read(path, as_version=4)


def write(nb: nbformat.NotebookNode, path: Path) -> None:
    """Write a notebook the same way every time, so regenerating a file changes nothing."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(nbformat.writes(nb) + "\n")


def tags(cell: nbformat.NotebookNode) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


# How nbval treats a cell's output. Every stored output is compared exactly unless the cell carries the
# tag below; such a cell must assert the claim its output supports (see CONTRIBUTING.md, "Outputs that
# reproduce on any CPU"). Skipping a cell altogether is never allowed.
IGNORE_OUTPUT_TAG = "nbval-ignore-output"
IGNORE_OUTPUT_COMMENT = "NBVAL_IGNORE_OUTPUT"
SKIP_MARKERS = ("nbval-skip", "NBVAL_SKIP")
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


def python_source(cell: nbformat.NotebookNode) -> str:
    """The cell's code as plain Python, with IPython's magics turned into calls."""
    from IPython.core.inputtransformer2 import TransformerManager

    return TransformerManager().transform_cell(cell.source)


def asserts(cell: nbformat.NotebookNode) -> bool:
    """Whether the cell itself runs an assertion: an ``assert`` statement or an ``assert_*`` call.

    Only code that runs when the cell runs counts: an assertion inside a function or class the cell
    merely defines does not.
    """
    import ast

    def visit(node: ast.AST) -> bool:
        if isinstance(node, ast.Assert):
            return True
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name.startswith("assert"):
                return True
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            return False
        return any(visit(child) for child in ast.iter_child_nodes(node))

    return visit(ast.parse(python_source(cell)))


def output_ignored(cell: nbformat.NotebookNode) -> bool:
    """Whether nbval leaves this cell's output out of the comparison."""
    return IGNORE_OUTPUT_TAG in tags(cell) or IGNORE_OUTPUT_COMMENT in cell.source


def skipped(cell: nbformat.NotebookNode) -> bool:
    """Whether nbval would not run this cell at all."""
    return any(m in tags(cell) or m in cell.source for m in SKIP_MARKERS)


def shows_widget(cell: nbformat.NotebookNode) -> bool:
    return any(WIDGET_MIME in o.get("data", {}) for o in cell.get("outputs", []))


def comparison(cell: nbformat.NotebookNode) -> str:
    """How nbval checks a code cell: ``"exact"``, ``"assertion"`` (output left out, claim asserted),
    ``"widget"`` (a widget display, output left out, its set-up asserted) or ``"unchecked"``."""
    if skipped(cell) or (output_ignored(cell) and not asserts(cell)):
        return "unchecked"
    if output_ignored(cell):
        return "widget" if shows_widget(cell) else "assertion"
    return "exact"
