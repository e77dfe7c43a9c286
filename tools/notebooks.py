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
    """``(url, branch)`` of the book's repository, from ``_config.yml``."""
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
